"""decisionlog/_spool.py: admit-and-spool while PostgreSQL is down, ship when it is back."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from decisionlog import (
    DecisionLogUnavailable,
    PostgresOptions,
    PostgresStore,
    RecordQuery,
    SpoolingStore,
    open_store,
)
from decisionlog._record import storable
from tests.support.harness import RecordFactory, TcpProxy, WaitUntil
from verifier.base._deadline import Deadline

pytestmark = pytest.mark.postgres


def _spooling(proxy: TcpProxy, pg_url: str, spool_path: Path, **kwargs: float) -> SpoolingStore:
    database = pg_url.rsplit("/", 1)[1]
    primary = PostgresStore(proxy.url(database), PostgresOptions(connect_timeout=1.0, write_timeout=2.0))
    return SpoolingStore(primary, spool_path, primary_timeout=1.0, **kwargs)


def _spooled_ids(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT record_id FROM trtguard_spool ORDER BY n")]


async def test_open_store_builds_a_spooling_store(pg_url: str, tmp_path: Path) -> None:
    store = open_store(pg_url, unavailable="spool", spool=tmp_path / "s.db")
    assert isinstance(store, SpoolingStore)
    assert "spooling to" in store.description


async def test_records_go_to_postgres_while_it_is_up(
    pg_proxy: TcpProxy, pg_url: str, tmp_path: Path, make_record: RecordFactory
) -> None:
    store = _spooling(pg_proxy, pg_url, tmp_path / "spool.db", ship_interval=3600)
    await store.open()
    try:
        receipt = await store.append(make_record(), deadline=Deadline.after(5))
        assert not receipt.spooled
        assert receipt.seq == 1
        assert store.pending == 0
    finally:
        await store.close()


async def test_down_spools_then_ships_every_record_once(
    pg_proxy: TcpProxy, pg_url: str, tmp_path: Path, make_record: RecordFactory
) -> None:
    spool_path = tmp_path / "spool.db"
    store = _spooling(pg_proxy, pg_url, spool_path, ship_interval=3600, retry_after=30)
    await pg_proxy.stop()
    await store.open()
    try:
        records = [make_record() for _ in range(5)]
        first = await store.append(records[0], deadline=Deadline.after(5))
        assert first.spooled
        # PostgreSQL is known to be down now: the next records do not wait for it.
        started = time.perf_counter()
        for record in records[1:]:
            assert (await store.append(record, deadline=Deadline.after(5))).spooled
        assert time.perf_counter() - started < 1.0
        assert store.pending == 5
        assert _spooled_ids(spool_path) == [r.record_id for r in records]
        assert await store.ship_once() == 0  # still down: nothing moves, nothing is lost
        assert store.pending == 5

        await pg_proxy.start()
        assert await store.ship_once() == 5
        assert store.pending == 0
        assert _spooled_ids(spool_path) == []
        stored = await store.query(RecordQuery())
        assert [s.record for s in stored] == records  # original times and content, in spool order
        assert (await store.verify()).ok
        # And PostgreSQL is used directly again.
        assert not (await store.append(make_record(), deadline=Deadline.after(5))).spooled
    finally:
        await store.close()


async def test_a_record_already_in_postgres_is_not_shipped_twice(
    pg_proxy: TcpProxy, pg_url: str, tmp_path: Path, make_record: RecordFactory
) -> None:
    """A commit whose acknowledgement was lost: the record is in PostgreSQL and in the spool."""
    store = _spooling(pg_proxy, pg_url, tmp_path / "spool.db", ship_interval=3600)
    await store.open()
    try:
        record = make_record()
        await store.primary.append(record, deadline=Deadline.after(5))
        await store.spool.put(record)
        await store.spool.put(later := make_record())
        assert await store.ship_once() == 2
        stored = await store.query(RecordQuery())
        assert [s.record.record_id for s in stored] == [record.record_id, later.record_id]
        assert (await store.verify()).ok
    finally:
        await store.close()


async def test_spooled_records_survive_a_restart_and_ship_in_the_background(
    pg_proxy: TcpProxy, pg_url: str, tmp_path: Path, make_record: RecordFactory
) -> None:
    spool_path = tmp_path / "spool.db"
    await pg_proxy.stop()
    first = _spooling(pg_proxy, pg_url, spool_path, ship_interval=3600)
    await first.open()
    records = [make_record() for _ in range(3)]
    for record in records:
        assert (await first.append(record, deadline=Deadline.after(5))).spooled
    await first.close()

    await pg_proxy.start()
    second = _spooling(pg_proxy, pg_url, spool_path, ship_interval=0.2)
    await second.open()
    try:
        assert second.pending == 3
        for _ in range(50):
            if second.pending == 0:
                break
            await asyncio.sleep(0.1)
        assert second.pending == 0
        assert [s.record.uid for s in await second.query(RecordQuery())] == [r.uid for r in records]
    finally:
        await second.close()


async def test_a_short_budget_goes_straight_to_the_spool(
    pg_proxy: TcpProxy, pg_url: str, tmp_path: Path, make_record: RecordFactory
) -> None:
    store = _spooling(pg_proxy, pg_url, tmp_path / "spool.db", ship_interval=3600)
    await store.open()
    try:
        receipt = await store.append(make_record(), deadline=Deadline.after(0.3))
        assert receipt.spooled
    finally:
        await store.close()


async def test_the_shipper_outlives_a_spool_it_cannot_read(
    pg_proxy: TcpProxy,
    pg_url: str,
    tmp_path: Path,
    make_record: RecordFactory,
    wait_until: WaitUntil,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failed round (here the spool's table is gone for a while) is logged, and shipping resumes later."""
    spool_path = tmp_path / "spool.db"
    store = _spooling(pg_proxy, pg_url, spool_path, ship_interval=0.05, retry_after=0.1)
    await pg_proxy.stop()
    await store.open()
    try:
        records = [make_record() for _ in range(3)]
        for record in records:
            assert (await store.append(record, deadline=Deadline.after(5))).spooled
        with sqlite3.connect(spool_path) as conn:
            conn.execute("ALTER TABLE trtguard_spool RENAME TO hidden")
        await wait_until(
            lambda: any("shipping spooled decisions failed" in r.getMessage() for r in caplog.records)
        )
        await asyncio.sleep(0.3)  # a few failed rounds: the shipper is still running
        assert store.ready
        with sqlite3.connect(spool_path) as conn:
            conn.execute("ALTER TABLE hidden RENAME TO trtguard_spool")
        await pg_proxy.start()
        await wait_until(lambda: store.pending == 0, within=20)
        assert [s.record.uid for s in await store.query(RecordQuery())] == [r.uid for r in records]
    finally:
        await store.close()


async def test_not_ready_once_the_shipper_has_stopped_and_close_still_closes_both(
    pg_proxy: TcpProxy, pg_url: str, tmp_path: Path, make_record: RecordFactory
) -> None:
    store = _spooling(pg_proxy, pg_url, tmp_path / "spool.db", ship_interval=3600)
    await store.open()
    assert store.ready
    shipper = store._shipper
    assert shipper is not None
    shipper.cancel()
    await asyncio.gather(shipper, return_exceptions=True)
    assert not store.ready  # spooled records would never be shipped
    await store.close()  # does not raise the shipper's end, and closes both stores
    with pytest.raises(DecisionLogUnavailable, match="not open"):
        await store.primary.append(make_record(), deadline=Deadline.after(1))
    with pytest.raises(RuntimeError, match="after shutdown"):
        await store.spool.put(make_record())


async def test_a_record_holding_any_characters_is_spooled_and_shipped(
    pg_proxy: TcpProxy, pg_url: str, tmp_path: Path, make_record: RecordFactory
) -> None:
    store = _spooling(pg_proxy, pg_url, tmp_path / "spool.db", ship_interval=3600, retry_after=30)
    await pg_proxy.stop()
    await store.open()
    try:
        odd = make_record(uid="\ud800", name="\x00", message="\udc80" * 10_000)
        assert (await store.append(odd, deadline=Deadline.after(5))).spooled
        await pg_proxy.start()
        assert await store.ship_once() == 1
        [stored] = await store.query(RecordQuery())
        assert stored.record == storable(odd)
        assert (await store.verify()).ok
    finally:
        await store.close()
