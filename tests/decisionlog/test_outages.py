"""Decision-log outages (issue 13): PostgreSQL stopped, hung and crashed mid-write, and full disks.

Every test checks the same three things: every answer (an ``append`` returning or refusing) comes within its
deadline, readiness says whether a record can be taken now, and the log agrees with what was answered in
time: an allow record whose append was refused is followed by an undelivered record
(decisionlog/_undelivered.py). PostgreSQL is the real server on 127.0.0.1:5432 behind a
:class:`TcpProxy` that the test stops (refused connections), hangs (nothing forwarded, as under SIGSTOP) or
cuts while a write is in flight; full disks are small tmpfs mounts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from decisionlog import (
    DecisionLogUnavailable,
    DecisionRecord,
    PostgresOptions,
    PostgresStore,
    RecordQuery,
    SpoolingStore,
    SQLiteStore,
)
from decisionlog import _undelivered as undelivered
from tests.support.harness import RecordFactory, TcpProxy, WaitUntil
from verifier.base._deadline import Deadline

#: Scheduling slack allowed past a deadline on a loaded test machine.
SLACK = 0.25


@dataclass
class Answer:
    record: DecisionRecord
    seconds: float
    confirmed: bool


async def _answer(
    store: PostgresStore | SQLiteStore | SpoolingStore, record: DecisionRecord, within: float
) -> Answer:
    started = time.monotonic()
    try:
        await store.append(record, deadline=Deadline.after(within))
    except DecisionLogUnavailable:
        return Answer(record, time.monotonic() - started, confirmed=False)
    return Answer(record, time.monotonic() - started, confirmed=True)


async def _load(
    store: PostgresStore | SQLiteStore | SpoolingStore,
    make_record: RecordFactory,
    *,
    rate: float,
    seconds: float,
    within: float,
) -> list[Answer]:
    tasks = []
    for _ in range(int(rate * seconds)):
        tasks.append(asyncio.create_task(_answer(store, make_record(), within)))
        await asyncio.sleep(1 / rate)
    return list(await asyncio.gather(*tasks))


async def _log_agrees(store: PostgresStore | SQLiteStore, answers: list[Answer]) -> None:
    """A refused answer's record is absent or marked undelivered, a confirmed one is there; chain holds."""
    stored = [s.record for s in await store.query(RecordQuery())]
    marked = {undelivered.target(r) for r in stored} - {None}
    ids = {r.record_id for r in stored}
    for answer in answers:
        if not answer.confirmed and answer.record.record_id in ids:
            assert answer.record.record_id in marked, f"{answer.record.uid} is in the log but was refused"
        if answer.confirmed:
            assert answer.record.record_id in ids and answer.record.record_id not in marked
    assert (await store.verify()).ok


def _options(**overrides: float) -> PostgresOptions:
    values = {"connect_timeout": 1.0, "write_timeout": 1.5, "stall_after": 0.5, "retry_interval": 0.2}
    values.update(overrides)
    return PostgresOptions(**values)  # type: ignore[arg-type]


pg = pytest.mark.postgres


@pg
async def test_postgres_stopped_deny_mode_refuses_at_once(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    store = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options(connect_timeout=3.0))
    await pg_proxy.stop()
    await store.open()
    try:
        assert not store.ready
        answers = await _load(store, make_record, rate=100, seconds=1.0, within=4.75)
        assert not any(a.confirmed for a in answers)
        # Known down: no answer waits out the 3 s connect timeout.
        assert max(a.seconds for a in answers) < 0.2
        await pg_proxy.start()
        await wait_until(lambda: store.ready, within=5)
        assert (await _answer(store, make_record(), 4.75)).confirmed
        await _log_agrees(store, answers)
    finally:
        await store.close()


@pg
async def test_postgres_hung_keeps_every_answer_within_its_deadline_and_turns_unready(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    store = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options())
    await store.open()
    try:
        assert (await _answer(store, make_record(), 5)).confirmed
        load = asyncio.create_task(_load(store, make_record, rate=50, seconds=3.0, within=1.0))
        await asyncio.sleep(0.5)
        pg_proxy.hang()
        hung = time.monotonic()
        await wait_until(lambda: not store.ready, within=5, interval=0.01)
        # stall_after (0.5 s) plus a poll: not the 15 s of a cancelled query on a hung server.
        assert time.monotonic() - hung < 0.5 + SLACK
        answers = await load
        assert max(a.seconds for a in answers) < 1.0 + SLACK
        assert any(not a.confirmed for a in answers)
        pg_proxy.resume()
        await wait_until(lambda: store.ready, within=10)
        await wait_until(lambda: store.undelivered_pending == 0, within=10)
        await _log_agrees(store, answers)
    finally:
        await store.close()


@pg
async def test_a_write_on_a_hung_server_is_abandoned_at_the_write_bound(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory
) -> None:
    """Cancelling a query on a hung server would wait for that server: the write is abandoned instead."""
    store = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options(write_timeout=1.0))
    await store.open()
    try:
        assert (await _answer(store, make_record(), 5)).confirmed
        pg_proxy.hang()
        started = time.monotonic()
        with pytest.raises(DecisionLogUnavailable, match=r"did not finish within 1 s; abandoned it"):
            await store.append_many([make_record()], dedupe=False)
        assert time.monotonic() - started < 1.0 + SLACK
        assert not await store.check_health()
        assert time.monotonic() - started < 2.0 + 2 * SLACK
    finally:
        pg_proxy.resume()
        await store.close()


@pg
async def test_a_write_held_by_a_hang_that_lands_late_is_marked_undelivered(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    """The hang ends before the write bound: the commit lands after its waiter answered deny."""
    store = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options(write_timeout=3.0))
    await store.open()
    try:
        assert (await _answer(store, make_record(), 5)).confirmed
        pg_proxy.hang()
        late = await _answer(store, make_record(), 0.5)
        assert not late.confirmed and late.seconds < 0.5 + SLACK
        pg_proxy.resume()  # the held transaction goes on and commits
        await wait_until(lambda: store.undelivered_pending == 0 and store.ready, within=10)
        stored = [s.record for s in await store.query(RecordQuery(uid=late.record.uid))]
        assert [(r.allowed, r.reason) for r in stored] == [(True, "Allowed"), (False, undelivered.REASON)]
        assert store.undelivered_written == 1
        await _log_agrees(store, [late])
    finally:
        await store.close()


@pg
async def test_postgres_crashing_mid_write_leaves_a_log_that_agrees(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    store = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options())
    await store.open()
    try:
        assert (await _answer(store, make_record(), 5)).confirmed
        load = asyncio.create_task(_load(store, make_record, rate=50, seconds=2.0, within=1.0))
        await asyncio.sleep(0.5)
        pg_proxy.hang()
        await asyncio.sleep(0.2)
        await pg_proxy.stop()  # the connections drop with a write in flight
        answers = await load
        assert max(a.seconds for a in answers) < 1.0 + SLACK
        assert not store.ready
        await pg_proxy.start()
        await wait_until(lambda: store.ready, within=10)
        await wait_until(lambda: store.undelivered_pending == 0, within=10)
        await _log_agrees(store, answers)
    finally:
        await store.close()


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    return filler


@pg
async def test_spool_mode_is_unready_when_postgres_is_down_and_the_spool_disk_is_full(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, tiny_disk: Path, wait_until: WaitUntil
) -> None:
    primary = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options())
    store = SpoolingStore(primary, tiny_disk / "spool.db", primary_timeout=1.0, ship_interval=0.2)
    await pg_proxy.stop()
    await store.open()
    try:
        assert store.ready  # PostgreSQL down, but the spool takes records
        assert (await store.append(make_record(), deadline=Deadline.after(4.75))).spooled
        filler = _fill(tiny_disk)
        assert not store.ready
        assert "PostgreSQL: " in (store.problem or "") and "spool: " in (store.problem or "")
        assert "is full" in (store.problem or "")
        answer = await _answer(store, make_record(), 4.75)
        assert not answer.confirmed and answer.seconds < 4.75 + SLACK
        filler.unlink()
        await wait_until(lambda: store.ready, within=5)
        await pg_proxy.start()
        await wait_until(lambda: store.pending == 0, within=15)
        assert (await store.verify()).ok
    finally:
        await store.close()


async def test_sqlite_is_unready_on_a_full_disk_and_ready_again_with_room(
    tiny_disk: Path, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    store = SQLiteStore(tiny_disk / "d.db", health_interval=0.2)
    await store.open()
    try:
        assert store.ready
        assert (await _answer(store, make_record(), 4.75)).confirmed
        filler = _fill(tiny_disk)
        assert not store.ready
        assert "is full" in (store.problem or "")
        answers = [await _answer(store, make_record(latency_us=0), 4.75) for _ in range(3)]
        assert max(a.seconds for a in answers) < 4.75 + SLACK
        filler.unlink()
        await wait_until(lambda: store.ready, within=5)
        assert (await _answer(store, make_record(), 4.75)).confirmed
        await _log_agrees(store, answers)
    finally:
        await store.close()


@pg
async def test_a_spooled_record_and_its_undelivered_record_ship_together(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, tmp_path: Path
) -> None:
    """A spool write that finished after its deadline is followed by its undelivered record in the spool."""
    primary = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options())
    store = SpoolingStore(primary, tmp_path / "spool.db", primary_timeout=1.0, ship_interval=60)
    await pg_proxy.stop()
    await store.open()
    try:
        late, dropped = make_record(), make_record()
        await store.spool.put(late)
        await store.spool.put(undelivered.undelivered(late))
        await store.spool.put(undelivered.undelivered(dropped))  # its original never made it to the spool
        await pg_proxy.start()
        assert await store.ship_once() == 3
        stored = [s.record for s in await store.query(RecordQuery())]
        assert [(r.uid, r.reason) for r in stored] == [(late.uid, "Allowed"), (late.uid, undelivered.REASON)]
        assert store.undelivered_written == 1  # the one shipped; the dropped one is not counted
        assert (await store.verify()).ok
    finally:
        await store.close()


@pg
async def test_an_allow_answered_from_the_spool_is_not_marked_undelivered(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, tmp_path: Path, wait_until: WaitUntil
) -> None:
    """PostgreSQL takes the record and hangs; the spool answers; the held commit then lands late.

    The late original is marked undelivered; the copy answered from the spool ships under its own record_id,
    so the delivered answer stays an admission.
    """
    primary = PostgresStore(pg_proxy.url(pg_url.rsplit("/", 1)[1]), _options(write_timeout=3.0))
    store = SpoolingStore(primary, tmp_path / "spool.db", primary_timeout=0.5, ship_interval=0.2)
    await store.open()
    try:
        assert (await _answer(store, make_record(), 5)).confirmed
        pg_proxy.hang()
        record = make_record()
        answer = await _answer(store, record, 2)
        assert answer.confirmed  # from the spool
        pg_proxy.resume()
        await wait_until(lambda: primary.undelivered_pending == 0 and store.pending == 0, within=15)
        stored = [s.record for s in await store.query(RecordQuery(uid=record.uid))]
        marked = {undelivered.target(r) for r in stored} - {None}
        allows = [r for r in stored if r.allowed]
        assert marked <= {record.record_id}
        assert [r for r in allows if r.record_id not in marked], "the delivered allow must stay unmarked"
        assert (await store.verify()).ok
    finally:
        await store.close()
