"""Optimization-profile shape ranges in the forms build pipelines write them down.

Known forms: ``{input: {"min": S, "opt": S, "max": S}}``, ``{input: [S, S, S]}`` and trtexec's
``{"minShapes": "in:1x3x224x224,…", "optShapes": …, "maxShapes": …}`` (or ``min_shapes`` …), where S is a
list of ints or a ``1x3x224x224`` string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SHAPE_TEXT = re.compile(r"[0-9]+(?:x[0-9]+)*")
_TRTEXEC_KEYS = {
    "min": ("minShapes", "min_shapes"),
    "opt": ("optShapes", "opt_shapes"),
    "max": ("maxShapes", "max_shapes"),
}


def profile_from_shapes(shapes: Any) -> dict[str, dict[str, list[int]]] | None:
    """One optimization profile's ``inputs`` (``{input: {"min", "opt", "max"}}``) from ``shapes``.

    None when ``shapes`` is in none of the known forms or one of its shapes does not read.
    """
    if not isinstance(shapes, Mapping) or not shapes:
        return None
    trtexec = {
        bound: text
        for bound, keys in _TRTEXEC_KEYS.items()
        for text in [next((shapes[key] for key in keys if key in shapes), None)]
        if isinstance(text, str)
    }
    if len(trtexec) == 3 and len(shapes) == 3:
        per_input: dict[str, dict[str, list[int]]] = {}
        for bound, text in trtexec.items():
            for item in text.split(","):
                name, _, dims = item.strip().rpartition(":")
                shape = _shape(dims)
                if not name or shape is None:
                    return None
                per_input.setdefault(name, {})[bound] = shape
        return per_input if all(len(bounds) == 3 for bounds in per_input.values()) else None
    profile: dict[str, dict[str, list[int]]] = {}
    for name, spec in shapes.items():
        if isinstance(spec, Mapping) and set(spec) == {"min", "opt", "max"}:
            bounds = {bound: _shape(spec[bound]) for bound in ("min", "opt", "max")}
        elif isinstance(spec, list) and len(spec) == 3:
            bounds = dict(zip(("min", "opt", "max"), (_shape(item) for item in spec), strict=True))
        else:
            return None
        if any(shape is None for shape in bounds.values()):
            return None
        profile[str(name)] = {bound: shape for bound, shape in bounds.items() if shape is not None}
    return profile


def _shape(value: Any) -> list[int] | None:
    if isinstance(value, str) and _SHAPE_TEXT.fullmatch(value.strip()):
        return [int(part) for part in value.strip().split("x")]
    if isinstance(value, list) and all(
        isinstance(item, int) and not isinstance(item, bool) for item in value
    ):
        return list(value)
    return None
