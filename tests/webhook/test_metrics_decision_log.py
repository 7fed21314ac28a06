"""webhook/metrics.py: the live decision log's record count and oldest record, before and after pruning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from decisionlog import DecisionRecord, SQLiteStore
from decisionlog._archive import archive_segments
from decisionlog._segments import Ledger
from verifier.base._deadline import Deadline
from verifier.keys import generate_private_key
from webhook.metrics import Metrics


def _record(at: datetime) -> DecisionRecord:
    return DecisionRecord(
        uid="u", operation="CREATE", kind="Pod", api_version="v1", allowed=True, reason="Allowed", time=at
    )


def _value(metrics: Metrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name)


async def test_records_and_oldest_record_follow_pruning(tmp_path: Path) -> None:
    metrics = Metrics()
    store = SQLiteStore(tmp_path / "decisions.db")
    await store.open()
    try:
        await metrics.observe_decision_log(store)
        assert _value(metrics, "trtguard_decision_log_records") == 0
        assert _value(metrics, "trtguard_decision_log_oldest_record_timestamp_seconds") == 0
        start = datetime(2026, 1, 1, tzinfo=UTC)
        for i in range(6):
            await store.append(_record(start + timedelta(days=i)), deadline=Deadline.after(5))
        await metrics.observe_decision_log(store)
        assert _value(metrics, "trtguard_decision_log_records") == 6
        assert _value(metrics, "trtguard_decision_log_oldest_record_timestamp_seconds") == start.timestamp()
        with Ledger.open(f"sqlite:///{store.path}") as ledger:
            ledger.seal(generate_private_key(), segment_records=4, partial=False)
            archive_segments(ledger, tmp_path / "archive")
            ledger.prune(tmp_path / "archive", keep_records=0, keep_since=None)
        await metrics.observe_decision_log(store)
        assert _value(metrics, "trtguard_decision_log_records") == 2
        oldest = (start + timedelta(days=4)).timestamp()
        assert _value(metrics, "trtguard_decision_log_oldest_record_timestamp_seconds") == oldest
    finally:
        await store.close()


async def test_a_log_that_cannot_answer_keeps_the_last_values(tmp_path: Path) -> None:
    metrics = Metrics()
    metrics.decision_log_records.set(7)
    await metrics.observe_decision_log(SQLiteStore(tmp_path / "absent.db", read_only=True))
    assert _value(metrics, "trtguard_decision_log_records") == 7
