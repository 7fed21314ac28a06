"""Reading the pod templates of one object: each template its kind's definition names, or, for a kind trtguard
does not know, each pod spec found by searching the object; then the images found outside them.

:class:`PodTemplates` builds the :class:`~policies.workload_model._pods.PodTemplate` of each, and collects the
images,
engines and problems of all of them into one list each, with real JSON paths
(``spec.workerGroupSpecs[1].template.spec.containers[0].image``). Each template is read by its own
:class:`~policies.workload_model._podspec.PodSpecReader`, so engines resolve against the volumes and
containers of the Pod
they belong to; a container an operator adds to another template's Pods (KubeRay's autoscaler) is read
into that template, and the workers that run a template's model (a KServe predictor's ``workerSpec``) read
its models too. Who else can read an engine is one graph over every template
(:mod:`policies.workload_model._sharing`):
storage that can outlive a Pod and the node reach across templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.workload_model._discovery import find_images, find_pod_specs
from policies.workload_model._kinds import KindDefinition, Template
from policies.workload_model._paths import Match, child
from policies.workload_model._pods import Container, PodTemplate, Tally
from policies.workload_model._podspec import (
    ENGINES_ANNOTATION,
    MAPPINGS,
    Candidate,
    EngineUse,
    ImageUse,
    PodSpecReader,
    Problem,
    type_name,
)
from policies.workload_model._scheduling import read_node_selection
from policies.workload_model._sharing import HOST, Attachment, readers
from verifier.base import InputError

__all__ = ["PodTemplates", "mapping_field", "string_map"]


@dataclass(slots=True)
class _Read:
    """One template being read: where it is, what it is, its reader (None: no pod spec could be read)."""

    path: str
    spec_path: str
    role: str
    spec: Mapping[str, Any]
    reader: PodSpecReader | None
    template: Template | None = None
    joined: bool = False
    """A container read into another template's Pods: only its images (and defaulted image) are its own."""
    images: list[ImageUse] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)


class PodTemplates:
    """The templates, images, engines and problems of an object's pod templates, read one at a time."""

    def __init__(
        self,
        obj: Mapping[str, Any],
        annotations: Mapping[str, str],
        problems: list[Problem],
        tally: Tally | None = None,
    ) -> None:
        self.obj = obj
        self.annotations = annotations
        self.problems = problems
        self.tally = tally or Tally()
        self.images: list[ImageUse] = []
        self.engines: list[EngineUse] = []
        self.templates: list[PodTemplate] = []
        self.defaulted: list[str] = []
        #: Image volumes found outside every pod spec read: engine candidates no container is known to read.
        self.unplaced: list[EngineUse] = []
        self.object_annotations_read = False
        self._reads: list[_Read] = []

    def read(self, definition: KindDefinition) -> None:
        """Every template of ``definition`` found in the object (a lone fixed template must be there)."""
        for template in definition.templates:
            if definition.single_template:
                self._template(template, template.path.text, _strict(self.obj, definition), None)
                continue
            for root_path, root, match in template.path.expand_items(self.obj):
                if not isinstance(root, MAPPINGS):
                    self.problems.append(Problem(root_path, f"must be an object, found {type_name(root)}"))
                    self._add(root_path, root_path, _role(template, match), {}, None)
                elif not self._join(template, root_path, root):
                    self._template(template, root_path, root, match)
        if ENGINES_ANNOTATION in self.annotations and not self.object_annotations_read and self._reads:
            where = sorted({t.annotations_path for t in definition.templates if t.annotations_path})
            self.problems.append(
                Problem(
                    f"metadata.annotations[{ENGINES_ANNOTATION}]",
                    f"a {definition.kind}'s own annotations do not reach the Pods it makes, so these engines "
                    "cannot be tied to the containers that run them; declare them on the pod template "
                    f"that runs them ({', '.join(where) or 'its pod template metadata'})",
                )
            )
        self._finish()

    def _join(self, template: Template, root_path: str, root: Mapping[str, Any]) -> bool:
        """Read a container that runs in another template's Pods into that template (False: it has no
        such template, or it is not read yet: the container is then a template of its own). Its image
        keeps its place among the images, after those of the templates read before it."""
        host = next((r for r in self._reads if r.path == template.joins), None) if template.joins else None
        if host is None or host.reader is None:
            return False
        images, defaulted = len(host.reader.images), len(host.reader.defaulted)
        host.reader.read_container(root, root_path, image_required=False)
        joined = _Read(root_path, root_path, template.role, {}, None, joined=True)
        joined.images, joined.defaulted = host.reader.images[images:], host.reader.defaulted[defaulted:]
        del host.reader.images[images:], host.reader.defaulted[defaulted:]
        self._reads.append(joined)
        return True

    def _template(
        self, template: Template, root_path: str, root: Mapping[str, Any], match: Match | None
    ) -> None:
        role = _role(template, match)
        if template.shape == "container":
            reader = self._reader({}, root_path, root_path, template.uri_env)
            reader.read_container(root, root_path, image_required=False)
            self._add(root_path, root_path, role, {}, reader, template)
            return
        spec, spec_path = root, root_path
        template_annotations: Mapping[str, str] = {}
        annotations_path = None
        if template.shape == "podTemplate":
            spec_path = f"{root_path}.spec"
            found = root.get("spec")
            if not isinstance(found, MAPPINGS):
                self.problems.append(
                    Problem(
                        spec_path,
                        "the pod template has no spec"
                        if found is None
                        else f"must be an object, found {type_name(found)}",
                    )
                )
                self._add(root_path, spec_path, role, {}, None, template)
                return
            spec = found
            annotations_path = f"{root_path}.metadata"
            template_metadata = mapping_field(root.get("metadata"), annotations_path, self.problems)
            annotations_path += ".annotations"
            template_annotations = string_map(
                template_metadata.get("annotations"), annotations_path, self.problems
            )
        elif template.annotations is not None:
            annotations_path = child(root_path, template.annotations)
            template_annotations = string_map(root.get(template.annotations), annotations_path, self.problems)
        reader = self._reader(spec, spec_path, root_path, template.uri_env)
        reader.read_containers(required=template.containers_required)
        for pattern in template.containers:
            for path, container in pattern.expand(spec, spec_path):
                reader.read_container(container, path, image_required=False)
        reader.read_volumes()
        for pattern in template.image_uris:
            for path, uri in pattern.expand(spec, spec_path):
                reader.read_image_uri(uri, path, path.removeprefix(f"{spec_path}."))
        if annotations_path is not None:
            reader.read_annotation(template_annotations, annotations_path)
        if template.object_annotations:
            reader.read_annotation(self.annotations, "metadata.annotations")
            self.object_annotations_read = True
        self._add(root_path, spec_path, role, spec, reader, template)

    def _reader(
        self, spec: Mapping[str, Any], spec_path: str, root_path: str, uri_env: str | None = None
    ) -> PodSpecReader:
        self.tally.template(root_path)
        return PodSpecReader(
            spec, spec_path, self.problems, template=root_path, tally=self.tally, uri_env=uri_env
        )

    def _add(
        self,
        path: str,
        spec_path: str,
        role: str,
        spec: Mapping[str, Any],
        reader: PodSpecReader | None,
        template: Template | None = None,
    ) -> None:
        self._reads.append(_Read(path, spec_path, role, spec, reader, template))

    def _finish(self) -> None:
        """Resolve the engines of every template at once, over the workload's sharing graph (a copy can
        reach another template's Pods through storage that outlives a Pod and through the node, and a
        template's workers run its models), and build the templates."""
        reads = [(r, r.reader) for r in self._reads if r.reader is not None]
        parents = {id(workers): self._parent(workers) for workers, _ in reads if _runs_parent_models(workers)}
        for workers, reader in reads:
            parent = parents.get(id(workers))
            if parent is not None and parent.reader is not None and parent.reader.runs_modelcar:
                reader.share_processes()  # KServe puts the modelcar into the workers' Pods too
        containers: list[Container] = []
        attachments: list[Attachment] = []
        host: list[int] = []
        host_readers: list[int] = []
        found: list[tuple[_Read, Candidate, list[int], list[str], frozenset[int]]] = []
        bases: dict[int, int] = {}
        for read, reader in reads:
            base = bases[id(read)] = len(containers)
            containers += reader.containers
            # reading the graph and resolving candidates can add problems: in template order, before the
            # images are collected
            sharing = reader.graph()
            attachments += [
                (base + n, channel, takes, puts) for n, channel, takes, puts in sharing.attachments
            ]
            host += [base + number for number in sharing.host]
            host_readers += [base + number for number in sharing.host_readers]
            found += [
                (read, c, [base + s for s in c.seeds], [read.path], frozenset(base + h for h in c.holders))
                for c in reader.candidates()
            ]
        attachments += _node(len(containers), host, host_readers)
        for workers, reader in reads:
            parent = parents.get(id(workers))
            if parent is None:
                continue
            seeds = [bases[id(workers)] + number for number in reader.regular()]
            for owner, candidate, own_seeds, templates, _ in found:
                if owner is parent and candidate.model:
                    own_seeds.extend(seeds)
                    templates.append(workers.path)
        self.tally.budget.step(len(attachments) + len(containers))
        answers = readers(len(containers), attachments, [f[2] for f in found])
        engines: dict[int, list[EngineUse]] = {}
        for (owner, candidate, _, templates, holders), answer in zip(found, answers, strict=True):
            # a modelcar container holds the engine as its image: it hands it on, but runs none of it
            reading = [containers[number] for number in answer if number not in holders]
            engines.setdefault(id(owner), []).append(
                EngineUse(
                    candidate.name,
                    candidate.reference,
                    candidate.path,
                    candidate.source,
                    tuple(dict.fromkeys(c.name for c in reading if c.name is not None)),
                    candidate.declared,
                    tuple(c.path for c in reading),
                    tuple(dict.fromkeys([*templates, *(c.template for c in reading)])),
                )
            )
        for read in self._reads:
            if read.joined:
                self.images += read.images
                self.defaulted += read.defaulted
                continue
            own = tuple(read.reader.containers) if read.reader is not None else ()
            selection = read_node_selection(read.spec, read.spec_path, self.tally.budget)
            template = PodTemplate(read.path, read.spec_path, read.role, read.spec, own, selection)
            self.templates.append(template)
            if read.reader is not None:
                self.engines += engines.get(id(read), [])
                self.images += read.reader.images
                self.defaulted += read.reader.defaulted

    def _parent(self, workers: _Read) -> _Read | None:
        """The template whose path encloses ``workers``'s most closely (a predictor, for its workerSpec)."""
        enclosing = [r for r in self._reads if workers.path.startswith(f"{r.path}.") and r.reader is not None]
        return max(enclosing, key=lambda r: len(r.path)) if enclosing else None

    def discover(self) -> None:
        """Every pod spec found anywhere in an object of an unknown kind, read like any other."""
        for found in find_pod_specs(self.obj, self.tally.budget):
            root = found.metadata_path.removesuffix(".metadata") if found.metadata_path else found.path
            reader = self._reader(found.spec, found.path, root)
            reader.read_containers()
            reader.read_volumes()
            role = "pod spec"
            if found.metadata_path is not None:
                role = "pod template"
                metadata = mapping_field(found.metadata, found.metadata_path, self.problems)
                path = f"{found.metadata_path}.annotations"
                reader.read_annotation(string_map(metadata.get("annotations"), path, self.problems), path)
            self._add(root, found.path, role, found.spec, reader)
        self._finish()

    def strays(self, definition: KindDefinition | None) -> tuple[str, ...]:
        """Add the images found outside the templates read, judged as container (or volume) images; the
        note that says so.

        Not for the built-in kinds: their schema is fixed, and the API server drops fields it does not
        know, so the templates are all there is (and a Pod is extracted on every admission).
        """
        if definition is not None and definition.origin == "builtin":
            return ()
        covered = {use.path for use in self.images} | {problem.path for problem in self.problems}
        # a field inside (or above) one a template reader already judged is not judged twice
        within = {path[:end] for path in covered for end in _prefix_ends(path)}
        found, unreadable = find_images(self.obj, self.tally.budget)
        strays = [use for use in found if use.path not in covered]
        for use in strays:
            self.tally.image(use.path)
        self.problems += [problem for problem in unreadable if problem.path not in within]
        if not strays:
            return ()
        self.images += strays
        # an image volume outside the pod specs may hold an engine, but which containers mount it cannot be
        # told: the model rules must not pass it as "no engine" (the evaluator reports it unchecked)
        self.unplaced += [
            EngineUse(use.container or "", use.reference, use.path, "volume", ())
            for use in strays
            if use.field == "volume"
        ]
        where = (
            f"outside the pod templates trtguard knows for {definition.name}"
            if definition is not None
            else "by searching the whole object"
        )
        listed = ", ".join(f"{use.reference} at {use.path}" for use in strays)
        return (f"{len(strays)} image{'s' if len(strays) != 1 else ''} found {where}: {listed}",)


def _runs_parent_models(read: _Read) -> bool:
    return read.template is not None and read.template.runs_parent_models


def _node(count: int, host: list[int], host_readers: list[int]) -> list[Attachment]:
    """The node's channel (:data:`~policies.workload_model._sharing.HOST`): with a container that has full
    host access,
    every container of the workload (Pods of any template may share a node) puts into it and takes from
    it; with only containers that read the node, every container puts into it and those take from it."""
    if host:
        return [(number, HOST, True, True) for number in range(count)]
    if host_readers:
        return [(number, HOST, False, True) for number in range(count)] + [
            (number, HOST, True, False) for number in host_readers
        ]
    return []


def _prefix_ends(path: str) -> list[int]:
    """Where each enclosing path of ``path`` ends (``a.b[0].c`` → ``a``, ``a.b``, ``a.b[0]``), and its end."""
    return [i for i, char in enumerate(path) if char in ".["] + [len(path)]


def _role(template: Template, match: Match | None) -> str:
    """The template's role, ``{name}`` filled in with the name of what its last wildcard matched."""
    if "{name}" not in template.role:
        return template.role
    name: str = (
        f"[{match.key}]"
        if match is not None and isinstance(match.key, int)
        else str(match.key if match is not None else "")
    )
    if match is not None and template.name_key is not None and isinstance(match.value, MAPPINGS):
        own = match.value.get(template.name_key)
        if isinstance(own, str) and own:
            name = own
    return template.role.replace("{name}", name)


def _strict(obj: Mapping[str, Any], definition: KindDefinition) -> Mapping[str, Any]:
    """The root of a kind's one fixed template; an :class:`InputError` naming the first missing key."""
    template = definition.templates[0]
    keys = template.pod_spec.split(".")
    node: Any = obj
    path = ""
    root: Mapping[str, Any] = obj
    for key in keys:
        path = f"{path}.{key}" if path else key
        node = node.get(key)
        if node is None:
            raise InputError(
                f"this {definition.kind} has no {path}, so its containers cannot be found",
                location=path,
                hint=f"a {definition.kind} keeps its pod spec at {template.pod_spec}",
            )
        if not isinstance(node, MAPPINGS):
            raise InputError(
                f"{path} must be an object, found {type_name(node)}",
                location=path,
                hint=f"a {definition.kind} keeps its pod spec at {template.pod_spec}",
            )
        if path == template.path.text:
            root = node
    return root


def mapping_field(value: Any, path: str, problems: list[Problem]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, MAPPINGS):
        return value
    problems.append(Problem(path, f"must be an object, found {type_name(value)}"))
    return {}


def string_map(value: Any, path: str, problems: list[Problem]) -> Mapping[str, str]:
    """``value`` when it maps strings to strings; otherwise its string pairs, with a problem for the rest."""
    mapping = mapping_field(value, path, problems)
    for key, item in mapping.items():
        if not (isinstance(key, str) and isinstance(item, str)):
            break
    else:
        return mapping
    clean: dict[str, str] = {}
    for key, item in mapping.items():
        if isinstance(key, str) and isinstance(item, str):
            clean[key] = item
        else:
            problems.append(Problem(f"{path}[{key}]", f"values must be strings, found {type_name(item)}"))
    return clean
