"""The last admitted engine is the newest by decision time, even when a spool shipped an older one later."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, DecisionStore, PostgresStore, SQLiteStore
from policies.identity import WorkloadIdentity
from policies.results import AdmittedEngine, AdmittingDecision
from verifier.base._deadline import Deadline
from webhook._admission_history import DecisionLogHistory

RESNET50 = WorkloadIdentity("apps", "Deployment", "prod", "resnet50")

RESNET = "registry.example.com/models/resnet50"
NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


#: The ONNX model the engines here are builds of: each admission replaces the one before.
MODEL = "a" * 64


def _record(engine: str | None, at: datetime, **fields: Any) -> DecisionRecord:
    engines = (
        ({"reference": engine, "digest": engine.split("@")[1], "path": "spec.x", "model": MODEL},)
        if engine
        else ()
    )
    base: dict[str, Any] = {
        "uid": "u",
        "operation": "UPDATE",
        "kind": "Deployment",
        "api_version": "apps/v1",
        "allowed": True,
        "reason": "Allowed",
        "namespace": "prod",
        "name": "resnet50",
        "engines": engines,
        "time": at,
    }
    base.update(fields)
    return DecisionRecord(**base)


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "decisions.db")
    await s.open()
    yield s
    await s.close()


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(pg_url)
    await s.open()
    yield s
    await s.close()


async def _spool_shipped_after_newer(store: DecisionStore) -> None:
    old, new = (f"{RESNET}@sha256:{c * 64}" for c in "12")
    # During an outage a replica spooled the admission of `old` at 12:00; another wrote `new` directly at
    # 12:05, and 60 records without engines after it (more than a page); the spool shipped `old` at 12:10.
    direct = _record(new, NOON + timedelta(minutes=5))
    records = [
        _record(None, NOON - timedelta(hours=1), operation="CREATE"),
        direct,
        *(_record(None, NOON + timedelta(minutes=6, seconds=i)) for i in range(60)),
        _record(old, NOON),
    ]
    for record in records:
        await store.append(record, deadline=Deadline.after(5))
    history = DecisionLogHistory(store)
    assert await history.last_engines(RESNET50, Deadline.after(5), "change-control") == (
        AdmittedEngine(new, admitted_by=AdmittingDecision(direct.record_id, 2), model=MODEL),
    )


async def test_a_record_shipped_late_is_not_the_last_admission(sqlite_store: SQLiteStore) -> None:
    await _spool_shipped_after_newer(sqlite_store)


@pytest.mark.postgres
async def test_a_record_shipped_late_is_not_the_last_admission_on_postgres(pg_store: PostgresStore) -> None:
    await _spool_shipped_after_newer(pg_store)


async def test_equal_times_fall_back_to_seq(sqlite_store: SQLiteStore) -> None:
    first, second = (f"{RESNET}@sha256:{c * 64}" for c in "34")
    later = _record(second, NOON)
    for record in (_record(first, NOON), later):
        await sqlite_store.append(record, deadline=Deadline.after(5))
    found = await DecisionLogHistory(sqlite_store).last_engines(RESNET50, Deadline.after(5), "change-control")
    assert found == (AdmittedEngine(second, admitted_by=AdmittingDecision(later.record_id, 2), model=MODEL),)
