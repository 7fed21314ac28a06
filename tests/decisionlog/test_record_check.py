"""decisionlog/_record_check.py: ``is_record`` says True only where ``DecisionRecord.from_json`` builds the
record, for records as trtguard writes them and for JSON edited every way a field can be."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decisionlog import DecisionLogError, DecisionRecord
from decisionlog._record import KEYS
from decisionlog._record_check import is_record
from tests.support.harness import RecordFactory

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(["2026-01-01T00:00:00.000000Z", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00", "x"]),
    st.lists(st.one_of(st.text(max_size=3), st.dictionaries(st.text(max_size=3), st.integers())), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _builds(data: dict[str, Any]) -> bool:
    try:
        DecisionRecord.from_json(data)
    except DecisionLogError:
        return False
    return True


def test_records_as_written_are_records(make_record: RecordFactory) -> None:
    for record in (
        make_record(),
        make_record(namespace=None, name=None, user=None, violations=({"rule": "r"},), warnings=("w",)),
        make_record(format=1, groups=()),
    ):
        data = json.loads(record.canonical())
        assert is_record(data) and DecisionRecord.from_json(data) == record


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    edits=st.lists(
        st.tuples(
            st.sampled_from([*sorted(KEYS[2]), "extra"]),
            st.one_of(st.just("drop"), _VALUES),
        ),
        min_size=1,
        max_size=3,
    ),
    version=st.sampled_from([1, 2]),
)
def test_is_record_only_where_from_json_builds_one(
    make_record: RecordFactory, edits: list[tuple[str, Any]], version: int
) -> None:
    data = json.loads(make_record(format=version, groups=("g",) if version == 2 else ()).canonical())
    for key, value in edits:
        if value == "drop":
            data.pop(key, None)
        else:
            data[key] = value
    if is_record(data):
        assert _builds(data), data
