"""decisionlog/_record.py: what the writer stores of a record's values verifies, floats included: JCS writes a
float from 2**53 to 1e21 as integer digits, an integer it cannot write again, so the writer keeps such a
float as text (as it keeps an integer beyond 2**53); every other value keeps its bytes (attack 39b F3)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decisionlog import DecisionRecord, SQLiteStore
from decisionlog._record import canonical_json, storable
from verifier.base._deadline import Deadline

SPECIAL = [1e16, -1e16, 2.0**53, -(2.0**53), 2.0**53 - 1, 9.99e20, 1e21, -0.0, 0.0, 1e308, 5e-324, 1e-7, 1.5]
BIG_INTS = [2**53, -(2**53), 2**53 - 1, 2**64, -(10**30)]

_SCALARS = (
    st.none()
    | st.booleans()
    | st.sampled_from(SPECIAL)
    | st.sampled_from(BIG_INTS)
    | st.floats()
    | st.integers()
    | st.text(max_size=4)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


def _record(values: list[Any]) -> DecisionRecord:
    return DecisionRecord(
        uid="u",
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        allowed=False,
        reason="Denied",
        namespace="prod",
        name="a",
        violations=tuple({"rule": "x", "value": value} for value in values),
        images=({"reference": "r", "evidence": values},),
    )


async def _stored_verifies(path: Path, record: DecisionRecord) -> None:
    store = SQLiteStore(path)
    await store.open()
    try:
        await store.append(record, deadline=Deadline.after(5))
        report = await store.verify()
    finally:
        await store.close()
    assert report.ok, report.summary()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_VALUES, min_size=1, max_size=4))
def test_what_the_writer_stores_verifies(values: list[Any]) -> None:
    record = _record(values)
    stored = canonical_json(storable(record).to_json())
    assert canonical_json(json.loads(stored)) == stored
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(_stored_verifies(Path(scratch) / "d.db", record))


@pytest.mark.parametrize("value", [1e16, -1e16, 2.0**53, -(2.0**53), 9.99e20])
def test_a_float_jcs_writes_as_an_integer_it_cannot_write_is_kept_as_text(value: float) -> None:
    [violation] = storable(_record([value])).violations
    assert violation["value"] == str(value)


@pytest.mark.parametrize("value", [2.0**53 - 1, 1e15, 1e21, 1e308, 5e-324, -0.0, 1e-7, 1.5])
def test_a_float_jcs_writes_and_reads_back_keeps_its_bytes(value: float) -> None:
    record = _record([value])
    assert storable(record) is record
