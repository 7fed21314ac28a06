"""Sorted, compact JSON of data already walked, by one C encoder made once.

``json.JSONEncoder.encode`` makes its C encoder anew on each call: about half the cost of encoding a small
object, and a record's canonical form is encoded in five pieces (``decisionlog._record.canonical_parts``).
This one is made once, without the check for circular references: it is given only data that a walk of it
has already found to be a tree (``decisionlog._stored``, ``decisionlog._record._plain``).
"""

from __future__ import annotations

import json
from typing import Any, Final

# The settings of ``decisionlog._record._JSON`` (JCS for data without floats), checks for cycles left out.
_SETTINGS: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_C_ENCODER: Final = json.encoder.c_make_encoder  # type: ignore[attr-defined]
_TREE: Final = _C_ENCODER and _C_ENCODER(
    None, _SETTINGS.default, json.encoder.encode_basestring, None, ":", ",", True, False, True
)


def tree_json(value: Any) -> bytes:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` as UTF-8, for a
    ``value`` without cycles."""
    return tree_text(value).encode("utf-8")


def tree_text(value: Any) -> str:
    """:func:`tree_json` before it is encoded as UTF-8."""
    return "".join(_TREE(value, 0)) if _TREE else _SETTINGS.encode(value)
