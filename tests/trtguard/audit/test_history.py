"""trtguard.audit._history: the engines a workload was admitted with over time, replayed from the log."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, SQLiteStore, StoredRecord
from decisionlog import _undelivered as undelivered
from policies.identity import WorkloadIdentity
from trtguard.audit._history import (
    not_delivered,
    not_delivered_json,
    replay,
    workload_history,
    workload_records,
)
from verifier.base._deadline import Deadline

RESNET = "registry.example.com/models/resnet50"
RESNET50 = WorkloadIdentity("apps", "Deployment", "prod", "resnet50")


def _engine(reference: str) -> dict[str, Any]:
    return {
        "reference": reference,
        "digest": reference.split("@")[1],
        "path": "spec.template.spec.volumes[0]",
    }


def _record(**fields: Any) -> DecisionRecord:
    base: dict[str, Any] = {
        "uid": "u",
        "operation": "UPDATE",
        "kind": "Deployment",
        "api_version": "apps/v1",
        "allowed": True,
        "reason": "Allowed",
        "namespace": "prod",
        "name": "resnet50",
    }
    base.update(fields)
    return DecisionRecord(**base)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "decisions.db")
    await s.open()
    yield s
    await s.close()


async def _append(store: SQLiteStore, *records: DecisionRecord) -> None:
    for record in records:
        await store.append(record, deadline=Deadline.after(5))


async def test_engine_history_replays_updates_per_repository(store: SQLiteStore) -> None:
    v1, v2 = f"{RESNET}@sha256:{'1' * 64}", f"{RESNET}@sha256:{'2' * 64}"
    tokenizer = f"registry.example.com/models/tokenizer@sha256:{'5' * 64}"
    await _append(
        store,
        _record(operation="CREATE", engines=(_engine(v1), _engine(tokenizer)), user="alice"),
        _record(),  # no engine change
        _record(engines=(_engine(v1),)),  # the same engine again: not a change
        _record(engines=(_engine(v2),), user="bob"),
        _record(operation="DELETE"),
    )
    entries = await workload_history(store, RESNET50)
    assert [(e.seq, e.record.operation, e.record.user) for e in entries] == [
        (1, "CREATE", "alice"),
        (4, "UPDATE", "bob"),
    ]
    assert entries[1].engines == {RESNET: v2, "registry.example.com/models/tokenizer": tokenizer}
    assert [(c.slot, c.old, c.new) for c in entries[1].changes] == [(RESNET, v1, v2)]


async def test_a_record_shipped_late_from_a_spool_is_replayed_at_its_decision_time(
    store: SQLiteStore,
) -> None:
    """v1 was admitted in an outage (spooled) before v2 was admitted directly; the spool shipped it last."""
    v1, v2 = f"{RESNET}@sha256:{'1' * 64}", f"{RESNET}@sha256:{'2' * 64}"
    noon = datetime(2026, 11, 30, 12, tzinfo=UTC)
    await _append(
        store,
        _record(operation="CREATE", engines=(_engine(v1),), time=noon - timedelta(hours=1)),
        _record(engines=(_engine(v2),), time=noon + timedelta(minutes=5)),
        _record(engines=(_engine(v1),), time=noon),  # shipped from the spool after the outage
    )
    entries = await workload_history(store, RESNET50)
    assert [(e.seq, [(c.old, c.new) for c in e.changes]) for e in entries] == [
        (1, [(None, v1)]),
        (2, [(v1, v2)]),
    ]


async def test_an_allow_whose_answer_was_not_delivered_changed_nothing(store: SQLiteStore) -> None:
    """v2's record was confirmed after its deadline (the API server got a deny): v3 replaces v1, not v2."""
    v1, v2, v3 = (f"{RESNET}@sha256:{digit * 64}" for digit in "123")
    late = _record(uid="late", engines=(_engine(v2),), user="mallory")
    await _append(
        store,
        _record(operation="CREATE", engines=(_engine(v1),)),
        late,
        undelivered.undelivered(late),
        _record(uid="next", engines=(_engine(v3),), user="bob"),
    )
    entries = await workload_history(store, RESNET50)
    assert [(e.seq, e.record.user) for e in entries] == [(1, None), (4, "bob")]
    assert [(c.old, c.new) for c in entries[1].changes] == [(v1, v3)]
    records = await workload_records(store, RESNET50)
    assert [(s.seq, s.record.record_id) for s in not_delivered(records)] == [(2, late.record_id)]
    assert not_delivered_json(records)[0]["user"] == "mallory"


def test_an_undelivered_record_is_matched_by_its_derived_record_id_not_its_message() -> None:
    late = _record(uid="late", engines=(_engine(f"{RESNET}@sha256:{'2' * 64}"),))
    marker = undelivered.undelivered(late)
    reworded = dataclasses.replace(marker, message="the answer was lost")  # a message that names nothing
    # A denial whose message names the allow but that is no undelivered record (another reason).
    mimic = dataclasses.replace(marker, reason="Denied", record_id=uuid.uuid4().hex)
    stored = [_stored(1, late), _stored(2, reworded)]
    assert [s.seq for s in not_delivered(stored)] == [1]
    assert replay(stored) == []
    assert [s.seq for s in not_delivered([_stored(1, late), _stored(2, mimic)])] == []
    # Another request's undelivered record does not name this allow even with the same record_id pair.
    other = dataclasses.replace(marker, uid="someone-else")
    assert not_delivered([_stored(1, late), _stored(2, other)]) == []


def _stored(seq: int, record: DecisionRecord) -> StoredRecord:
    return StoredRecord(seq, record, "0" * 64, f"{seq:064x}")
