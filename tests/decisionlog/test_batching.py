"""decisionlog/_batching.py: the group-commit writer both stores share, committing into a real SQLite
file (``write_batch``), with a gate that holds a batch in its commit and failures injected around it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from decisionlog import DecisionLogUnavailable, DecisionRecord, StoredRecord
from decisionlog import _undelivered as undelivered
from decisionlog._batching import MAX_BATCH, BatchWriter, _with_latency
from decisionlog._sqlite import connect, migrate, write_batch
from tests.support.harness import RecordFactory
from verifier.base._deadline import Deadline

_log = logging.getLogger(__name__)


class Log:
    """A decision-log file and a commit into it that records its batches and can be held or made to fail."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()
        self.failing: Exception | None = None

    async def commit(self, records: list[DecisionRecord]) -> list[StoredRecord]:
        self.entered.set()
        await self.gate.wait()
        if self.failing is not None:
            raise self.failing
        self.batches.append([record.uid for record in records])
        return await asyncio.to_thread(write_batch, self.conn, records, dedupe=False)

    def stored(self) -> list[str]:
        return [row[0] for row in self.conn.execute("SELECT uid FROM trtguard_decisions ORDER BY seq")]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    conn = connect(tmp_path / "d.db")
    migrate(conn, where="test")
    yield Log(conn)
    conn.close()


@pytest.fixture
async def writer(log: Log) -> AsyncIterator[BatchWriter]:
    batches = BatchWriter(where="test log", log=_log)
    batches.start(log.commit, name="test-writer")
    yield batches
    log.gate.set()
    await batches.stop()


async def test_records_queued_during_a_commit_go_in_one_batch_in_queue_order(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    log.gate.clear()
    first = asyncio.create_task(writer.submit(make_record(), Deadline.after(10)))
    await log.entered.wait()
    records = [make_record() for _ in range(20)]
    waiting = [asyncio.create_task(writer.submit(r, Deadline.after(10))) for r in records]
    await asyncio.sleep(0.05)
    log.gate.set()
    stored = await asyncio.gather(first, *waiting)
    assert [len(batch) for batch in log.batches] == [1, 20]
    assert log.batches[1] == [r.uid for r in records]
    assert [s.seq for s in stored] == list(range(1, 22))
    assert [s.prev_hash for s in stored[1:]] == [s.hash for s in stored[:-1]]


async def test_a_batch_holds_at_most_max_batch_records(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    log.gate.clear()
    held = asyncio.create_task(writer.submit(make_record(), Deadline.after(10)))
    await log.entered.wait()
    waiting = [
        asyncio.create_task(writer.submit(make_record(), Deadline.after(10))) for _ in range(MAX_BATCH + 3)
    ]
    await asyncio.sleep(0.05)
    log.gate.set()
    await asyncio.gather(held, *waiting)
    assert [len(batch) for batch in log.batches] == [1, MAX_BATCH, 3]


async def test_a_record_past_its_deadline_before_it_is_taken_is_withdrawn_never_written(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    log.gate.clear()
    taken = make_record()
    taken_task = asyncio.create_task(writer.submit(taken, Deadline.after(5)))
    await log.entered.wait()
    late = make_record()
    with pytest.raises(DecisionLogUnavailable, match="did not take the record in time"):
        await writer.submit(late, Deadline.after(0.1))
    log.gate.set()
    assert (await taken_task).seq == 1
    after = await writer.submit(make_record(), Deadline.after(5))
    assert after.seq == 2
    assert late.uid not in log.stored()
    assert log.stored()[0] == taken.uid


async def test_nobody_waits_past_the_deadline_and_a_late_commit_is_followed_by_an_undelivered_record(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    log.gate.clear()
    taken = make_record()
    started = time.monotonic()
    with pytest.raises(DecisionLogUnavailable, match="did not confirm the record in time"):
        await writer.submit(taken, Deadline.after(0.2))
    assert time.monotonic() - started < 0.3
    log.gate.set()
    # The late commit landed; the next batch says its answer was a denial, before the next record.
    after = await writer.submit(make_record(), Deadline.after(5))
    rows = log.conn.execute("SELECT seq, uid, allowed, body FROM trtguard_decisions ORDER BY seq").fetchall()
    assert [(r[0], r[1], bool(r[2])) for r in rows] == [
        (1, taken.uid, True),
        (2, taken.uid, False),
        (3, after.record.uid, True),
    ]
    marker = DecisionRecord.from_json(json.loads(rows[1][3]))
    assert marker.reason == undelivered.REASON
    assert undelivered.target(marker) == taken.record_id
    assert undelivered.original_id(marker) == taken.record_id
    assert writer.undelivered_pending == 0
    assert writer.undelivered_written == 1  # trtguard_decision_log_undelivered_total follows it


async def test_a_failed_batch_leaves_undelivered_records_that_are_written_only_beside_their_original(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    log.failing = sqlite3.OperationalError("disk I/O error")
    with pytest.raises(DecisionLogUnavailable, match="disk I/O error"):
        await writer.submit(make_record(), Deadline.after(5))
    assert writer.undelivered_pending == 1
    log.failing = None
    # The failed record is not in the log, so its undelivered record is dropped, not written.
    assert (await writer.submit(make_record(), Deadline.after(5))).seq == 1
    assert writer.undelivered_pending == 0
    assert writer.undelivered_written == 0  # dropped, not written: not counted
    assert len(log.stored()) == 1


async def test_a_cancelled_waiter_leaves_its_record_written_and_answers_nobody(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    """A waiter cancelled before or after the writer took its record: the record is written all the same,
    with no undelivered record after it, and the next waiter gets the next number."""
    log.gate.clear()
    taken = make_record()
    taken_task = asyncio.create_task(writer.submit(taken, Deadline.after(5)))
    await log.entered.wait()
    queued = make_record()
    queued_task = asyncio.create_task(writer.submit(queued, Deadline.after(5)))
    await asyncio.sleep(0)
    for task in (taken_task, queued_task):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    log.gate.set()
    after = await writer.submit(make_record(), Deadline.after(5))
    assert after.seq == 3
    assert log.stored() == [taken.uid, queued.uid, after.record.uid]
    assert writer.undelivered_pending == 0
    assert writer.undelivered_written == 0


async def test_a_record_answered_in_time_leaves_no_timer_behind(
    writer: BatchWriter, make_record: RecordFactory
) -> None:
    loop = asyncio.get_running_loop()

    def live() -> int:  # the loop's timers not cancelled: nothing public counts them
        timers: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
        return sum(not handle.cancelled() for handle in timers)

    before = live()
    for _ in range(3):
        await writer.submit(make_record(), Deadline.after(60))
    assert live() <= before


async def test_the_latency_stamped_includes_the_wait_for_the_writer(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    log.gate.clear()
    first = asyncio.create_task(writer.submit(make_record(), Deadline.after(5)))
    await log.entered.wait()
    arrived = time.monotonic() - 0.1  # judged in 100 ms
    waiting = asyncio.create_task(writer.submit(make_record(latency_us=1), Deadline.after(5), arrived))
    unstamped = asyncio.create_task(writer.submit(make_record(latency_us=1), Deadline.after(5)))
    await asyncio.sleep(0.3)
    log.gate.set()
    await first
    assert 400_000 <= (await waiting).record.latency_us < 1_000_000
    assert (await unstamped).record.latency_us == 1  # a record copied as it is keeps its latency


async def test_a_fail_fast_writer_refuses_at_once_while_failed_or_stalled(
    log: Log, make_record: RecordFactory
) -> None:
    writer = BatchWriter(where="test log", log=_log, fail_fast=True, stall_after=0.1)
    writer.start(log.commit, name="test-writer")
    try:
        log.gate.clear()
        held = asyncio.create_task(writer.submit(make_record(), Deadline.after(5)))
        await log.entered.wait()
        await asyncio.sleep(0.15)
        assert writer.stalled
        started = time.monotonic()
        with pytest.raises(DecisionLogUnavailable, match="a write has not finished"):
            await writer.submit(make_record(), Deadline.after(5))
        assert time.monotonic() - started < 0.05
        log.gate.set()
        await held
        assert not writer.stalled
        writer.failure = "PostgreSQL is not reachable"
        with pytest.raises(DecisionLogUnavailable, match="not reachable"):
            await writer.submit(make_record(), Deadline.after(5))
        writer.failure = None
        assert (await writer.submit(make_record(), Deadline.after(5))).seq == 2
    finally:
        log.gate.set()
        await writer.stop()


async def test_a_failed_commit_fails_every_waiter_of_its_batch_and_marks_the_writer(
    writer: BatchWriter, log: Log, make_record: RecordFactory
) -> None:
    log.gate.clear()
    log.failing = sqlite3.OperationalError("database is locked")
    waiting = [asyncio.create_task(writer.submit(make_record(), Deadline.after(5))) for _ in range(5)]
    await log.entered.wait()
    log.gate.set()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(o, DecisionLogUnavailable) for o in outcomes)
    assert all("decision log write failed: database is locked" in str(o) for o in outcomes)
    assert writer.failure == "database is locked"
    assert log.stored() == []

    log.failing = None
    assert (await writer.submit(make_record(), Deadline.after(5))).seq == 1
    assert writer.failure is None


async def test_recover_runs_only_while_failed_and_idle(log: Log, make_record: RecordFactory) -> None:
    checks: list[str | None] = []
    answers = iter(["still locked", None])

    async def recover() -> str | None:
        answer = next(answers)
        checks.append(answer)
        return answer

    writer = BatchWriter(where="test log", log=_log, recover_interval=0.05)
    writer.start(log.commit, recover, name="test-writer")
    try:
        await writer.submit(make_record(), Deadline.after(5))
        await asyncio.sleep(0.2)
        assert checks == []  # healthy: no checks
        log.failing = RuntimeError("disk gone")
        with pytest.raises(DecisionLogUnavailable):
            await writer.submit(make_record(), Deadline.after(5))
        assert writer.failure == "disk gone"
        log.failing = None  # back; the undelivered record of the failed batch is dropped after recovery
        for _ in range(40):
            if writer.failure is None:
                break
            await asyncio.sleep(0.05)
        assert checks == ["still locked", None]
        assert writer.failure is None
    finally:
        await writer.stop()


async def test_stop_commits_what_is_queued(log: Log, make_record: RecordFactory) -> None:
    writer = BatchWriter(where="test log", log=_log)
    writer.start(log.commit, name="test-writer")
    records = [make_record() for _ in range(10)]
    waiting = [asyncio.create_task(writer.submit(r, Deadline.after(5))) for r in records]
    await asyncio.sleep(0)
    await writer.stop()
    assert [s.seq for s in await asyncio.gather(*waiting)] == list(range(1, 11))
    assert log.stored() == [r.uid for r in records]
    assert not writer.running


async def test_a_writer_not_started_or_on_another_loop_takes_nothing(
    log: Log, make_record: RecordFactory
) -> None:
    writer = BatchWriter(where="test log", log=_log)
    with pytest.raises(DecisionLogUnavailable, match="not open"):
        await writer.submit(make_record(), Deadline.after(1))
    writer.start(log.commit, name="test-writer")
    try:
        record = make_record()
        with pytest.raises(DecisionLogUnavailable, match="another event loop"):
            await asyncio.to_thread(asyncio.run, writer.submit(record, Deadline.after(1)))
    finally:
        await writer.stop()
    assert log.stored() == []


def test_the_latency_stamp_is_dataclasses_replace(make_record: RecordFactory) -> None:
    """The writer's cheaper copy gives what ``dataclasses.replace`` gives, field for field (a field or a
    ``__post_init__`` added to DecisionRecord would show here)."""
    record = make_record(message="m")
    stamped = _with_latency(record, 1234)
    assert stamped == dataclasses.replace(record, latency_us=1234)
    assert stamped.record_id == record.record_id and stamped.time == record.time
    assert not hasattr(DecisionRecord, "__post_init__")
