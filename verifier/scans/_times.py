"""Times in scan documents: RFC 3339 with a zone, or nothing (a time without a zone cannot be placed)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

__all__ = ["parse_time"]

# RFC 3339 section 5.6 (a space for the "T" per its note); Go's time.Time JSON adds up to 9 fractional digits
_RFC3339: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_FRACTION: Final = re.compile(r"\.([0-9]+)")


def parse_time(text: object, field: str, unknowns: list[str]) -> datetime | None:
    """``text`` as an aware datetime; None, with a line in ``unknowns``, when it is absent or not RFC 3339."""
    if text is None or text == "":
        unknowns.append(f"the document records no time ({field})")
        return None
    if not isinstance(text, str) or not _RFC3339.fullmatch(text):
        unknowns.append(f"{field} is not an RFC 3339 time with a zone: {str(text)[:60]!r}")
        return None
    # Python reads at most 6 fractional digits; Go writes 9.
    normal = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text.replace("z", "Z"), count=1)
    try:
        return datetime.fromisoformat(normal.replace(" ", "T").replace("t", "T"))
    except ValueError:
        unknowns.append(f"{field} is not a valid time: {text[:60]!r}")
        return None
