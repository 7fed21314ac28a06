"""Kubernetes object → :class:`Workload`: every image and engine reference, each with its JSON path.

One extractor serves ``trtguard check`` and the admission webhook. It looks the object's kind up by API group
and kind (:mod:`policies.workload_model._kinds`: the built-in kinds, the shipped operator kinds and a policy
set's
``WorkloadKind`` documents), reads the object's metadata, and has :mod:`policies.workload_model._podspec` read
the images and
engines of each pod template (the ``trtguard.dev/engines`` annotation of the template, and of the object
where its kind's Pods carry it). Images found outside those templates are reported too
(:mod:`policies.workload_model._discovery`), and so is everything a kind trtguard does not know names.

Malformed fields never raise: each becomes a :class:`Problem` with its path. An object with nothing to
judge is no error either: :func:`extract` returns :class:`Unjudged` with the reason. Only what makes
extraction impossible raises :class:`InputError`: a missing or contradictory ``kind``/``namespace``, or none
of the kind's pod templates.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from policies.workload_model._budget import UNLIMITED, Budget
from policies.workload_model._kinds import KindDefinition, KindRegistry, group_of
from policies.workload_model._operator_kinds import DEFAULT_KINDS
from policies.workload_model._paths import PathPattern
from policies.workload_model._pods import Container, PodTemplate, Tally
from policies.workload_model._podspec import (
    ENGINES_ANNOTATION,
    MAPPINGS,
    EngineUse,
    ImageUse,
    Problem,
    type_name,
)
from policies.workload_model._templates import PodTemplates, mapping_field, string_map
from verifier.base import InputError, quick_init

__all__ = [
    "DEFAULT_KINDS",
    "ENGINES_ANNOTATION",
    "EngineUse",
    "ImageUse",
    "Problem",
    "Unjudged",
    "Workload",
    "changed_since",
    "extract",
    "identify",
    "iter_resources",
    "unknown_kind",
]

# A List inside a List inside … is legal but never needed; the bound keeps hostile input from recursing deep.
_MAX_LIST_NESTING: Final = 8


@quick_init
@dataclass(frozen=True, slots=True)
class Workload:
    """What an object runs: its pod templates (:mod:`policies.workload_model._pods`, the model every rule
    reads), its
    images and engines, with where each was found."""

    kind: str
    api_version: str
    namespace: str | None
    name: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    templates: tuple[PodTemplate, ...]
    """Every pod template, in the order of the kind's definition (document order within one pattern)."""
    images: tuple[ImageUse, ...]
    engines: tuple[EngineUse, ...]
    problems: tuple[Problem, ...]
    obj: Mapping[str, Any]
    """The object itself, for CEL expressions."""
    group: str = ""
    """The API group (``""`` for the core group)."""
    known_kind: bool = True
    """False for a kind trtguard does not know: what it names was found by searching the whole object."""
    notes: tuple[str, ...] = ()
    """What a reader of the verdict should know: images found outside the known pod templates."""
    unplaced: tuple[EngineUse, ...] = ()
    """Image volumes found outside every pod template (a kind searched as a whole): engine candidates whose
    readers cannot be told, which no model rule can judge (the evaluator reports each one unchecked)."""
    _containers: Mapping[str, Container] = field(init=False, repr=False, compare=False)
    _templates: Mapping[str, PodTemplate] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        containers = {c.path: c for t in self.templates for c in t.containers}
        object.__setattr__(self, "_containers", containers)
        object.__setattr__(self, "_templates", {t.path: t for t in self.templates})

    @property
    def spec_path(self) -> str:
        """Where the pod specs are, for messages about all of them: the one template's pod spec, or the
        path that holds every template (``spec``)."""
        paths = [t.spec_path for t in self.templates]
        if len(paths) == 1:
            return paths[0]
        common = paths[0].split(".") if paths else ["spec"]
        for path in paths[1:]:
            parts = path.split(".")
            length = next((i for i, (a, b) in enumerate(zip(common, parts, strict=False)) if a != b), None)
            common = common[: min(len(common), len(parts)) if length is None else length]
        return ".".join(common) or "spec"

    def readers(self, use: EngineUse) -> tuple[Container, ...]:
        """Every container that can read ``use`` (:attr:`EngineUse.readers`), in any template."""
        return tuple(self._containers[path] for path in use.readers if path in self._containers)

    def templates_of(self, use: EngineUse) -> tuple[PodTemplate, ...]:
        """The templates ``use`` reaches (:attr:`EngineUse.templates`)."""
        return tuple(self._templates[path] for path in use.templates if path in self._templates)

    def placements(self) -> dict[str, tuple[object, object]]:
        """Each template's raw ``nodeSelector`` and ``affinity``, by path (to tell whether any changed)."""
        return {t.path: t.placement for t in self.templates}


@dataclass(frozen=True, slots=True)
class Unjudged:
    """An object with nothing for trtguard to judge, and why (never an error: many kinds run no Pods)."""

    kind: str
    api_version: str
    namespace: str | None
    name: str | None
    reason: str


def iter_resources(document: Any) -> Iterator[Mapping[str, Any]]:
    """Yield the Kubernetes objects in one parsed YAML/JSON document, flattening ``List`` kinds.

    ``kind: List`` (and any ``…List`` kind, as the API server returns) yields its ``items``; an empty
    document (``None``) yields nothing. Anything that is not an object raises :class:`InputError`.
    """
    yield from _iter_resources(document, "document", 0)


def _iter_resources(document: Any, where: str, depth: int) -> Iterator[Mapping[str, Any]]:
    if document is None:
        return
    if not isinstance(document, MAPPINGS):
        raise InputError(
            f"a Kubernetes object was expected, found {type_name(document)}",
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
            f"the items of a {kind} must be a list, found {type_name(items)}",
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


def extract(
    obj: Mapping[str, Any],
    *,
    namespace: str | None = None,
    kind: str | None = None,
    kinds: KindRegistry = DEFAULT_KINDS,
    budget: Budget = UNLIMITED,
) -> Workload | Unjudged:
    """Read the images and engines of an object, by the definition of its kind in ``kinds``.

    ``namespace`` is the namespace the object is being applied to (an AdmissionRequest's ``namespace``,
    ``trtguard check``'s ``--namespace``); it is used when the object names none, and an object naming a
    different one is an :class:`InputError`, as with ``kubectl apply``. ``kind`` is the kind the caller
    knows the object to be (an AdmissionRequest's ``kind.kind``); it is used when the object has no
    ``kind``, and an object of a different kind is an :class:`InputError`.

    The kind is looked up by API group and kind (an object without ``apiVersion`` is read as the built-in
    Kubernetes kind of its name). A kind ``kinds`` does not know is searched as a whole
    (:mod:`policies.workload_model._discovery`): the result is a :class:`Workload` with ``known_kind`` False
    when it names
    images, and :class:`Unjudged` when it names none. :class:`Unjudged` also answers for a known kind whose
    Pods are described by another object (``KindDefinition.delegates``). Raises :class:`InputError` when
    the object is not a mapping, has no kind, has none of its kind's pod templates, or holds more than the
    limits of :mod:`policies.workload_model._pods`; :class:`~policies.workload_model._budget.BudgetExceeded`
    when reading it spends
    ``budget``.
    """
    problems: list[Problem] = []
    the_kind, api_version, definition, metadata = _identity(obj, kind, kinds, problems)
    the_namespace = _namespace(metadata, namespace)
    name = _string_field(metadata, "name", "metadata", problems)
    labels = string_map(metadata.get("labels"), "metadata.labels", problems)
    annotations = string_map(metadata.get("annotations"), "metadata.annotations", problems)
    pods = PodTemplates(obj, annotations, problems, Tally(budget))
    if definition is None:
        pods.discover()
    else:
        pods.read(definition)
    notes = list(pods.strays(definition))
    pods.tally.problems(problems)
    reason = _nothing_to_judge(obj, definition, pods, problems)
    if reason is not None:
        if definition is None:
            reason = f"{unknown_kind(kinds, api_version, the_kind)} and {reason}"
        return Unjudged(the_kind, api_version, the_namespace, name, reason)
    if pods.defaulted and definition is not None:
        notes.append(f"the operator fills in the image of {', '.join(pods.defaulted)}; it is not named here")
    return Workload(
        kind=the_kind,
        api_version=api_version,
        namespace=the_namespace,
        name=name,
        labels=labels,
        annotations=annotations,
        templates=tuple(pods.templates),
        images=tuple(pods.images),
        engines=tuple(pods.engines),
        problems=tuple(problems),
        obj=obj,
        group=group_of(api_version) if api_version else (definition.group if definition else ""),
        known_kind=definition is not None,
        notes=tuple(notes),
        unplaced=tuple(pods.unplaced),
    )


def identify(
    obj: Mapping[str, Any],
    *,
    namespace: str | None = None,
    kind: str | None = None,
    kinds: KindRegistry = DEFAULT_KINDS,
    problems: list[Problem] | None = None,
) -> Workload:
    """The object's kind, namespace, name, labels and annotations, without reading its pod templates: what
    choosing its policies needs, at the cost of its metadata alone (for an answer when judging it failed).

    Raises :class:`InputError` as :func:`extract` does for the object, its kind and namespace; malformed
    metadata fields are added to ``problems``.
    """
    found = problems if problems is not None else []
    the_kind, api_version, definition, metadata = _identity(obj, kind, kinds, found)
    return Workload(
        kind=the_kind,
        api_version=api_version,
        namespace=_namespace(metadata, namespace),
        name=_string_field(metadata, "name", "metadata", found),
        labels=string_map(metadata.get("labels"), "metadata.labels", found),
        annotations=string_map(metadata.get("annotations"), "metadata.annotations", found),
        templates=(),
        images=(),
        engines=(),
        problems=tuple(found),
        obj=obj,
        group=group_of(api_version) if api_version else (definition.group if definition else ""),
        known_kind=definition is not None,
    )


def _identity(
    obj: Mapping[str, Any], kind: str | None, kinds: KindRegistry, problems: list[Problem]
) -> tuple[str, str, KindDefinition | None, Mapping[str, Any]]:
    """The object's kind, apiVersion, definition and metadata (an :class:`InputError` when unreadable)."""
    if not isinstance(obj, MAPPINGS):
        raise InputError(
            f"a Kubernetes object was expected, found {type_name(obj)}",
            hint="pass the object itself (an AdmissionRequest's `object`)",
        )
    the_kind = _kind(obj, kind)
    api_version = obj.get("apiVersion")
    api_version = api_version if isinstance(api_version, str) else ""
    definition = kinds.of_api_version(api_version, the_kind)
    return the_kind, api_version, definition, mapping_field(obj.get("metadata"), "metadata", problems)


def unknown_kind(kinds: KindRegistry, api_version: str, kind: str) -> str:
    """Why ``kinds`` has no definition for an object: the kind, or only this version of it, is unknown."""
    known = kinds.get(group_of(api_version), kind)
    if known is not None and api_version:
        return f"trtguard knows {known.name} only at {', '.join(known.versions)}, not {api_version}"
    return "it is not a workload kind trtguard knows"


def _kind(obj: Mapping[str, Any], kind: str | None) -> str:
    the_kind = _agreed(
        obj.get("kind"),
        kind,
        location="kind",
        hint="set kind to the object's kind, e.g. Deployment",
        disagree="the object says kind {own} but was sent as {given}",
        disagree_hint="the object and its envelope must agree on the kind",
    )
    if not the_kind:
        raise InputError(
            "the object has no kind",
            location="kind",
            hint="every Kubernetes object needs apiVersion and kind",
        )
    return the_kind


def _nothing_to_judge(
    obj: Mapping[str, Any], definition: KindDefinition | None, pods: PodTemplates, problems: list[Problem]
) -> str | None:
    """Why an object has nothing to judge, or None; an :class:`InputError` for a kind's object that has
    none of its templates and says of no other object that it describes its Pods."""
    if pods.images or pods.engines:
        return None
    if definition is None:
        return None if problems else "names no container image"
    if not pods.templates:
        delegate = next((f for f in definition.delegates if _present(obj, f)), None)
        if delegate is None:
            raise _no_template(definition)
        return f"its Pods come from the object {delegate} names (checked on its own)"
    if pods.defaulted and not problems:
        return (
            f"it names no image: the operator fills in the image of {', '.join(pods.defaulted)} from its "
            "own configuration (a KServe ServingRuntime, …), which is checked where it is defined"
        )
    return None


def _present(obj: Mapping[str, Any], path: str) -> bool:
    return any(True for _ in PathPattern.parse(path).expand(obj))


def _no_template(definition: KindDefinition) -> InputError:
    paths = ", ".join(t.path.text for t in definition.templates)
    return InputError(
        f"this {definition.kind} has none of its pod templates ({paths}), so its containers cannot be found",
        location=definition.templates[0].path.text,
        hint=f"a {definition.name} keeps its pod templates at {paths}",
    )


def changed_since(new: Workload, old: Workload) -> Workload:
    """``new`` with only the image and engine uses (and problems) that ``old`` does not have, as a rule
    reads them.

    An image use is unchanged only when ``old`` has the very same use: reference, path, field, container
    and prefix (a storage URI whose scheme changed from ``oci+native://``, an image volume, to ``oci://``,
    a modelcar container, is judged again: other rules apply). An engine use is unchanged only when ``old``
    has the very same use (reference, path, source, declared, readers, templates), each of its readers is
    the same container there (name, field, template, image: the toolchain, GPU and expression rules read
    them) and each template it reaches has the same role and placement (the GPU and expression rules read
    them); an engine whose path names a changed image is judged again too. Paths include the container's
    index, so moving an image to another container counts as changed. A problem is unchanged when ``old``
    has the same (path, message). Everything else (labels, ``obj``) is ``new``'s.

    What no rule reads (``imagePullPolicy``, resources) changes nothing here. An UPDATE that changes no
    image or engine gives a workload with empty ``images``: callers must read that as "nothing new to
    judge", not as "nothing could be extracted".
    """
    old_images, old_problems = set(old.images), set(old.problems)
    images = tuple(use for use in new.images if use not in old_images)
    changed_paths = {use.path for use in images}
    old_engines: dict[EngineUse, list[tuple[object, ...]]] = {}
    for use in old.engines:
        old_engines.setdefault(use, []).append(_engine_context(old, use))
    return replace(
        new,
        images=images,
        engines=tuple(
            use
            for use in new.engines
            if use.path in changed_paths or _engine_context(new, use) not in old_engines.get(use, ())
        ),
        problems=tuple(problem for problem in new.problems if problem not in old_problems),
    )


def _engine_context(workload: Workload, use: EngineUse) -> tuple[object, ...]:
    """What the engine rules read of where ``use`` runs: its readers (with their images) and the role and
    node selection of each template it reaches."""
    templates = tuple((t.path, t.role, t.placement) for t in workload.templates_of(use))
    return workload.readers(use), templates


def _namespace(metadata: Mapping[str, Any], given: str | None) -> str | None:
    return _agreed(
        metadata.get("namespace"),
        given,
        location="metadata.namespace",
        hint="set metadata.namespace to a namespace name",
        disagree="the object names namespace {own!r} but is applied to namespace {given!r}",
        disagree_hint="make metadata.namespace match the target namespace, or remove it",
    )


def _agreed(
    own: object, given: str | None, *, location: str, hint: str, disagree: str, disagree_hint: str
) -> str | None:
    """The object's own value of a string field (``location``), else the one its envelope gave; raises
    :class:`InputError` when the object's is not a string, or when both are set and differ (``disagree`` is
    formatted with ``own`` and ``given``)."""
    if own is not None and not isinstance(own, str):
        raise InputError(f"{location} must be a string, found {type_name(own)}", location=location, hint=hint)
    if own and given and own != given:
        raise InputError(disagree.format(own=own, given=given), location=location, hint=disagree_hint)
    return own or given or None


def _string_field(metadata: Mapping[str, Any], key: str, parent: str, problems: list[Problem]) -> str | None:
    value = metadata.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append(Problem(f"{parent}.{key}", f"must be a string, found {type_name(value)}"))
    return None
