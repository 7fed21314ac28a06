"""The typed readers of a stored record's JSON fields (``DecisionRecord.from_json``): each raises
:class:`TypeError` for a value of another type, which ``from_json`` reports as "not a decision record"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def text_of(data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def integer_of(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{key} is not an integer")
    return value


def optional_text_of(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def flag_of(data: Mapping[str, Any], key: str) -> bool:
    value = data[key]
    if not isinstance(value, bool):
        raise TypeError(f"{key} is not a boolean")
    return value


def objects_of(data: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise TypeError(f"{key} is not a list of objects")
    return value


def texts_of(data: Mapping[str, Any], key: str) -> Sequence[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{key} is not a list of strings")
    return value
