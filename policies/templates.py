"""Reading the pod templates of one object: each template its kind's definition names, or, for a kind trtguard
does not know, each pod spec found by searching the object; then the images found outside them.

:class:`PodTemplates` collects the images, engines and problems of every template into one list each, with
real JSON paths (``spec.workerGroupSpecs[1].template.spec.containers[0].image``). Each template is read by its
own :class:`~policies.podspec.PodSpecReader`, so engines resolve against the volumes and containers of the
Pod they belong to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.discovery import find_images, find_pod_specs
from policies.kinds import KindDefinition, Template
from policies.paths import child
from policies.podspec import (
    ENGINES_ANNOTATION,
    MAPPINGS,
    EngineUse,
    ImageUse,
    PodSpecReader,
    Problem,
    type_name,
)
from verifier.errors import InputError

__all__ = ["PodTemplates", "mapping_field", "string_map"]


class PodTemplates:
    """The images, engines and problems of an object's pod templates, read one template at a time."""

    def __init__(
        self, obj: Mapping[str, Any], annotations: Mapping[str, str], problems: list[Problem]
    ) -> None:
        self.obj = obj
        self.annotations = annotations
        self.problems = problems
        self.images: list[ImageUse] = []
        self.engines: list[EngineUse] = []
        self.spec_paths: list[str] = []
        self.defaulted: list[str] = []
        self.object_annotations_read = False

    def read(self, definition: KindDefinition) -> None:
        """Every template of ``definition`` found in the object (a lone fixed template must be there)."""
        for template in definition.templates:
            if definition.single_template:
                root_path, root = template.path.text, _strict(self.obj, definition)
                self._template(template, root_path, root)
                continue
            for root_path, root in template.path.expand(self.obj):
                if not isinstance(root, MAPPINGS):
                    self.problems.append(Problem(root_path, f"must be an object, found {type_name(root)}"))
                    self.spec_paths.append(root_path)
                    continue
                self._template(template, root_path, root)
        if ENGINES_ANNOTATION in self.annotations and not self.object_annotations_read and self.spec_paths:
            where = sorted({t.annotations_path for t in definition.templates if t.annotations_path})
            self.problems.append(
                Problem(
                    f"metadata.annotations[{ENGINES_ANNOTATION}]",
                    f"a {definition.kind}'s own annotations do not reach the Pods it makes, so these engines "
                    "cannot be tied to the containers that run them; declare them on the pod template "
                    f"that runs them ({', '.join(where) or 'its pod template metadata'})",
                )
            )

    def _template(self, template: Template, root_path: str, root: Mapping[str, Any]) -> None:
        if template.shape == "container":
            reader = PodSpecReader({}, root_path, self.problems)
            reader.read_container(root, root_path, image_required=False)
            self._finish(reader, root_path)
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
                self.spec_paths.append(spec_path)
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
        reader = PodSpecReader(spec, spec_path, self.problems)
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
        self._finish(reader, spec_path)

    def _finish(self, reader: PodSpecReader, spec_path: str) -> None:
        self.engines += reader.engines()  # before the problems are frozen: resolving engines can add some
        self.images += reader.images
        self.defaulted += reader.defaulted
        self.spec_paths.append(spec_path)

    def discover(self) -> None:
        """Every pod spec found anywhere in an object of an unknown kind, read like any other."""
        for found in find_pod_specs(self.obj):
            reader = PodSpecReader(found.spec, found.path, self.problems)
            reader.read_containers()
            reader.read_volumes()
            if found.metadata_path is not None:
                metadata = mapping_field(found.metadata, found.metadata_path, self.problems)
                path = f"{found.metadata_path}.annotations"
                reader.read_annotation(string_map(metadata.get("annotations"), path, self.problems), path)
            self._finish(reader, found.path)

    def strays(self, definition: KindDefinition | None) -> tuple[str, ...]:
        """Add the images found outside the templates read, judged as container (or volume) images; the
        note that says so.

        Not for the built-in kinds: their schema is fixed, and the API server drops fields it does not
        know, so the templates are all there is (and a Pod is extracted on every admission).
        """
        if definition is not None and definition.origin == "builtin":
            return ()
        covered = {use.path for use in self.images} | {problem.path for problem in self.problems}
        strays = [use for use in find_images(self.obj) if use.path not in covered]
        if not strays:
            return ()
        self.images += strays
        where = (
            f"outside the pod templates trtguard knows for {definition.name}"
            if definition is not None
            else "by searching the whole object"
        )
        listed = ", ".join(f"{use.reference} at {use.path}" for use in strays)
        return (f"{len(strays)} image{'s' if len(strays) != 1 else ''} found {where}: {listed}",)


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
