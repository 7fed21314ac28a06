"""One pod spec → its images and engines, each with its JSON path; malformed fields become problems.

* **images** come from ``containers``, ``initContainers`` (sidecars included), ``ephemeralContainers`` and
  image volumes (``volumes[].image.reference``): every image-bearing field, so image rules see them all;
* **engines** (TensorRT engine artifacts) come from two sources:

  - the annotation ``trtguard.dev/engines``: a JSON list of ``{"name", "ref", "container"?}`` objects, where
    ``ref`` is ``registry/repo@sha256:…`` (a digest is required). It is read from the object's metadata and,
    for controllers, from the pod template's metadata; both are merged (template entries first, since those
    are what the Pods will carry; an identical entry in both places counts once, a conflicting one is a
    problem and both are kept). Without ``container`` the engine is read by every regular container (an
    operator's model container included; not init or ephemeral containers); with it, by the container of
    that name;
  - image volumes: an image volume is an engine when a container (of any kind) mounts it, or when an
    annotation entry's ``name`` is the volume's name (``ref`` may then be left out; if given it must equal
    the volume's reference), and read by the containers that mount it;
  - OCI model storage URIs of an operator's model (KServe's ``storageUri: oci://…``, and the ``STORAGE_URI``
    environment variable of a container: the reader's ``uri_env``), read by the regular containers;
  - the image of a container KServe's modelcar injection names (``modelcar``, ``modelcar-N``, and the init
    containers ``modelcar-init``, ``modelcar-init-N``): what an ``oci://`` storage URI becomes in the Pod,
    an engine whose bytes are that container's files. Those containers read it directly (so it reaches
    whoever they share a process namespace or a writable volume with), but are no readers themselves:
    their image is the engine, judged as one, and as a ``modelcar`` image by the image rules.

  ``EngineUse.readers`` adds every container those can hand the engine to
  (:mod:`policies.workload_model._sharing`:
  through a volume, storage that outlives the Pod, a process namespace or the node), by path: containers
  are told apart by where they are, not by name. An ephemeral container's ``targetContainerName`` must
  name a container of the Pod.

  An image volume is therefore always an image *and*, when mounted or named, an engine. The reader makes no
  policy decision: the evaluator decides which rules apply to which list.

Malformed fields never raise: each becomes a :class:`Problem` with its path, and the evaluator turns each
into a violation, so nothing malformed is ever a silent pass (an empty ``containers`` list included).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from policies.workload_model._engine_entries import Entry, parse_entry
from policies.workload_model._pods import Container, EngineUse, ImageField, ImageUse, Problem, Tally
from policies.workload_model._sharing import MountMode, PodGraph, PodSharing, mount_mode
from verifier.base import quick_init

__all__ = [
    "ENGINES_ANNOTATION",
    "MAPPINGS",
    "Candidate",
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

_CONTAINER_LISTS: Final[tuple[tuple[str, ImageField], ...]] = (
    ("containers", "container"),
    ("initContainers", "initContainer"),
    ("ephemeralContainers", "ephemeralContainer"),
)
#: The names KServe gives the containers that run a modelcar's image (``ModelcarNames(index)``: the first
#: storage URI's unsuffixed, the others ``-1``, ``-2``, …), by the list they are in.
_MODELCAR_NAMES: Final = {
    "container": re.compile(r"modelcar(?:-[0-9]+)?"),
    "initContainer": re.compile(r"modelcar-init(?:-[0-9]+)?"),
}


@quick_init
@dataclass(frozen=True, slots=True)
class Candidate:
    """An engine candidate before its readers are known: the containers of its Pod that read it directly
    (their numbers among :attr:`PodSpecReader.containers`). ``model``: the regular containers read it by
    default (an OCI model URI, an annotation entry without ``container``), so the Pods that run this
    Pod's model read it too."""

    name: str
    reference: str
    path: str
    source: Literal["annotation", "volume", "uri", "modelcar"]
    seeds: list[int]
    declared: bool
    model: bool = False
    holders: tuple[int, ...] = ()
    """The containers whose image is the engine (a modelcar's): they hand it on, but run none of it."""


@dataclass(slots=True)
class _ImageVolume:
    reference: str
    path: str
    named: bool = False


class PodSpecReader:
    """Walks one PodSpec; collects its containers, images, mounts and engine declarations, and the problems
    found. Containers may be added until :meth:`engines` resolves the engines (an operator's sidecar that
    joins this Pod: KubeRay's autoscaler). ``uri_env``: a variable whose ``value`` on a regular container
    is a model storage URI (KServe's ``STORAGE_URI``), read as :meth:`read_image_uri` reads one."""

    __slots__ = (
        "_cars",
        "_claim_uri",
        "_entries",
        "_graph",
        "_modelcar",
        "_mounts",
        "_names",
        "_problems",
        "_spec",
        "_spec_path",
        "_tally",
        "_targets",
        "_template",
        "_uri_env",
        "_uris",
        "_volumes",
        "containers",
        "defaulted",
        "images",
    )

    def __init__(
        self,
        spec: Mapping[str, Any],
        spec_path: str,
        problems: list[Problem],
        *,
        template: str | None = None,
        tally: Tally | None = None,
        uri_env: str | None = None,
    ) -> None:
        self._spec = spec
        self._spec_path = spec_path
        self._template = template if template is not None else spec_path
        self._problems = problems
        self._tally = tally or Tally()
        self.images: list[ImageUse] = []
        self.containers: list[Container] = []
        #: Containers whose image the operator fills in (``image_required=False`` and none given).
        self.defaulted: list[str] = []
        self._names: dict[str, list[int]] = {}
        self._mounts: list[tuple[int, str, MountMode]] = []
        self._volumes: dict[str, _ImageVolume] = {}
        self._graph = PodGraph(self._template, spec)
        self._targets: list[tuple[int, str, str]] = []
        self._entries: list[Entry] = []
        self._uris: list[tuple[str, str, str]] = []
        self._modelcar = False
        self._cars: dict[str, list[tuple[int, str]]] = {}
        self._claim_uri = False
        self._uri_env = uri_env

    def _problem(self, path: str, message: str) -> None:
        self._problems.append(Problem(path, message))

    def _image(self, use: ImageUse) -> None:
        self._tally.image(use.path)
        self.images.append(use)

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
        self._tally.container(path)
        number = len(self.containers)
        name = container.get("name")
        if not isinstance(name, str):
            name = None
        else:
            self._names.setdefault(name, []).append(number)
        image = container.get("image")
        use = None
        if isinstance(image, str) and image:
            car = name is not None and field in _MODELCAR_NAMES and _MODELCAR_NAMES[field].fullmatch(name)
            use = ImageUse(image, f"{path}.image", "modelcar" if car else field, name)
            self._image(use)
            if car:
                self._cars.setdefault(image, []).append((number, use.path))
        elif image is None or image == "":
            if image_required:
                self._problem(f"{path}.image", "the container has no image")
            else:
                self.defaulted.append(path)
        else:
            self._problem(f"{path}.image", f"image must be a string, found {type_name(image)}")
        self.containers.append(Container(path, name, field, self._template, use))
        self._graph.container(number, container, self._spec)
        if field == "ephemeralContainer":
            self._read_target(container.get("targetContainerName"), f"{path}.targetContainerName", number)
        for key in ("volumeMounts", "volumeDevices"):  # a raw block device can carry a copy as well
            mounts = container.get(key)
            if mounts is not None:
                self._read_mounts(mounts, f"{path}.{key}", number)
        if self._uri_env is not None and field == "container":
            self._read_uri_env(container.get("env"), f"{path}.env")

    def _read_uri_env(self, env: Any, path: str) -> None:
        """Each ``value`` of the container's variables named ``uri_env`` is a model storage URI; one from
        ``valueFrom`` cannot be judged, and a malformed ``env`` may hide one: both are problems."""
        if not isinstance(env, list):
            if env is not None:
                self._problem(path, f"env must be a list, found {type_name(env)}")
            return
        self._tally.budget.step(len(env))
        for index, variable in enumerate(env):
            item = f"{path}[{index}]"
            if not isinstance(variable, MAPPINGS):
                self._problem(item, f"an environment variable must be an object, found {type_name(variable)}")
            elif variable.get("name") == self._uri_env and variable.get("valueFrom") is not None:
                self._problem(
                    f"{item}.valueFrom",
                    f"{self._uri_env} names the model the operator fetches, but valueFrom takes it from a "
                    "ConfigMap, Secret or field this object does not show; write the storage URI as value",
                )
            elif variable.get("name") == self._uri_env and variable.get("value") not in (None, ""):
                name = f"{item}.value".removeprefix(f"{self._spec_path}.")  # an empty value fetches nothing
                self.read_image_uri(variable["value"], f"{item}.value", name)

    def _read_target(self, target: Any, path: str, number: int) -> None:
        """An ephemeral container's ``targetContainerName``: it shares that container's process namespace."""
        if target is None or target == "":
            return
        if not isinstance(target, str):
            self._problem(path, f"targetContainerName must be a string, found {type_name(target)}")
        else:
            self._targets.append((number, target, path))  # checked once every container is read

    def read_image_uri(self, uri: Any, path: str, name: str) -> None:
        """Read a model storage URI; one with an OCI scheme names an image the Pod pulls.

        KServe mounts ``oci+native://REF`` as an image volume of its model container and runs any other
        ``oci://REF`` (``oci+modelcar://``, ``oci+fetch://``) as a container beside it (the modelcar), so
        those are ``modelcar`` images, which rules for containers judge too. Either way the URI names the
        model, so it is an engine candidate read by the template's regular containers, like a mounted image
        volume. Other schemes (``s3://``, ``hf://``, …) are no image; ``pvc://CLAIM/PATH`` has KServe mount
        that claim into the model container: storage that outlives the Pod (:meth:`graph`).
        """
        if not isinstance(uri, str):
            self._problem(path, f"a storage URI must be a string, found {type_name(uri)}")
            return
        scheme, separator, reference = uri.partition("://")
        # KServe mounts the claim of a pvc:// URI into the model container: storage that outlives the Pod.
        self._claim_uri = self._claim_uri or (separator != "" and scheme == "pvc")
        if not separator or not (scheme == "oci" or scheme.startswith("oci+")):
            return
        if not reference:
            self._problem(path, "the OCI storage URI names no image")
            return
        field: ImageField = "volume" if scheme == "oci+native" else "modelcar"
        self._image(ImageUse(reference, path, field, None, f"{scheme}://"))
        self._uris.append((name, reference, path))
        if field == "modelcar":  # KServe's modelcar serves the model through a shared process namespace
            self._modelcar = True
            self._graph.share_processes()

    @property
    def runs_modelcar(self) -> bool:
        """Whether a model storage URI of this Pod runs as a KServe modelcar."""
        return self._modelcar

    def share_processes(self) -> None:
        """Count this Pod as sharing one process namespace (the workers of a modelcar's predictor)."""
        self._graph.share_processes()

    def _read_mounts(self, mounts: Any, path: str, container: int) -> None:
        if not isinstance(mounts, list):
            self._problem(path, f"{path.rsplit('.', 1)[-1]} must be a list, found {type_name(mounts)}")
            return
        self._tally.budget.step(len(mounts))
        for index, mount in enumerate(mounts):
            volume = mount.get("name") if isinstance(mount, MAPPINGS) else None
            if not isinstance(volume, str):
                self._problem(f"{path}[{index}]", "a volume mount must be an object with a volume name")
            else:
                self._mounts.append((container, volume, mount_mode(mount)))

    def read_volumes(self) -> None:
        """Read ``volumes``: image volumes (engine candidates), and each declaration by name (what it
        shares: :meth:`graph`)."""
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
            self._tally.volume(path)
            host = volume.get("hostPath")
            kind = host.get("type") if isinstance(host, MAPPINGS) else None
            if kind is not None and not isinstance(kind, str):
                self._problem(
                    f"{path}.hostPath.type", f"a host path's type must be a string, found {type_name(kind)}"
                )
            name = volume.get("name")
            if not isinstance(name, str):
                name = None
            else:
                self._graph.volume(name, volume)
            source = volume.get("image")
            if source is not None:
                self._read_image_volume(source, path, name)

    def _read_image_volume(self, source: Any, path: str, name: str | None) -> None:
        if not isinstance(source, MAPPINGS):
            self._problem(f"{path}.image", f"an image volume must be an object, found {type_name(source)}")
            return
        ref_path = f"{path}.image.reference"
        reference = source.get("reference")
        if not isinstance(reference, str) or not reference:
            self._problem(
                ref_path,
                "the image volume has no reference"
                if reference is None or reference == ""
                else f"reference must be a string, found {type_name(reference)}",
            )
            return
        self._image(ImageUse(reference, ref_path, "volume", name))
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
        self._tally.budget.step(len(entries))
        for index, entry in enumerate(entries):
            entry_path = f"{path}[{index}]"
            if not isinstance(entry, dict):
                self._problem(entry_path, f"an engine entry must be an object, found {type_name(entry)}")
                continue
            parsed = parse_entry(entry, entry_path, self._names, self._volumes, self._problem)
            if parsed is not None:
                self._entries.append(parsed)

    def candidates(self) -> list[Candidate]:
        """Resolve annotation entries against image volumes and mounts into engine candidates, each with
        the containers that read it directly; who else can read it is the workload's graph
        (:meth:`graph`, :mod:`policies.workload_model._sharing`)."""
        mounters: dict[str, list[int]] = {}
        for container, volume, _ in self._mounts:
            if volume in self._volumes:
                mounters.setdefault(volume, []).append(container)
        regular = self.regular()
        annotation: list[Candidate] = []
        seen: dict[str, Entry] = {}
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
                named = self._names.get(entry.container or "", ())
                if entry.container is not None and not set(named) & set(mounters.get(entry.name, ())):
                    self._problem(
                        entry.path,
                        f"container {entry.container!r} does not mount image volume {entry.name!r}",
                    )
                continue
            if entry.container is None:
                annotation.append(
                    Candidate(entry.name, entry.ref, entry.path, "annotation", regular, True, True)
                )
            else:
                seeds = self._names.get(entry.container, [])
                annotation.append(Candidate(entry.name, entry.ref, entry.path, "annotation", seeds, True))
        found = [
            *(
                Candidate(name, volume.reference, volume.path, "volume", mounters.get(name, []), volume.named)
                for name, volume in self._volumes.items()
                if volume.named or name in mounters
            ),
            *(Candidate(name, ref, path, "uri", regular, False, True) for name, ref, path in self._uris),
            *(
                Candidate(
                    self.containers[cars[0][0]].name or "modelcar",
                    reference,
                    cars[0][1],
                    "modelcar",
                    [number for number, _ in cars],
                    False,
                    holders=tuple(number for number, _ in cars),
                )
                for reference, cars in self._cars.items()
            ),
            *annotation,
        ]
        for candidate in found:
            self._tally.engine(candidate.path)
        return found

    def regular(self) -> list[int]:
        """The numbers of the regular containers (an operator's model containers included)."""
        return [number for number, c in enumerate(self.containers) if c.field == "container"]

    def graph(self) -> PodSharing:
        """This Pod's part of the workload's sharing graph
        (:class:`~policies.workload_model._sharing.PodGraph`): its
        mounts, the claims KServe mounts for a ``pvc://`` URI (read-only unless an annotation says
        otherwise: counted as writable) and each ephemeral container's target's process namespace, which
        it shares with every ephemeral container that targets the same container."""
        self._tally.budget.step(len(self._mounts) + len(self.containers) + len(self._targets))
        targeted: set[str] = set()
        for number, target, path in self._targets:
            named = self._names.get(target)
            if named is None:
                self._problem(
                    path, f"the ephemeral container targets container {target!r}, which the pod spec lacks"
                )
                continue
            self._graph.namespace(target, [number] if target in targeted else [number, *named])
            targeted.add(target)
        if self._claim_uri:
            self._graph.storage(self.regular())
        return self._graph.sharing(len(self.containers), self._mounts)


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
