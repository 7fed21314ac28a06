"""Containers and images found by walking a whole object, wherever they are.

Two uses: a resource of a kind trtguard does not know is searched for pod specs (any object with a
``containers`` list, read like any pod spec) and images, so that nothing it names goes unreported; and in a
known kind, images found outside the templates its definition names are reported too (a field the definition
does not know yet must not hide an image). An *image* here is a string ``image`` of an object (a container,
or a container-like object such as KubeRay's ``autoscalerOptions``) or the ``reference`` of an ``image``
object (an image volume). ``metadata`` and ``status`` at the top are not searched: they describe the object,
and a status lists the images that ran, not those asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from policies.paths import child, item
from policies.podspec import MAPPINGS, ImageUse

__all__ = ["FoundPodSpec", "find_images", "find_pod_specs"]

_SKIPPED_AT_TOP: Final = frozenset({"metadata", "status"})
_OCI_URI: Final = re.compile(r"oci(?:\+[a-z]+)?://(\S+)")


@dataclass(frozen=True, slots=True)
class FoundPodSpec:
    """An object with a ``containers`` list, and the metadata beside it when it is a PodTemplateSpec."""

    path: str
    spec: Mapping[str, Any]
    metadata_path: str | None
    metadata: Any


def _walk(obj: Mapping[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    """(path, value, parent) for every value under ``obj`` except top-level metadata and status, depth first
    in document order; iterative, so that depth costs no recursion."""
    stack: list[tuple[str, Any, Any]] = [
        (child("", key), value, obj)
        for key, value in reversed(list(obj.items()))
        if isinstance(key, str) and key not in _SKIPPED_AT_TOP
    ]
    while stack:
        path, value, parent = stack.pop()
        yield path, value, parent
        if isinstance(value, MAPPINGS):
            stack += [
                (child(path, key), inner, value)
                for key, inner in reversed(list(value.items()))
                if isinstance(key, str)
            ]
        elif isinstance(value, list):
            stack += [(item(path, index), inner, value) for index, inner in reversed(list(enumerate(value)))]


def find_pod_specs(obj: Mapping[str, Any]) -> list[FoundPodSpec]:
    """Every object under ``obj`` with a ``containers`` list (outermost first; none inside another)."""
    found: list[FoundPodSpec] = []
    for path, value, parent in _walk(obj):
        if any(path.startswith(f"{outer.path}.") or path.startswith(f"{outer.path}[") for outer in found):
            continue
        if isinstance(value, MAPPINGS) and isinstance(value.get("containers"), list):
            template = path.endswith(".spec") and isinstance(parent, MAPPINGS) and "metadata" in parent
            metadata_path = f"{path.removesuffix('.spec')}.metadata" if template else None
            found.append(
                FoundPodSpec(path, value, metadata_path, parent.get("metadata") if template else None)
            )
    return found


def find_images(obj: Mapping[str, Any]) -> list[ImageUse]:
    """Every image under ``obj``: ``image`` strings (as containers), ``image.reference`` strings (as image
    volumes) and OCI URIs (``oci://REF``, ``oci+MODE://REF``: model storage an operator pulls, as
    containers), with their paths; the name is the enclosing object's ``name`` where it has one."""
    images: list[ImageUse] = []
    for path, value, parent in _walk(obj):
        if isinstance(value, str) and (found := _OCI_URI.fullmatch(value)) is not None:
            images.append(ImageUse(found.group(1), path, "container", None))
            continue
        if not (path == "image" or path.endswith(".image")) or not isinstance(parent, MAPPINGS):
            continue
        name = parent.get("name")
        name = name if isinstance(name, str) else None
        if isinstance(value, str) and value:
            images.append(ImageUse(value, path, "container", name))
        elif isinstance(value, MAPPINGS) and isinstance(value.get("reference"), str) and value["reference"]:
            images.append(ImageUse(value["reference"], f"{path}.reference", "volume", name))
    return images
