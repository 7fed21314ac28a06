"""Digest pinning: the JSONPatch replacing each verified tag with ``name:tag@sha256:…``, and its use on files.

The pins come from the evaluation itself (:attr:`~policies.results.Decision.pins`: the paths the workload
model found, each with the digest a ``pinDigest`` rule verified there), so the patch names the bytes that
were judged, never a digest looked up again. Each replacement is preceded by a ``test`` of the value the
evaluation saw: if anything moved the field in between (another mutating webhook reordered the containers),
the API server refuses the whole patch, and the request fails rather than pinning the wrong container.

Paths are the workload model's (``spec.template.spec.initContainers[1].image``,
``metadata.annotations[trtguard.dev/engines]``-style bracketed keys); they are turned into JSON Pointers
against the object itself, so that a bracket is read as a list index or a map key by what is there.

Only a field that holds the reference as written can be pinned (:func:`written`): an image field, or a model
storage URI that names it behind its OCI scheme (KServe's ``storageUri: oci://…``, pinned as
``oci://name:tag@sha256:…``). An image found as an object (``{repository, tag}``) or composed from fields
beside it is never rewritten: the evaluation refuses to pin it (``policies.rules._images``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from policies.results import Decision
from verifier.base import InputError

__all__ = ["PatchOperation", "apply_patch", "patch_for", "pointer", "written"]

PatchOperation = dict[str, Any]

_SEGMENT: Final = re.compile(r"\.?(?P<key>[A-Za-z_][A-Za-z0-9_-]*)|\[(?P<bracket>[^\]]*)\]")
#: The schemes of a model storage URI that names an image (``policies.workload_model._podspec``,
# ``policies.workload_model._discovery``).
_OCI_SCHEME: Final = re.compile(r"oci(?:\+[a-z]+)?")


def pointer(obj: Mapping[str, Any], path: str) -> str:
    """The RFC 6901 JSON Pointer of the workload-model ``path`` in ``obj``.

    Raises :class:`InputError` when ``path`` does not name a string field of ``obj``.
    """
    node: Any = obj
    parts: list[str] = []
    position = 0
    while position < len(path):
        match = _SEGMENT.match(path, position)
        if match is None or match.end() == position:
            raise _unresolved(path)
        position = match.end()
        key = match.group("key")
        if key is None:
            key = match.group("bracket")
            if isinstance(node, list):
                if not key.isdigit() or int(key) >= len(node):
                    raise _unresolved(path)
                node = node[int(key)]
                parts.append(key)
                continue
        if not isinstance(node, Mapping) or key not in node:
            raise _unresolved(path)
        node = node[key]
        parts.append(key.replace("~", "~0").replace("/", "~1"))
    if not isinstance(node, str):
        raise _unresolved(path)
    return "/" + "/".join(parts)


def written(obj: Mapping[str, Any], path: str, reference: str) -> str | None:
    """What the field at ``path`` writes before ``reference``: ``""`` for a field holding the reference as it
    is, the scheme of a storage URI naming it (``oci://``, ``oci+native://``); None when the field holds
    anything else (an image object, a name composed with the repository beside it, another reference), which
    replacing the field's text cannot pin."""
    try:
        value = _value(obj, pointer(obj, path))
    except InputError:
        return None
    if value == reference:
        return ""
    scheme, separator, rest = value.partition("://")
    if separator and rest == reference and _OCI_SCHEME.fullmatch(scheme):
        return f"{scheme}://"
    return None


def patch_for(obj: Mapping[str, Any], decision: Decision) -> list[PatchOperation]:
    """The JSONPatch pinning every image of ``decision.pins`` in ``obj``: a ``test`` of the field as the
    evaluation judged it, then its ``replace``, per image field (two containers with one image are two pins;
    a storage URI keeps its scheme).

    Raises :class:`InputError` when a pinned path does not hold the reference judged there (the object is
    not the one that was judged: nothing may be pinned).
    """
    operations: list[PatchOperation] = []
    for pin in decision.pins:
        at = pointer(obj, pin.path)
        prefix = written(obj, pin.path, pin.reference)
        if prefix is None or pin.pinned is None:
            raise InputError(
                f"{pin.path} does not hold {pin.reference!r}, the image that was verified",
                location=pin.path,
                hint="send the object that was judged",
            )
        operations.append({"op": "test", "path": at, "value": prefix + pin.reference})
        operations.append({"op": "replace", "path": at, "value": prefix + pin.pinned})
    return operations


def apply_patch(obj: Mapping[str, Any], operations: Sequence[PatchOperation]) -> dict[str, Any]:
    """``obj`` with ``operations`` (the ``test`` and ``replace`` ops of :func:`patch_for`) applied, as a
    copy; raises :class:`InputError` when a ``test`` fails or an operation is of another kind."""
    result: dict[str, Any] = copy.deepcopy(dict(obj))
    for operation in operations:
        at, op = operation["path"], operation["op"]
        if op == "test":
            if _value(result, at) != operation["value"]:
                raise InputError(f"the patch's test of {at} failed", location=at)
        elif op == "replace":
            *parents, last = _tokens(at)
            node: Any = result
            for token in parents:
                node = node[int(token)] if isinstance(node, list) else node[token]
            if isinstance(node, list):
                node[int(last)] = operation["value"]
            else:
                node[last] = operation["value"]
        else:
            raise InputError(f"unsupported patch operation {op!r}", location=at)
    return result


def _tokens(at: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in at.split("/")[1:]]


def _value(obj: Any, at: str) -> Any:
    node = obj
    try:
        for token in _tokens(at):
            node = node[int(token)] if isinstance(node, list) else node[token]
    except (KeyError, IndexError, ValueError, TypeError):
        return None
    return node


def _unresolved(path: str) -> InputError:
    return InputError(
        f"{path} names no image field of the object", location=path, hint="send the object that was judged"
    )
