"""Kubernetes label values as the API machinery reads them, for judging node selection like the scheduler.

The scheduler turns each node selector requirement into a ``labels.Requirement``
(k8s.io/apimachinery/pkg/labels, ``NewRequirement``), which refuses every value that is not a label value
(:func:`is_label_value`) and, for ``Gt`` and ``Lt``, a value Go's ``strconv.ParseInt(v, 10, 64)`` does not
read (:func:`parse_int64`); a ``Gt``/``Lt`` requirement compares the node's label value read the same way.
Both are written here from their specifications, because Python's own readers differ: ``int()`` also takes
underscores, surrounding white space and non-ASCII digits, and a regular expression ``$`` matches before a
final newline. tests/data/kubernetes-label-integers holds the upstream test cases they are checked against.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["INT64_MAX", "INT64_MIN", "LABEL_VALUE_MAX_LENGTH", "is_label_value", "parse_int64"]

INT64_MAX: Final = (1 << 63) - 1
INT64_MIN: Final = -(1 << 63)
#: apimachinery's ``LabelValueMaxLength`` (bytes; a valid value is ASCII, so characters too).
LABEL_VALUE_MAX_LENGTH: Final = 63
# apimachinery's labelValueFmt: empty, or alphanumerics with '-', '_' and '.' inside. Written with explicit
# ASCII ranges (Python's \w would take other letters).
_LABEL_VALUE: Final = re.compile(r"(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
# ParseInt with base 10: an optional sign, then one or more ASCII decimal digits; nothing else.
_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")
_INT64_DIGITS: Final = len(str(INT64_MAX))


def is_label_value(text: str) -> bool:
    """Whether ``text`` is a valid label value (apimachinery ``IsValidLabelValue``)."""
    return len(text) <= LABEL_VALUE_MAX_LENGTH and _LABEL_VALUE.fullmatch(text) is not None


def parse_int64(text: str) -> int | None:
    """What Go's ``strconv.ParseInt(text, 10, 64)`` returns, or None where it returns an error.

    Leading zeros are allowed in any number (``0000000000000000010`` is 10); a sign, ``+`` or ``-``, only
    once and first; no underscores, spaces or other digits; the value must fit in a signed 64-bit integer.
    """
    if _DECIMAL.fullmatch(text) is None:
        return None
    negative = text[0] == "-"
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > _INT64_DIGITS:  # also keeps int() away from its limit on the length of a number
        return None
    value = -int(digits) if negative else int(digits)
    return value if INT64_MIN <= value <= INT64_MAX else None
