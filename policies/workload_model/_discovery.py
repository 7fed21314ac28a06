"""Containers and images found by walking a whole object, wherever they are.

Two uses: a resource of a kind trtguard does not know is searched for pod specs (any object with a
``containers`` list, read like any pod spec) and images, so that nothing it names goes unreported; and in a
known kind, images found outside the templates its definition names are reported too (a field the definition
does not know yet must not hide an image). ``metadata`` and ``status`` at the top are not searched: they
describe the object, and a status lists the images that ran, not those asked for.

An *image* here is anything that names one:

- a string ``image`` of an object (a container, or a container-like object such as KubeRay's
  ``autoscalerOptions``), or of a field whose name ends in ``Image`` (``sidecarImage``), or an item of an
  ``images`` list or map; beside a ``repository`` (and ``version`` or ``tag``) it is a name in that
  repository (``{repository: nvcr.io/nvidia, image: driver, version: "550"}``); beside a ``tag``,
  ``version`` or ``digest`` alone (``sidecarTag`` … beside ``sidecarImage``) it is two images, as written
  and composed (``{image: REPO, tag: v1}``: ``REPO`` and ``REPO:v1``), since operators read it either way;
  an image composed of several fields is never pinned (its ``prefix`` is None);
- an image *object* there: ``{reference}`` (an image volume), ``{repository, tag?, digest?, registry?}``
  (the NIM Operator's ``spec.image``, Helm-style values) or ``{name, tag?, digest?, registry?}``, read as
  ``registry/repository:tag@digest``; and a ``{repository, tag}`` or ``{repository, digest}`` object under
  any other key;
- an OCI URI (``oci://REF``, ``oci+MODE://REF``: model storage an operator pulls).

An image-like field whose value is none of these is reported as a problem, never skipped: a kind trtguard
does not know that names anything image-like is never "names no image".
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from policies.workload_model._budget import UNLIMITED, Budget, BudgetExceeded
from policies.workload_model._paths import child, item
from policies.workload_model._podspec import MAPPINGS, ImageUse, Problem, type_name

__all__ = ["FoundPodSpec", "find_images", "find_pod_specs"]

_SKIPPED_AT_TOP: Final = frozenset({"metadata", "status"})
_OCI_URI: Final = re.compile(r"oci(?:\+[a-z]+)?://(\S+)")
#: What a field naming image objects may hold besides the name (anything else makes it no image object).
_IMAGE_OBJECT_NAMES: Final = ("repository", "name")
_DIGEST_HEX: Final = re.compile(r"[0-9a-f]{64}")
#: Characters of the paths the walk holds at once, one per level it is in: a chain of levels under long keys
#: holds a path a level, each longer than the one before (900 levels of 7,500-character keys, a 6.5 MiB body,
#: held 2 GB: attack 39e F1).
_MAX_HELD_PATHS: Final = 1 << 23
#: A node's path costs the budget a step per this many characters besides its own step (copying it is work).
_PATH_CHARACTERS_PER_STEP: Final = 1 << 12


@dataclass(frozen=True, slots=True)
class FoundPodSpec:
    """An object with a ``containers`` list, and the metadata beside it when it is a PodTemplateSpec."""

    path: str
    spec: Mapping[str, Any]
    metadata_path: str | None
    metadata: Any


_Node = tuple[str, "str | int", Any, Any]
"""(path, key or index, value, parent)."""


def _entries(value: Any) -> tuple[Iterator[tuple[Any, Any]], bool]:
    """An iterator over the entries of a map (key, value) or a list (index, item), and whether it is a map."""
    mapping = isinstance(value, MAPPINGS)
    return (iter(value.items()) if mapping else enumerate(value)), mapping


def _walk(obj: Mapping[str, Any], budget: Budget, prune: Any = None) -> Iterator[_Node]:
    """Every value under ``obj`` except top-level metadata and status, depth first in document order;
    iterative, so that depth costs no recursion, and lazy: the walk holds one iterator per level it is in,
    and each node is built as ``budget`` counts it, so that a list of a million items costs the budget as it
    is read, not a million nodes at once (attack 39d F4). The subtree of a value for which ``prune(value)``
    is true is not entered."""
    levels: list[tuple[str, Any, Iterator[tuple[Any, Any]], bool]] = [("", obj, *_entries(obj))]
    held = 0  # characters of the levels' paths
    while levels:
        path, parent, entries, mapping = levels[-1]
        entry = next(entries, None)
        if entry is None:
            levels.pop()
            held -= len(path)
            continue
        key, value = entry
        if not mapping:
            node: _Node = (item(path, key), key, value, parent)
        elif not isinstance(key, str) or (len(levels) == 1 and key in _SKIPPED_AT_TOP):
            continue
        else:
            node = (child(path, key), key, value, parent)
        budget.step(1 + len(node[0]) // _PATH_CHARACTERS_PER_STEP)
        yield node
        if value and isinstance(value, (list, *MAPPINGS)) and (prune is None or not prune(node)):
            held += len(node[0])
            if held > _MAX_HELD_PATHS:
                raise BudgetExceeded(
                    f"the fields of this object are nested under keys too long to judge (at {node[0][:80]}…)",
                    hint="shorten the keys of its nested fields",
                )
            levels.append((node[0], value, *_entries(value)))


def _is_pod_spec(node: _Node) -> bool:
    return isinstance(node[2], MAPPINGS) and isinstance(node[2].get("containers"), list)


def find_pod_specs(obj: Mapping[str, Any], budget: Budget = UNLIMITED) -> list[FoundPodSpec]:
    """Every object under ``obj`` with a ``containers`` list (outermost first; none inside another), in
    one walk that does not enter what it found."""
    found: list[FoundPodSpec] = []
    for path, _, value, parent in _walk(obj, budget, prune=_is_pod_spec):
        if not _is_pod_spec((path, "", value, parent)):
            continue
        template = path.endswith(".spec") and isinstance(parent, MAPPINGS) and "metadata" in parent
        metadata_path = f"{path.removesuffix('.spec')}.metadata" if template else None
        found.append(FoundPodSpec(path, value, metadata_path, parent.get("metadata") if template else None))
    return found


def find_images(obj: Mapping[str, Any], budget: Budget = UNLIMITED) -> tuple[list[ImageUse], list[Problem]]:
    """Every image under ``obj`` (see the module's docstring), with its path, and the image-like fields
    that name none readably; an image's name is the enclosing object's ``name`` where it has one."""
    images: list[ImageUse] = []
    problems: list[Problem] = []
    for path, key, value, parent in _walk(obj, budget, prune=_names_images):
        if isinstance(value, str) and (found := _OCI_URI.fullmatch(value)) is not None:
            images.append(ImageUse(found.group(1), path, "container", None, value[: found.start(1)]))
        elif key == "images" and isinstance(value, (list, *MAPPINGS)):
            entries = value.items() if isinstance(value, MAPPINGS) else enumerate(value)
            for inner, entry in entries:
                where = child(path, inner) if isinstance(inner, str) else item(path, inner)
                _image_field(entry, where, {}, images, problems, strict=True)
        elif isinstance(key, str) and _image_key(key):
            _image_field(value, path, parent, images, problems, strict=key in ("image", "images"), key=key)
        elif isinstance(value, MAPPINGS) and "image" not in value and _helm_image(value):
            images.append(ImageUse(_compose(value, "repository") or "", path, "container", None, None))
    return images, problems


def _image_key(key: str) -> bool:
    return key in ("image", "images") or (key.endswith("Image") and len(key) > len("Image"))


def _names_images(node: _Node) -> bool:
    """A field read as an image as a whole: the walk does not enter it (nothing in it is read twice)."""
    key, value = node[1], node[2]
    return (isinstance(key, str) and _image_key(key)) or (
        isinstance(value, MAPPINGS) and "image" not in value and _helm_image(value)
    )


def _helm_image(value: Mapping[str, Any]) -> bool:
    """``{repository, tag}`` or ``{repository, digest}``: how Helm-style values name an image."""
    return isinstance(value.get("repository"), str) and ("tag" in value or "digest" in value)


def _image_field(
    value: Any,
    path: str,
    parent: Any,
    images: list[ImageUse],
    problems: list[Problem],
    *,
    strict: bool,
    key: str | None = None,
) -> None:
    """One image-like field's value: an image, an image object, nothing (null, empty), or a problem.
    Not ``strict`` (a field whose name only ends in ``Image``), a value that is neither a string nor an
    object is no image (``pullImage: true``). ``key``: the field's name in ``parent``, whose companions
    (:func:`_companions`) may tag the image."""
    name = parent.get("name") if isinstance(parent, MAPPINGS) else None
    name = name if isinstance(name, str) else None
    if value is None or value == "":
        return
    if isinstance(value, str):
        beside = parent if isinstance(parent, MAPPINGS) else {}
        if isinstance(beside.get("repository"), str) or isinstance(beside.get("registry"), str):
            composed = _compose({**beside, "image": value}, "image", version=True)
            images.append(ImageUse(composed or value, path, "container", name, None))
        else:
            _tagged_beside(value, path, beside, key, name, images)
        return
    if isinstance(value, MAPPINGS):
        reference = value.get("reference")
        if isinstance(reference, str) and reference:
            images.append(ImageUse(reference, f"{path}.reference", "volume", name))
            return
        for field in _IMAGE_OBJECT_NAMES:
            composed = _compose(value, field)
            if composed is not None:
                images.append(ImageUse(composed, path, "container", name, None))
                return
    elif not strict:
        return
    problems.append(
        Problem(
            path,
            f"names an image trtguard cannot read ({type_name(value)}); an image is a reference string, or "
            "an object with reference, or with repository (or name) and tag or digest",
        )
    )


def _companions(key: str | None) -> tuple[str, str, str]:
    """The fields beside an image field ``key`` that may tag it: ``tag``, ``version`` and ``digest`` beside
    ``image``; ``sidecarTag``, ``sidecarVersion`` and ``sidecarDigest`` beside ``sidecarImage``."""
    stem = "" if key in (None, "image") else (key or "").removesuffix("Image")
    return (f"{stem}Tag", f"{stem}Version", f"{stem}Digest") if stem else ("tag", "version", "digest")


def _tagged_beside(
    value: str,
    path: str,
    beside: Mapping[str, Any],
    key: str | None,
    name: str | None,
    images: list[ImageUse],
) -> None:
    """An image string with, maybe, a tag, version or digest beside it (``{image: REPO, tag: v1}``).

    Operators read such fields two ways: some compose ``REPO:v1`` (Helm-style values), others run the image
    as written and keep the tag for themselves (the Prometheus Operator: an ``image`` has precedence over
    ``tag`` and ``version``). Both are judged, the image as written at ``path`` and the composed one at the
    object holding both; neither can be pinned (prefix None), since rewriting ``image`` would change what
    the first kind of operator composes."""
    companions = dict(zip(("tag", "version", "digest"), _companions(key), strict=True))
    fields = {field: beside[k] for field, k in companions.items() if beside.get(k) is not None}
    images.append(ImageUse(value, path, "container", name, None if fields else ""))
    composed = _compose({**fields, "image": value}, "image", version=True) if fields else None
    if composed is not None and composed != value:
        images.append(ImageUse(composed, _parent(path, key) or path, "container", name, None))


def _parent(path: str, key: str | None) -> str:
    """The path of the object holding the field ``key`` at ``path`` (``""`` at the top)."""
    for suffix in (f".{key}", f"[{key}]"):
        if key is not None and path.endswith(suffix):
            return path.removesuffix(suffix)
    return ""


def _compose(fields: Mapping[str, Any], name_key: str, *, version: bool = False) -> str | None:
    """``registry/repository:tag@digest`` from an image object's fields, or None without a name. A tag or
    version that is a number (unquoted YAML) is read as written."""
    name = fields.get(name_key)
    if not isinstance(name, str) or not name:
        return None
    if name_key == "image":
        repository = fields.get("repository")
        if isinstance(repository, str) and repository:
            name = f"{repository.rstrip('/')}/{name}"
    elif name_key == "name" and not any(k in fields for k in ("tag", "digest", "registry")):
        return None  # a plain `name` is a container's, not an image's
    registry = fields.get("registry")
    if isinstance(registry, str) and registry:
        name = f"{registry.rstrip('/')}/{name}"
    tag = fields.get("tag", fields.get("version") if version else None)
    last = name.rsplit("/", 1)[-1]
    if isinstance(tag, str | int | float) and not isinstance(tag, bool) and str(tag) and ":" not in last:
        name = f"{name}:{tag}"
    digest = fields.get("digest")
    if isinstance(digest, str) and digest and "@" not in name:
        name = f"{name}@{'sha256:' + digest if _DIGEST_HEX.fullmatch(digest) else digest}"
    return name
