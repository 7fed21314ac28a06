"""Kubernetes object → :class:`Workload`: every image and engine reference, each with its JSON path.

One extractor serves ``trtguard check`` and the admission webhook. It finds the pod spec of every Pod-bearing
kind (:mod:`policies.kinds`), reads the object's metadata, and has :mod:`policies.podspec` read the images and
engines (the ``trtguard.dev/engines`` annotation of the object and of its pod template included).

Malformed fields never raise: each becomes a :class:`Problem` with its path. Only what makes extraction
impossible raises: :class:`NotAWorkload` for other kinds, :class:`InputError` for a missing or contradictory
``kind``/``namespace`` or a missing PodSpec.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from policies.kinds import WORKLOAD_KINDS, is_workload_kind, pod_spec_keys
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

# A List inside a List inside … is legal but never needed; the bound keeps hostile input from recursing deep.
_MAX_LIST_NESTING: Final = 8


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
    if not isinstance(obj, MAPPINGS):
        raise InputError(
            f"a Kubernetes object was expected, found {type_name(obj)}",
            hint="pass the object itself (an AdmissionRequest's `object`)",
        )
    own_kind = obj.get("kind")
    if own_kind is not None and not isinstance(own_kind, str):
        raise InputError(
            f"kind must be a string, found {type_name(own_kind)}",
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
    keys = pod_spec_keys(the_kind)
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

    extractor = PodSpecReader(spec, spec_path, problems)
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
        if not isinstance(node, MAPPINGS):
            raise InputError(
                f"{path} must be an object, found {type_name(node)}",
                location=path,
                hint=f"a {kind} keeps its pod spec at {'.'.join(keys)}",
            )
    return node, path


def _namespace(metadata: Mapping[str, Any], given: str | None) -> str | None:
    own = metadata.get("namespace")
    if own is not None and not isinstance(own, str):
        raise InputError(
            f"metadata.namespace must be a string, found {type_name(own)}",
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
    if isinstance(value, MAPPINGS):
        return value
    problems.append(Problem(path, f"must be an object, found {type_name(value)}"))
    return {}


def _string_field(metadata: Mapping[str, Any], key: str, parent: str, problems: list[Problem]) -> str | None:
    value = metadata.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append(Problem(f"{parent}.{key}", f"must be a string, found {type_name(value)}"))
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
            problems.append(Problem(f"{path}[{key}]", f"values must be strings, found {type_name(item)}"))
    return clean
