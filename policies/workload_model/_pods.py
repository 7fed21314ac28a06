"""The workload model: every pod template of an object, every container in it, and what each can read.

Every rule reaches pod templates through this model, never through the object itself, so that no rule can
look at less than the whole workload (``tests/test_layout.py`` holds the rule modules to it):

- a :class:`PodTemplate` is one place the object describes Pods: its path
  (``spec.workerGroupSpecs[1].template``), its role (``worker group gpu``, ``leader``, ``task infer``,
  ``predictor``), its pod spec and its node selection (:attr:`PodTemplate.selection`, read once);
- a :class:`Container` is one container of a template, identified by its path, not its name (two templates
  may each have a container named ``server``, and a KServe ``model`` may have no name at all);
- an :class:`EngineUse` says which containers can read the engine (:attr:`EngineUse.readers`, container
  paths; :mod:`policies.workload_model._sharing` says how they are found) and which templates it reaches
  (:attr:`EngineUse.templates`); :class:`ImageUse` is one image-bearing field.

The limits (:data:`MAX_TEMPLATES`, :data:`MAX_CONTAINERS`, :data:`MAX_VOLUMES`, :data:`MAX_ENGINES`,
:data:`MAX_IMAGES`, :data:`MAX_PROBLEMS`) bound the work of one admission; an object over any of them cannot
be judged, which is a denial.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NoReturn

from policies.workload_model._budget import UNLIMITED, Budget
from policies.workload_model._scheduling import NodeSelection
from verifier.base import InputError, quick_init

__all__ = [
    "MAX_CONTAINERS",
    "MAX_ENGINES",
    "MAX_IMAGES",
    "MAX_PROBLEMS",
    "MAX_TEMPLATES",
    "MAX_VOLUMES",
    "Container",
    "EngineUse",
    "ImageField",
    "ImageUse",
    "PodTemplate",
    "Problem",
    "SameImage",
    "Tally",
    "by_image",
]

#: Pod templates per workload (every Ray worker group, Volcano task, … counts).
MAX_TEMPLATES: Final = 100
#: Containers per workload, in all its templates: regular, init, ephemeral and operator-added ones.
MAX_CONTAINERS: Final = 500
#: Volumes per workload, in all its templates.
MAX_VOLUMES: Final = 1000
#: Engine candidates per workload (image volumes a container mounts or the annotation names, annotation
#: entries, OCI model URIs): each is judged by every model rule of every policy.
MAX_ENGINES: Final = 100
#: Images per workload: every container's and image volume's, and those found outside the templates.
MAX_IMAGES: Final = 2000
#: Malformed fields per workload: each is a violation of every policy that selects the workload.
MAX_PROBLEMS: Final = 1000

ImageField = Literal["container", "initContainer", "ephemeralContainer", "volume", "modelcar"]
"""Where an image is named. ``modelcar``: a KServe model storage URI whose image KServe runs as a container
beside the model server (``oci://``, ``oci+modelcar://``); rules for ``container`` judge it too, since it
runs."""


@quick_init
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
    prefix: str | None = ""
    """What the field at ``path`` holds before the reference: nothing (an image field), the scheme of a
    storage URI (``oci://``); None when no field holds the reference as written (composed from an image
    object, or from the repository beside it), so that no patch can pin it (:mod:`policies.pinning`)."""


@quick_init
@dataclass(frozen=True, slots=True)
class EngineUse:
    """One engine reference of the workload."""

    name: str
    reference: str
    """The raw reference, ``registry/repo@sha256:…`` for annotation entries."""
    path: str
    """``metadata.annotations[trtguard.dev/engines][0]``, ``spec.volumes[2].image.reference``, a model
    storage URI (``spec.predictor.model.storageUri``, ``spec.transformer.containers[0].env[1].value``) or
    the image of a KServe modelcar container (``spec.containers[1].image``, source ``modelcar``)."""
    source: Literal["annotation", "volume", "uri", "modelcar"]
    containers: tuple[str, ...]
    """The names of the containers in :attr:`readers` (those that have one), as the decision log records
    them; identify containers by :attr:`readers`, since names repeat across templates."""
    declared: bool = False
    """The ``trtguard.dev/engines`` annotation names it: an engine whatever a policy's ``models.engines``."""
    readers: tuple[str, ...] = ()
    """The paths of every container that can read the engine: those the annotation names (without
    ``container``: the regular containers), those mounting the image volume, those running the model of a
    URI, and every container those can hand it to: through a writable volume, storage that outlives the Pod
    (any template's), a shared process namespace or the node (:mod:`policies.workload_model._sharing`)."""
    templates: tuple[str, ...] = ()
    """The paths of the pod templates the engine reaches (its own, and the workers that run its model)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """A malformed field found while extracting; the evaluator reports each one as a violation."""

    path: str
    message: str


@quick_init
@dataclass(frozen=True, slots=True)
class Container:
    """One container of a pod template, identified by :attr:`path`."""

    path: str
    """The container object (``spec.template.spec.containers[0]``, ``spec.predictor.model``)."""
    name: str | None
    field: ImageField
    """``container`` (a regular one, an operator's model container included), ``initContainer`` (sidecars
    included) or ``ephemeralContainer``."""
    template: str
    """The path of the template it belongs to."""
    image: ImageUse | None
    """Its image, None when it names none (the operator fills it in) or names it malformed."""

    def describe(self) -> str:
        """How messages name it: ``container 'server' (spec.containers[0].image)``, by its image's path
        (what to change), or its own without one."""
        named = f" {self.name!r}" if self.name is not None else ""
        return f"{self.field}{named} ({self.image.path if self.image is not None else self.path})"


@quick_init
@dataclass(frozen=True, slots=True)
class SameImage:
    """Containers that run one image (as written, in one kind of field), or that name none (``image`` None):
    what a rule about a container's image judges once, and says once, however many containers share it."""

    image: ImageUse | None
    containers: tuple[Container, ...]

    @property
    def unnamed(self) -> str:
        """What messages say of containers that name no image."""
        return (
            "its image is not named here" if len(self.containers) == 1 else "their images are not named here"
        )

    def describe(self) -> str:
        """How messages name them: the first (:meth:`Container.describe`), and how many more there are in
        parentheses (what is said of them is said of the first)."""
        first, more = self.containers[0].describe(), len(self.containers) - 1
        if not more:
            return first
        which = "of that image" if self.image is not None else "naming none"
        return f"{first} (and {more} more container{'s' if more > 1 else ''} {which})"


def by_image(containers: Iterable[Container]) -> list[SameImage]:
    """``containers`` grouped by the image they run (reference and field), in the order each image first
    appears."""
    groups: dict[tuple[str, str] | None, list[Container]] = {}
    for container in containers:
        key = (container.image.reference, container.image.field) if container.image is not None else None
        groups.setdefault(key, []).append(container)
    return [SameImage(found[0].image, tuple(found)) for found in groups.values()]


@quick_init
@dataclass(frozen=True, slots=True)
class PodTemplate:
    """One place the object describes Pods, with every container in it."""

    path: str
    """Where the template is: ``spec.template``, ``spec.tasks[0].template``, ``spec.predictor``."""
    spec_path: str
    """Its pod spec (its container, for a template that is one container)."""
    role: str
    """What the template is to its kind: ``pod``, ``worker group gpu``, ``leader``, ``task infer``, …"""
    spec: Mapping[str, Any]
    """The pod spec; empty for a template that is one container (the operator makes its Pod)."""
    containers: tuple[Container, ...]
    selection: NodeSelection
    """The nodes its Pods may be placed on (:mod:`policies.workload_model._scheduling`), read with the
    template, under the
    evaluation's budget, so that every rule and every engine that reaches it shares one reading."""

    def describe(self) -> str:
        """How messages name it: ``worker group gpu (spec.workerGroupSpecs[0].template)``."""
        return f"{self.role} ({self.path})"

    @property
    def placement(self) -> tuple[object, object]:
        """The raw ``nodeSelector`` and ``affinity`` of the pod spec (to tell whether they changed)."""
        return self.spec.get("nodeSelector"), self.spec.get("affinity")


class Tally:
    """What one workload holds so far, against the limits, and the work it cost, against the budget.

    Each count past its limit raises :class:`InputError` (the object cannot be judged, which is a denial);
    each counted item is a step of the :class:`~policies.workload_model._budget.Budget`.
    """

    __slots__ = ("budget", "containers", "engines", "images", "templates", "volumes")

    def __init__(self, budget: Budget = UNLIMITED) -> None:
        self.budget = budget
        self.templates = self.containers = self.volumes = self.engines = self.images = 0

    # Each count is a step of the budget, and checked against its limit in place: one call fewer per item
    # (a workload counts a few of each on every admission).

    def template(self, path: str) -> None:
        """Count one pod template, at ``path``."""
        self.templates += 1
        self.budget.step()
        if self.templates > MAX_TEMPLATES:
            _over(MAX_TEMPLATES, "pod templates", path)

    def container(self, path: str) -> None:
        """Count one container, at ``path``."""
        self.containers += 1
        self.budget.step()
        if self.containers > MAX_CONTAINERS:
            _over(MAX_CONTAINERS, "containers", path)

    def volume(self, path: str) -> None:
        """Count one volume, at ``path``."""
        self.volumes += 1
        self.budget.step()
        if self.volumes > MAX_VOLUMES:
            _over(MAX_VOLUMES, "volumes", path)

    def engine(self, path: str) -> None:
        """Count one engine candidate, at ``path``."""
        self.engines += 1
        self.budget.step()
        if self.engines > MAX_ENGINES:
            _over(MAX_ENGINES, "engine candidates", path)

    def image(self, path: str) -> None:
        """Count one image, at ``path``."""
        self.images += 1
        self.budget.step()
        if self.images > MAX_IMAGES:
            _over(MAX_IMAGES, "images", path)

    def problems(self, found: Sequence[Problem]) -> None:
        """Check the number of malformed fields found."""
        if len(found) > MAX_PROBLEMS:
            self.budget.step()
            _over(MAX_PROBLEMS, "malformed fields", found[MAX_PROBLEMS].path)


def _over(limit: int, what: str, path: str) -> NoReturn:
    """Raise the :class:`InputError` of a workload holding more than ``limit`` of ``what``."""
    raise InputError(
        f"the object has more than {limit} {what} (in all its pod templates); trtguard judges at "
        f"most {limit} per workload, so that one admission cannot hold up the others",
        location=path,
        hint="split the workload into several objects",
    )
