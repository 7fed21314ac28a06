"""webhook/_metrics.py: the live decision log's record count and oldest record, before and after pruning, and
read beside the scrape (a hung database never holds /metrics)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from decisionlog import DecisionRecord, PostgresStore, SQLiteStore
from decisionlog._archive import archive_segments
from decisionlog._segments import Ledger
from tests.support.harness import TcpProxy, WaitUntil
from trtguard.demo.material import Material
from verifier.base._deadline import Deadline
from verifier.crypto._keys import generate_private_key
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._app import WebhookServices, create_app
from webhook._metrics import OBSERVE_TIMEOUT_S, Metrics
from webhook._policy_store import PolicyStore
from webhook._settings import ServeSettings
from webhook._tracing import Tracing


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


@pytest.mark.postgres
async def test_a_scrape_never_waits_on_a_hung_database(
    demo_material: Material, pg_url: str, pg_proxy: TcpProxy, wait_until: WaitUntil
) -> None:
    """Issue 31: /metrics read the record count and the oldest record itself, and waited 2-5 s while
    PostgreSQL hung (a cancelled query waits on the hung server). The reads run beside the scrape now: a
    scrape answers with the last values at once, and a hung read is not started again while it runs."""
    policies = PolicyStore(demo_material.policies, LocalEvidence(demo_material.attestations))
    policies.load()
    store = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]))
    await store.open()
    metrics = Metrics()
    services = WebhookServices(policies, store, metrics, Reviewer(policies, store, metrics), Tracing(None))
    app = create_app(
        ServeSettings(policies=demo_material.policies, insecure_http=True), services, owns_store=False
    )
    await store.append(_record(datetime(2026, 1, 1, tzinfo=UTC)), deadline=Deadline.after(5))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w") as client:

            async def counted() -> bool:
                await client.get("/metrics")
                return _value(metrics, "trtguard_decision_log_records") == 1

            await wait_until(counted, within=10)  # the first scrape starts the read, a later one shows it
            pg_proxy.hang()
            for _ in range(5):
                # Well under the reads' own bound: the scrape does not wait for them at all.
                response = await asyncio.wait_for(client.get("/metrics"), OBSERVE_TIMEOUT_S / 2)
                assert response.status_code == 200
                assert "\ntrtguard_decision_log_records 1.0\n" in response.text
            pg_proxy.resume()
    finally:
        pg_proxy.resume()
        await store.close()
