"""``engines_left_out``'s quick look (the entries' JSON, in C) against the walk it stands in for."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from decisionlog import DecisionRecord, engines_left_out
from decisionlog._record import MAX_ITEMS, MAX_LIST_CHARS, _entries

_TEXT = st.text(max_size=30) | st.sampled_from(["\x00", "a\ud800", "x" * 5000, "\\u0000"])
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | _TEXT
_VALUES: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=30,
)


def _record(engines: tuple[Any, ...]) -> DecisionRecord:
    return DecisionRecord(
        uid="u",
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        allowed=True,
        reason="Allowed",
        engines=engines,
    )


def _walked(record: DecisionRecord) -> bool:
    """Whether the store's walk leaves engine entries out (engines_left_out before its quick look)."""
    kept = _entries(record.engines)
    last = kept[-1] if kept and kept is not record.engines else None
    return isinstance(last, dict) and set(last) == {"omitted"}


@given(st.lists(st.dictionaries(_TEXT, _VALUES, max_size=4), max_size=6).map(tuple))
def test_the_quick_look_says_what_the_walk_says(engines: tuple[Any, ...]) -> None:
    record = _record(engines)
    assert (engines_left_out(record) is not None) == _walked(record)


def test_entries_past_either_bound_are_left_out_as_before() -> None:
    big = {"reference": "r@sha256:" + "a" * 64, "containers": ["c" * 60] * 400}
    for engines in ((big,) * 16, ({"n": 1},) * (MAX_ITEMS + 1)):
        record = _record(engines)
        assert _walked(record) and engines_left_out(record) is not None
    # nested lists, which the bounds count at 1.5 characters per encoded byte, just under the bound
    deep: Any = []
    for _ in range(40):
        deep = [deep]
    record = _record(({"x": [deep] * (MAX_LIST_CHARS // 130)},))
    assert (engines_left_out(record) is not None) == _walked(record)


@given(st.lists(st.lists(st.dictionaries(_TEXT, _VALUES, max_size=3), max_size=3).map(tuple), max_size=4))
def test_the_quick_look_says_the_same_when_it_remembers(lists: list[tuple[Any, ...]]) -> None:
    """Engine lists seen before (the memo of those that fit, by marshal bytes) get the walk's answer too."""
    for engines in [*lists, *lists, ({"n": 1},), ({"n": True},), ({"n": 1.0},)]:
        record = _record(engines)
        assert (engines_left_out(record) is not None) == _walked(record)
