"""trtguard.audit.history: the engines a workload was admitted with over time, replayed from the log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trtguard.audit.history import workload_history
from verifier.deadline import Deadline
from webhook.decisionlog import DecisionRecord, SQLiteStore

RESNET = "registry.example.com/models/resnet50"


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
    entries = await workload_history(store, "prod", "resnet50")
    assert [(e.seq, e.operation, e.user) for e in entries] == [(1, "CREATE", "alice"), (4, "UPDATE", "bob")]
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
    entries = await workload_history(store, "prod", "resnet50")
    assert [(e.seq, [(c.old, c.new) for c in e.changes]) for e in entries] == [
        (1, [(None, v1)]),
        (2, [(v1, v2)]),
    ]
