"""One pod spec → its images and engines, each with its JSON path; malformed fields become problems.

* **images** come from ``containers``, ``initContainers`` (sidecars included), ``ephemeralContainers`` and
  image volumes (``volumes[].image.reference``): every image-bearing field, so image rules see them all;
* **engines** (TensorRT engine artifacts) come from two sources:

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

  An image volume is therefore always an image *and*, when mounted or named, an engine. The reader makes no
  policy decision: the evaluator decides which rules apply to which list.

Malformed fields never raise: each becomes a :class:`Problem` with its path, and the evaluator turns each
into a violation, so nothing malformed is ever a silent pass (an empty ``containers`` list included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from verifier.references import ImageReference, InvalidReference

__all__ = [
    "ENGINES_ANNOTATION",
    "MAPPINGS",
    "EngineUse",
    "ImageField",
    "ImageUse",
    "PodSpecReader",
    "Problem",
    "type_name",
]

#: The annotation that declares engine references: a JSON list of ``{"name", "ref", "container"?}``.
ENGINES_ANNOTATION: Final = "trtguard.dev/engines"
#: What a JSON/YAML object is. Parsed input gives dicts: testing dict first skips the slower ABC check.
MAPPINGS: Final = (dict, Mapping)

ImageField = Literal["container", "initContainer", "ephemeralContainer", "volume"]
_CONTAINER_LISTS: Final[tuple[tuple[str, ImageField], ...]] = (
    ("containers", "container"),
    ("initContainers", "initContainer"),
    ("ephemeralContainers", "ephemeralContainer"),
)
_ENTRY_KEYS: Final = frozenset({"name", "ref", "container"})


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
    """``metadata.annotations[trtguard.dev/engines][0]``, ``spec.volumes[2].image.reference`` or a model
    storage URI (``spec.predictor.model.storageUri``)."""
    source: Literal["annotation", "volume", "uri"]
    containers: tuple[str, ...]
    """Containers that may run the engine: those the annotation names, or those mounting the volume and
    those sharing a volume with an init container that mounts it (it may hand them a copy)."""
    declared: bool = False
    """The ``trtguard.dev/engines`` annotation names it: an engine whatever a policy's ``models.engines``."""


@dataclass(frozen=True, slots=True)
class Problem:
    """A malformed field found while extracting; the evaluator reports each one as a violation."""

    path: str
    message: str


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


class PodSpecReader:
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
        "_uris",
        "_volumes",
        "defaulted",
        "images",
    )

    def __init__(self, spec: Mapping[str, Any], spec_path: str, problems: list[Problem]) -> None:
        self._spec = spec
        self._spec_path = spec_path
        self._problems = problems
        self.images: list[ImageUse] = []
        #: Containers whose image the operator fills in (``image_required=False`` and none given).
        self.defaulted: list[str] = []
        # `containers` are the default users of an annotation engine; any container may be named explicitly.
        self._main_containers: list[str] = []
        self._init_containers: set[str] = set()
        self._all_containers: set[str] = set()
        self._mounts: dict[str, list[str]] = {}
        self._volumes: dict[str, _ImageVolume] = {}
        self._entries: list[_Entry] = []
        self._uris: list[tuple[str, str, str]] = []

    def _problem(self, path: str, message: str) -> None:
        self._problems.append(Problem(path, message))

    def read_containers(self, *, required: bool = True) -> None:
        """Read every container list; ``required=False`` where a pod spec may leave ``containers`` out
        (KServe's predictor, whose model server is a single container object of its own)."""
        spec, spec_path = self._spec, self._spec_path
        for key, field in _CONTAINER_LISTS:
            items = spec.get(key)
            list_path = f"{spec_path}.{key}"
            if items is None:
                if key == "containers" and required:
                    self._problem(list_path, "the pod spec has no containers, so there is nothing to check")
                continue
            if not isinstance(items, list):
                self._problem(list_path, f"{key} must be a list of containers, found {type_name(items)}")
                continue
            if not items and key == "containers":
                self._problem(list_path, "the containers list is empty, so there is nothing to check")
            for index, container in enumerate(items):
                self.read_container(container, f"{list_path}[{index}]", field)

    def read_container(
        self, container: Any, path: str, field: ImageField = "container", *, image_required: bool = True
    ) -> None:
        """Read one container object at ``path``; ``image_required=False`` where an operator fills in a
        missing image (KServe's ``model``, KubeRay's ``autoscalerOptions``)."""
        if not isinstance(container, MAPPINGS):
            self._problem(path, f"a container must be an object, found {type_name(container)}")
            return
        name = container.get("name")
        if not isinstance(name, str):
            name = None
        else:
            self._all_containers.add(name)
            if field == "container":
                self._main_containers.append(name)
            elif field == "initContainer":
                self._init_containers.add(name)
        image = container.get("image")
        if isinstance(image, str) and image:
            self.images.append(ImageUse(image, f"{path}.image", field, name))
        elif image is None or image == "":
            if image_required:
                self._problem(f"{path}.image", "the container has no image")
            else:
                self.defaulted.append(path)
        else:
            self._problem(f"{path}.image", f"image must be a string, found {type_name(image)}")
        mounts = container.get("volumeMounts")
        if mounts is not None:
            self._read_mounts(mounts, f"{path}.volumeMounts", name)

    def read_image_uri(self, uri: Any, path: str, name: str) -> None:
        """Read a model storage URI; one with an OCI scheme names an image the Pod pulls.

        KServe mounts ``oci+native://REF`` as an image volume of its model container and runs any other
        ``oci://REF`` (``oci+modelcar://``, ``oci+fetch://``) as a container, so those are judged as
        container images. Either way the URI names the model, so it is an engine candidate used by the
        template's containers, like a mounted image volume. Other schemes (``s3://``, ``hf://``, …) are no
        image.
        """
        if not isinstance(uri, str):
            self._problem(path, f"a storage URI must be a string, found {type_name(uri)}")
            return
        scheme, separator, reference = uri.partition("://")
        if not separator or not (scheme == "oci" or scheme.startswith("oci+")):
            return
        if not reference:
            self._problem(path, "the OCI storage URI names no image")
            return
        self.images.append(
            ImageUse(reference, path, "volume" if scheme == "oci+native" else "container", None)
        )
        self._uris.append((name, reference, path))

    def _read_mounts(self, mounts: Any, path: str, container: str | None) -> None:
        if not isinstance(mounts, list):
            self._problem(path, f"volumeMounts must be a list, found {type_name(mounts)}")
            return
        for index, mount in enumerate(mounts):
            volume = mount.get("name") if isinstance(mount, MAPPINGS) else None
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
            self._problem(list_path, f"volumes must be a list, found {type_name(volumes)}")
            return
        for index, volume in enumerate(volumes):
            path = f"{list_path}[{index}]"
            if not isinstance(volume, MAPPINGS):
                self._problem(path, f"a volume must be an object, found {type_name(volume)}")
                continue
            source = volume.get("image")
            if source is None:
                continue
            if not isinstance(source, MAPPINGS):
                self._problem(
                    f"{path}.image", f"an image volume must be an object, found {type_name(source)}"
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
                    else f"reference must be a string, found {type_name(reference)}",
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
            self._problem(path, f"must be a JSON list of {{name, ref}} objects, found {type_name(entries)}")
            return
        for index, entry in enumerate(entries):
            entry_path = f"{path}[{index}]"
            if not isinstance(entry, dict):
                self._problem(entry_path, f"an engine entry must be an object, found {type_name(entry)}")
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
            annotation_uses.append(
                EngineUse(entry.name, entry.ref, entry.path, "annotation", containers, True)
            )
        volume_uses = [
            EngineUse(name, volume.reference, volume.path, "volume", self._engine_users(name), volume.named)
            for name, volume in self._volumes.items()
            if volume.named or name in self._mounts
        ]
        uri_uses = [
            EngineUse(name, reference, path, "uri", tuple(self._main_containers))
            for name, reference, path in self._uris
        ]
        return (*volume_uses, *uri_uses, *annotation_uses)

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


def type_name(value: Any) -> str:
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
    if isinstance(value, MAPPINGS):
        return "an object"
    return type(value).__name__
