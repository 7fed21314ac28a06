"""Whether a stored record's parsed JSON is a decision record, told without building one.

The chain check reads every record of a log; a reader that takes the records as their JSON (an evidence
export: ``decisionlog._chain.DataSink``) need not have a :class:`~decisionlog._record.DecisionRecord` built
of each. :func:`is_record` checks the types :meth:`DecisionRecord.from_json` checks, more strictly (exact
types, as JSON parsing gives them): where it says True, ``from_json`` would build the record; where it says
False, the caller asks ``from_json`` itself, for its error (or its record), so that the errors stay the same.
tests/decisionlog/test_record_check.py checks the two against each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from decisionlog._record import KEYS, parse_time

_TEXTS: Final = ("record_id", "time", "uid", "operation", "kind", "api_version", "reason")
_OPTIONAL_TEXTS: Final = (
    "sub_resource",
    "namespace",
    "name",
    "user",
    "message",
    "policy_revision",
    "replica",
)
_FLAGS: Final = ("dry_run", "allowed")
#: The lists, each with the type of its items.
_LISTS: Final[tuple[tuple[str, type], ...]] = (
    ("violations", dict),
    ("images", dict),
    ("engines", dict),
    ("warnings", str),
    ("groups", str),
)
_EMPTY: Final[list[Any]] = []


def is_record(data: Mapping[str, Any]) -> bool:
    """True when ``DecisionRecord.from_json(data)`` gives a record (False: it may raise, ask it)."""
    version = data.get("format", 1)
    if type(version) is not int or version not in KEYS or data.keys() != KEYS[version]:
        return False
    for key in _TEXTS:
        if type(data[key]) is not str:
            return False
    for key in _OPTIONAL_TEXTS:
        value = data[key]
        if value is not None and type(value) is not str:
            return False
    for key in _FLAGS:
        if type(data[key]) is not bool:
            return False
    for key, item_type in _LISTS:
        value = data.get(key, _EMPTY)
        if type(value) is not list:
            return False
        for item in value:
            if type(item) is not item_type:
                return False
    if type(data.get("latency_us", 0)) is not int:
        return False
    try:
        parse_time(data["time"])
    except (ValueError, OverflowError):
        return False
    return True
