"""Kubernetes object → :class:`Workload`: every image and engine reference, each with its JSON path.

One extractor serves ``trtguard check`` and the admission webhook. It reads the PodSpec of every Pod-bearing
kind (:data:`WORKLOAD_KINDS`) and returns

* **images** from ``containers``, ``initContainers`` (sidecars included), ``ephemeralContainers`` and
  image volumes (``volumes[].image.reference``): every image-bearing field, so image rules see them all;
* **engines** (TensorRT engine artifacts) from two sources:

  - the annotation ``trtguard.dev/engines``: a JSON list of ``{"name", "ref", "container"?}`` objects, where
    ``ref`` is ``registry/repo@sha256:…`` (a digest is required). It is read from the object's metadata and,
    for controllers, from the pod template's metadata; both are merged (template entries first, since those
    are what the Pods will carry; an identical entry in both places counts once, a conflicting one is a
    problem and both are kept). Without ``container`` the engine is used by every entry of ``containers``
    (not init or ephemeral containers); with it, by that container only;
  - image volumes: an image volume is an engine when a container (of any kind) mounts it, or when an
    annotation entry's ``name`` is the volume's name (``ref`` may then be left out; if given it must equal
    the volume's reference). ``EngineUse.containers`` lists the containers that mount it and, because an
    init container that mounts it may copy the engine into another volume for the containers after it,
    every container that shares a volume with such an init container (transitively).

  An image volume is therefore always an image *and*, when mounted or named, an engine. The extractor
  makes no policy decision: the evaluator decides which rules apply to which list.

Malformed fields never raise: each becomes a :class:`Problem` with its path, and the evaluator turns each
into a violation, so nothing malformed is ever a silent pass (an empty ``containers`` list included). Only
what makes extraction impossible raises: :class:`NotAWorkload` for other kinds, :class:`InputError` for a
missing or contradictory ``kind``/``namespace`` or a missing PodSpec.

Kinds are recognised by ``kind`` alone, whatever the API group, so an old ``batch/v1beta1`` CronJob is read
like a ``batch/v1`` one (and a custom resource that borrows a built-in kind's name is checked as that kind).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from verifier.errors import InputError
from verifier.references import ImageReference, InvalidReference

__all__ = [
    "ENGINES_ANNOTATION",
    "WORKLOAD_KINDS",
    "EngineUse",
    "ImageUse",
    "NotAWorkload",
    "Problem",
    "Workload",
    "changed_since",
    "extract",
    "is_workload_kind",
    "iter_resources",
]

#: The annotation that declares engine references: a JSON list of ``{"name", "ref", "container"?}``.
ENGINES_ANNOTATION: Final = "trtguard.dev/engines"

# Where the PodSpec sits in each Pod-bearing kind.
_POD_SPEC_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
#: The Pod-bearing kinds :func:`extract` reads.
WORKLOAD_KINDS: Final = frozenset(_POD_SPEC_KEYS)

ImageField = Literal["container", "initContainer", "ephemeralContainer", "volume"]
_CONTAINER_LISTS: Final[tuple[tuple[str, ImageField], ...]] = (
    ("containers", "container"),
    ("initContainers", "initContainer"),
    ("ephemeralContainers", "ephemeralContainer"),
)
_ENTRY_KEYS: Final = frozenset({"name", "ref", "container"})
# Parsed JSON/YAML gives dicts: testing dict first skips the slower abstract-base-class check.
_MAPPINGS: Final = (dict, Mapping)
# A List inside a List inside … is legal but never needed; the bound keeps hostile input from recursing deep.
_MAX_LIST_NESTING: Final = 8


@dataclass(frozen=True, slots=True)
class ImageUse:
    """One image-bearing field of the workload."""

    reference: str
    """The raw string from the object (parse it with :meth:`ImageReference.parse`)."""
    path: str
    """JSON path, e.g. ``spec.template.spec.initContainers[1].image``."""
    field: ImageField
    container: str | None
    """The container's (or, for ``field == "volume"``, the volume's) name; None when the object has none."""


@dataclass(frozen=True, slots=True)
class EngineUse:
    """One engine reference of the workload."""

    name: str
    reference: str
    """The raw reference, ``registry/repo@sha256:…`` for annotation entries."""
    path: str
    """``metadata.annotations[trtguard.dev/engines][0]`` or ``spec.volumes[2].image.reference``."""
    source: Literal["annotation", "volume"]
    containers: tuple[str, ...]
    """Containers that may run the engine: those the annotation names, or those mounting the volume and
    those sharing a volume with an init container that mounts it (it may hand them a copy)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """A malformed field found while extracting; the evaluator reports each one as a violation."""

    path: str
    message: str


@dataclass(frozen=True, slots=True)
class Workload:
    """What a Pod-bearing object runs: its images and engines, with where each was found."""

    kind: str
    api_version: str
    namespace: str | None
    name: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    pod_spec_path: str
    """``spec``, ``spec.template.spec``, ``spec.jobTemplate.spec.template.spec`` or ``template.spec``."""
    images: tuple[ImageUse, ...]
    engines: tuple[EngineUse, ...]
    problems: tuple[Problem, ...]
    obj: Mapping[str, Any]
    """The object itself, for CEL expressions."""


class NotAWorkload(InputError):
    """The object is of a kind that runs no Pods; trtguard has nothing to check in it.

    A subclass of :class:`InputError`: catch it first where other kinds are to be let through.
    """


def is_workload_kind(kind: str) -> bool:
    """True for the Pod-bearing kinds that :func:`extract` reads."""
    return kind in _POD_SPEC_KEYS


def iter_resources(document: Any) -> Iterator[Mapping[str, Any]]:
    """Yield the Kubernetes objects in one parsed YAML/JSON document, flattening ``List`` kinds.

    ``kind: List`` (and any ``…List`` kind, as the API server returns) yields its ``items``; an empty
    document (``None``) yields nothing. Anything that is not an object raises :class:`InputError`.
    """
    yield from _iter_resources(document, "document", 0)


def _iter_resources(document: Any, where: str, depth: int) -> Iterator[Mapping[str, Any]]:
    if document is None:
        return
    if not isinstance(document, _MAPPINGS):
        raise InputError(
            f"a Kubernetes object was expected, found {_type_name(document)}",
            location=where,
            hint="each YAML/JSON document must be one object with apiVersion and kind (or a List)",
        )
    kind = document.get("kind")
    # `kind: List` is kubectl's; `PodList`, `DeploymentList`, … are what the API server returns.
    if not (kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in document)):
        yield document
        return
    if depth >= _MAX_LIST_NESTING:
        raise InputError(
            f"Lists are nested more than {_MAX_LIST_NESTING} deep",
            location=where,
            hint="flatten the List into one list of items",
        )
    items = document.get("items")
    if items is None:
        return
    if not isinstance(items, list):
        raise InputError(
            f"the items of a {kind} must be a list, found {_type_name(items)}",
            location=f"{where}.items",
            hint="write items as a YAML/JSON list of objects",
        )
    for index, item in enumerate(items):
        item_where = f"{where}.items[{index}]"
        if item is None:
            raise InputError(
                "a List item is empty",
                location=item_where,
                hint="each item must be a Kubernetes object",
            )
        yield from _iter_resources(item, item_where, depth + 1)


def extract(obj: Mapping[str, Any], *, namespace: str | None = None, kind: str | None = None) -> Workload:
    """Read the images and engines of a Pod-bearing object.

    ``namespace`` is the namespace the object is being applied to (an AdmissionRequest's ``namespace``,
    ``trtguard check``'s default); it is used when the object names none, and an object naming a different
    one is an :class:`InputError`, as with ``kubectl apply``. ``kind`` is the kind the caller knows the
    object to be (an AdmissionRequest's ``kind.kind``); it is used when the object has no ``kind``, and an
    object of a different kind is an :class:`InputError`.

    Raises :class:`NotAWorkload` for kinds other than :data:`WORKLOAD_KINDS`, and :class:`InputError` when
    the object is not a mapping, has no kind or no PodSpec where its kind keeps one.
    """
    if not isinstance(obj, _MAPPINGS):
        raise InputError(
            f"a Kubernetes object was expected, found {_type_name(obj)}",
            hint="pass the object itself (an AdmissionRequest's `object`)",
        )
    own_kind = obj.get("kind")
    if own_kind is not None and not isinstance(own_kind, str):
        raise InputError(
            f"kind must be a string, found {_type_name(own_kind)}",
            location="kind",
            hint="set kind to the object's kind, e.g. Deployment",
        )
    if own_kind and kind and own_kind != kind:
        raise InputError(
            f"the object says kind {own_kind} but was sent as {kind}",
            location="kind",
            hint="the object and its envelope must agree on the kind",
        )
    the_kind = own_kind or kind
    if not the_kind:
        raise InputError(
            "the object has no kind",
            location="kind",
            hint="every Kubernetes object needs apiVersion and kind",
        )
    keys = _POD_SPEC_KEYS.get(the_kind)
    if keys is None:
        raise NotAWorkload(
            f"{the_kind} runs no Pods, so trtguard has no images or engines to check in it",
            location="kind",
            hint=f"trtguard checks {', '.join(sorted(WORKLOAD_KINDS))}"
            + ("; split a List into its items first" if the_kind.endswith("List") else ""),
        )

    problems: list[Problem] = []
    metadata = _mapping(obj.get("metadata"), "metadata", problems)
    the_namespace = _namespace(metadata, namespace)
    name = _string_field(metadata, "name", "metadata", problems)
    labels = _string_map(metadata.get("labels"), "metadata.labels", problems)
    annotations = _string_map(metadata.get("annotations"), "metadata.annotations", problems)

    spec, spec_path = _pod_spec(obj, the_kind, keys)
    template_annotations: Mapping[str, str] = {}
    template_path = ""
    if len(keys) > 1:
        # The pod template's metadata sits beside its spec; it is what the Pods will carry.
        template_path = spec_path.removesuffix("spec") + "metadata"
        parent = obj
        for key in keys[:-1]:
            parent = parent[key]
        template_metadata = _mapping(parent.get("metadata"), template_path, problems)
        template_annotations = _string_map(
            template_metadata.get("annotations"), f"{template_path}.annotations", problems
        )

    extractor = _Extractor(spec, spec_path, problems)
    extractor.read_containers()
    extractor.read_volumes()
    if len(keys) > 1:
        extractor.read_annotation(template_annotations, f"{template_path}.annotations")
    extractor.read_annotation(annotations, "metadata.annotations")
    engines = extractor.engines()  # before `problems` is frozen: resolving engines can add problems
    api_version = obj.get("apiVersion")
    return Workload(
        kind=the_kind,
        api_version=api_version if isinstance(api_version, str) else "",
        namespace=the_namespace,
        name=name,
        labels=labels,
        annotations=annotations,
        pod_spec_path=spec_path,
        images=tuple(extractor.images),
        engines=engines,
        problems=tuple(problems),
        obj=obj,
    )


def changed_since(new: Workload, old: Workload) -> Workload:
    """``new`` with only the image and engine uses (and problems) that ``old`` does not have.

    An image use is unchanged when ``old`` has the same (path, reference) pair; an engine use when ``old``
    has the same (path, reference, containers) and none of those containers changed its image, so an engine
    newly mounted by another container, or now running in another image, is checked again. Paths include
    the container's index, so moving an image to another container counts as changed. A problem is
    unchanged when ``old`` has the same (path, message). Everything else (labels, ``obj``) is ``new``'s.

    An UPDATE that changes no image or engine gives a workload with empty ``images``: callers must read that
    as "nothing new to judge", not as "nothing could be extracted".
    """
    old_images = {(use.path, use.reference) for use in old.images}
    old_engines = {(use.path, use.reference, use.containers) for use in old.engines}
    old_problems = set(old.problems)
    images = tuple(use for use in new.images if (use.path, use.reference) not in old_images)
    rerun = {use.container for use in images if use.field != "volume"}
    return replace(
        new,
        images=images,
        engines=tuple(
            use
            for use in new.engines
            if (use.path, use.reference, use.containers) not in old_engines
            or rerun.intersection(use.containers)
        ),
        problems=tuple(problem for problem in new.problems if problem not in old_problems),
    )


@dataclass(frozen=True, slots=True)
class _Entry:
    """One valid ``trtguard.dev/engines`` entry (``ref`` is the volume's reference for a volume entry)."""

    name: str
    ref: str
    container: str | None
    path: str
    volume: bool


@dataclass(slots=True)
class _ImageVolume:
    reference: str
    path: str
    named: bool = False


class _Extractor:
    """Walks one PodSpec; collects images, mounts and engine declarations, and the problems found."""

    __slots__ = (
        "_all_containers",
        "_entries",
        "_init_containers",
        "_main_containers",
        "_mounts",
        "_problems",
        "_spec",
        "_spec_path",
        "_volumes",
        "images",
    )

    def __init__(self, spec: Mapping[str, Any], spec_path: str, problems: list[Problem]) -> None:
        self._spec = spec
        self._spec_path = spec_path
        self._problems = problems
        self.images: list[ImageUse] = []
        # `containers` are the default users of an annotation engine; any container may be named explicitly.
        self._main_containers: list[str] = []
        self._init_containers: set[str] = set()
        self._all_containers: set[str] = set()
        self._mounts: dict[str, list[str]] = {}
        self._volumes: dict[str, _ImageVolume] = {}
        self._entries: list[_Entry] = []

    def _problem(self, path: str, message: str) -> None:
        self._problems.append(Problem(path, message))

    def read_containers(self) -> None:
        spec, spec_path = self._spec, self._spec_path
        main_names, all_names = self._main_containers, self._all_containers
        for key, field in _CONTAINER_LISTS:
            items = spec.get(key)
            list_path = f"{spec_path}.{key}"
            if items is None:
                if key == "containers":
                    self._problem(list_path, "the pod spec has no containers, so there is nothing to check")
                continue
            if not isinstance(items, list):
                self._problem(list_path, f"{key} must be a list of containers, found {_type_name(items)}")
                continue
            if not items and key == "containers":
                self._problem(list_path, "the containers list is empty, so there is nothing to check")
            for index, container in enumerate(items):
                path = f"{list_path}[{index}]"
                if not isinstance(container, _MAPPINGS):
                    self._problem(path, f"a container must be an object, found {_type_name(container)}")
                    continue
                name = container.get("name")
                if not isinstance(name, str):
                    name = None
                else:
                    all_names.add(name)
                    if field == "container":
                        main_names.append(name)
                    elif field == "initContainer":
                        self._init_containers.add(name)
                image = container.get("image")
                if isinstance(image, str) and image:
                    self.images.append(ImageUse(image, f"{path}.image", field, name))
                elif image is None or image == "":
                    self._problem(f"{path}.image", "the container has no image")
                else:
                    self._problem(f"{path}.image", f"image must be a string, found {_type_name(image)}")
                mounts = container.get("volumeMounts")
                if mounts is not None:
                    self._read_mounts(mounts, f"{path}.volumeMounts", name)

    def _read_mounts(self, mounts: Any, path: str, container: str | None) -> None:
        if not isinstance(mounts, list):
            self._problem(path, f"volumeMounts must be a list, found {_type_name(mounts)}")
            return
        for index, mount in enumerate(mounts):
            volume = mount.get("name") if isinstance(mount, _MAPPINGS) else None
            if not isinstance(volume, str):
                self._problem(f"{path}[{index}]", "a volume mount must be an object with a volume name")
            elif container is not None:
                users = self._mounts.setdefault(volume, [])
                if container not in users:
                    users.append(container)

    def read_volumes(self) -> None:
        volumes = self._spec.get("volumes")
        list_path = f"{self._spec_path}.volumes"
        if volumes is None:
            return
        if not isinstance(volumes, list):
            self._problem(list_path, f"volumes must be a list, found {_type_name(volumes)}")
            return
        for index, volume in enumerate(volumes):
            path = f"{list_path}[{index}]"
            if not isinstance(volume, _MAPPINGS):
                self._problem(path, f"a volume must be an object, found {_type_name(volume)}")
                continue
            source = volume.get("image")
            if source is None:
                continue
            if not isinstance(source, _MAPPINGS):
                self._problem(
                    f"{path}.image", f"an image volume must be an object, found {_type_name(source)}"
                )
                continue
            ref_path = f"{path}.image.reference"
            reference = source.get("reference")
            name = volume.get("name")
            if not isinstance(name, str):
                name = None
            if not isinstance(reference, str) or not reference:
                self._problem(
                    ref_path,
                    "the image volume has no reference"
                    if reference is None or reference == ""
                    else f"reference must be a string, found {_type_name(reference)}",
                )
                continue
            self.images.append(ImageUse(reference, ref_path, "volume", name))
            if name is None:
                self._problem(f"{path}.name", "the image volume has no name, so no container can mount it")
            elif name in self._volumes:
                self._problem(f"{path}.name", f"a second volume is named {name!r}")
            else:
                self._volumes[name] = _ImageVolume(reference, ref_path)

    def read_annotation(self, annotations: Mapping[str, str], annotations_path: str) -> None:
        text = annotations.get(ENGINES_ANNOTATION)
        if text is None:
            return
        path = f"{annotations_path}[{ENGINES_ANNOTATION}]"
        try:
            entries = json.loads(text)
        except (ValueError, RecursionError) as error:
            message = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deeply"
            self._problem(path, f"is not valid JSON ({message}); expected a list of {{name, ref}} objects")
            return
        if not isinstance(entries, list):
            self._problem(path, f"must be a JSON list of {{name, ref}} objects, found {_type_name(entries)}")
            return
        for index, entry in enumerate(entries):
            entry_path = f"{path}[{index}]"
            if not isinstance(entry, dict):
                self._problem(entry_path, f"an engine entry must be an object, found {_type_name(entry)}")
                continue
            parsed = self._parse_entry(entry, entry_path)
            if parsed is not None:
                self._entries.append(parsed)

    def _parse_entry(self, entry: dict[str, Any], path: str) -> _Entry | None:
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            self._problem(path, f"unknown keys {unknown}; an engine entry has name, ref and container")
            return None
        name, ref, container = entry.get("name"), entry.get("ref"), entry.get("container")
        if not isinstance(name, str) or not name:
            self._problem(path, "an engine entry needs a non-empty string name")
            return None
        if container is not None and (
            not isinstance(container, str) or container not in self._all_containers
        ):
            self._problem(path, f"engine {name!r} names container {container!r}, which the pod spec lacks")
            return None
        volume = self._volumes.get(name)
        if volume is not None:
            # The entry marks an image volume as an engine; the volume's reference is judged by image rules.
            if ref is not None and ref != volume.reference:
                self._problem(
                    path,
                    f"engine {name!r} names image volume {name!r} but its ref {ref!r} differs from the "
                    f"volume's reference {volume.reference!r}",
                )
                return None
            return _Entry(name, volume.reference, container, path, volume=True)
        if not isinstance(ref, str):
            self._problem(path, f"engine {name!r} needs ref, a string 'registry/repo@sha256:…'")
            return None
        try:
            parsed = ImageReference.parse(ref)
        except InvalidReference as error:
            self._problem(path, f"engine {name!r}: {error.message}")
            return None
        if parsed.digest is None:
            self._problem(path, f"engine {name!r} ref {ref!r} has no digest; name engines by sha256 digest")
            return None
        return _Entry(name, ref, container, path, volume=False)

    def engines(self) -> tuple[EngineUse, ...]:
        """Resolve annotation entries against image volumes and mounts into engine uses."""
        annotation_uses: list[EngineUse] = []
        seen: dict[str, _Entry] = {}
        for entry in self._entries:
            earlier = seen.get(entry.name)
            if earlier is not None:
                if (earlier.ref, earlier.container) == (entry.ref, entry.container):
                    continue
                self._problem(
                    entry.path, f"engine {entry.name!r} is also declared differently at {earlier.path}"
                )
            else:
                seen[entry.name] = entry
            if entry.volume:
                self._volumes[entry.name].named = True
                if entry.container is not None and entry.container not in self._mounts.get(entry.name, ()):
                    self._problem(
                        entry.path,
                        f"container {entry.container!r} does not mount image volume {entry.name!r}",
                    )
                continue
            containers = (entry.container,) if entry.container is not None else tuple(self._main_containers)
            annotation_uses.append(EngineUse(entry.name, entry.ref, entry.path, "annotation", containers))
        volume_uses = [
            EngineUse(name, volume.reference, volume.path, "volume", self._engine_users(name))
            for name, volume in self._volumes.items()
            if volume.named or name in self._mounts
        ]
        return (*volume_uses, *annotation_uses)

    def _engine_users(self, volume: str) -> tuple[str, ...]:
        """The containers mounting ``volume``, then those sharing another volume with an init container
        among them (repeated for each init container this adds)."""
        users = list(self._mounts.get(volume, ()))
        copiers = [c for c in users if c in self._init_containers]
        seen_copiers = set(copiers)
        while copiers:
            copier = copiers.pop()
            for shared, mounters in self._mounts.items():
                if shared in self._volumes or copier not in mounters:
                    continue  # image volumes are read-only: nothing can be copied into them
                for container in mounters:
                    if container not in users:
                        users.append(container)
                    if container in self._init_containers and container not in seen_copiers:
                        seen_copiers.add(container)
                        copiers.append(container)
        return tuple(users)


def _pod_spec(obj: Mapping[str, Any], kind: str, keys: Sequence[str]) -> tuple[Mapping[str, Any], str]:
    node: Any = obj
    path = ""
    for key in keys:
        path = f"{path}.{key}" if path else key
        node = node.get(key)
        if node is None:
            raise InputError(
                f"this {kind} has no {path}, so its containers cannot be found",
                location=path,
                hint=f"a {kind} keeps its pod spec at {'.'.join(keys)}",
            )
        if not isinstance(node, _MAPPINGS):
            raise InputError(
                f"{path} must be an object, found {_type_name(node)}",
                location=path,
                hint=f"a {kind} keeps its pod spec at {'.'.join(keys)}",
            )
    return node, path


def _namespace(metadata: Mapping[str, Any], given: str | None) -> str | None:
    own = metadata.get("namespace")
    if own is not None and not isinstance(own, str):
        raise InputError(
            f"metadata.namespace must be a string, found {_type_name(own)}",
            location="metadata.namespace",
            hint="set metadata.namespace to a namespace name",
        )
    if own and given and own != given:
        raise InputError(
            f"the object names namespace {own!r} but is applied to namespace {given!r}",
            location="metadata.namespace",
            hint="make metadata.namespace match the target namespace, or remove it",
        )
    return own or given or None


def _mapping(value: Any, path: str, problems: list[Problem]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, _MAPPINGS):
        return value
    problems.append(Problem(path, f"must be an object, found {_type_name(value)}"))
    return {}


def _string_field(metadata: Mapping[str, Any], key: str, parent: str, problems: list[Problem]) -> str | None:
    value = metadata.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append(Problem(f"{parent}.{key}", f"must be a string, found {_type_name(value)}"))
    return None


def _string_map(value: Any, path: str, problems: list[Problem]) -> Mapping[str, str]:
    """``value`` when it maps strings to strings; otherwise its string pairs, with a problem for the rest."""
    mapping = _mapping(value, path, problems)
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
            problems.append(Problem(f"{path}[{key}]", f"values must be strings, found {_type_name(item)}"))
    return clean


def _type_name(value: Any) -> str:
    """How a JSON/YAML value is called in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, _MAPPINGS):
        return "an object"
    return type(value).__name__
