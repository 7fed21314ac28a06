"""Group commit, shared by both stores: one writer commits whatever has queued up as one batch.

A waiter is answered only once the batch holding its record is committed, so a record is durable before the
webhook's answer leaves; batches are taken in queue order and each links to the chain head it commits after,
so the chain follows the order of arrival. While a batch commits, the next one queues up: one transaction
(one fsync, one round trip) covers a burst of decisions.

Deadlines: nobody waits past their deadline. A record whose deadline passes before the writer takes it is
withdrawn (never written). A record the writer has taken but not confirmed by the deadline is given up by its
waiter, whose answer becomes a denial; if the record reaches the log anyway (a late commit, or one whose
acknowledgement was lost), the writer appends an *undelivered* record for it
(:mod:`decisionlog._undelivered`), so the log never shows an allow the API server did not receive.
The same holds for every record of a failed batch: its outcome may be unknown (PostgreSQL), so an
undelivered record is queued, and the store writes it only if the record is there.

Given the request's arrival, the writer stamps the record's latency when it takes it: from the arrival,
through judging and the wait for the writer, to the start of the commit that makes it durable.

What a store gives the writer: ``commit`` (one batch in one transaction; raising fails every record of the
batch and marks the writer failed until a commit or ``recover`` succeeds; it returns the records it stored,
and may skip undelivered records whose original is not in the log) and, optionally, ``recover`` (awaited every
``recover_interval`` seconds while the writer is failed and idle: SQLite's health check needs the writer's own
connection; PostgreSQL checks its health on a schedule of its own). With ``fail_fast`` a writer known to be
failed (or whose commit in flight has stalled for ``stall_after`` seconds) refuses records at once instead of
letting them wait out a connect timeout: a circuit breaker, closed again by a commit or health check that
succeeds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from decisionlog._errors import DecisionLogInDoubt, DecisionLogUnavailable, describe
from decisionlog._record import DecisionRecord, StoredRecord
from decisionlog._store import AppendReceipt
from decisionlog._undelivered import original_id, undelivered
from verifier.base import Deadline

#: Most records committed in one transaction.
MAX_BATCH: Final = 512

#: Commits one batch in one transaction; returns the records it stored, in the order given.
Commit = Callable[[list[DecisionRecord]], Awaitable[list[StoredRecord]]]
#: Checks whether a failed store works again; returns None when it does, else what is wrong.
Recover = Callable[[], Awaitable[str | None]]


@dataclass(slots=True, eq=False)
class _Item:
    """One record on its way to the writer."""

    record: DecisionRecord
    future: asyncio.Future[StoredRecord]
    #: When the request arrived (``time.monotonic()``), if the record's latency is to be stamped.
    arrived: float | None
    taken: bool = False
    withdrawn: bool = False
    #: Its waiter gave up at its deadline after the writer took it: the answer was a denial.
    abandoned: bool = False


class BatchWriter:
    """The queue of records waiting for the writer, and the writer: a task on the event loop that started it.

    Everything here runs on that one loop; a store that must block (SQLite) does so inside ``commit``, on a
    thread of its own.
    """

    def __init__(
        self,
        *,
        where: str,
        log: logging.Logger,
        recover_interval: float = 5.0,
        fail_fast: bool = False,
        stall_after: float | None = None,
    ) -> None:
        self._where = where
        self._log = log
        self._recover_interval = recover_interval
        self._fail_fast = fail_fast
        self._stall_after = stall_after
        self._queue: asyncio.Queue[_Item | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._commit_started: float | None = None
        #: Undelivered records still to write (see the module docstring), oldest first.
        self._undelivered: list[DecisionRecord] = []
        #: Undelivered records written since the writer was made (``trtguard_decision_log_undelivered``).
        self.undelivered_written = 0
        #: Why the last commit (or recovery check) failed; None while the store takes records.
        self.failure: str | None = None

    @property
    def running(self) -> bool:
        """True while the writer runs."""
        return self._task is not None and not self._task.done()

    @property
    def stalled(self) -> bool:
        """True while a commit has been running for longer than ``stall_after`` seconds."""
        started = self._commit_started
        return (
            self._stall_after is not None
            and started is not None
            and time.monotonic() - started > self._stall_after
        )

    @property
    def problem(self) -> str | None:
        """Why the writer cannot take a record now (failed, stalled or not running); None while it can."""
        if not self.running:
            return "the decision log writer is not running"
        if self.failure is not None:
            return self.failure
        if self.stalled:
            return f"a write has been running for more than {self._stall_after:g} s"
        return None

    @property
    def undelivered_pending(self) -> int:
        """Undelivered records waiting to be written."""
        return len(self._undelivered)

    def start(self, commit: Commit, recover: Recover | None = None, *, name: str) -> None:
        """Start the writer on the running event loop, committing each batch with ``commit``."""
        queue: asyncio.Queue[_Item | None] = asyncio.Queue()
        self._queue = queue
        self._task = asyncio.create_task(self._run(queue, commit, recover), name=name)

    async def stop(self) -> None:
        """Commit what is queued, then stop the writer."""
        if self._task is None or self._queue is None:
            return
        self._queue.put_nowait(None)
        await self._task
        self._task = self._queue = None

    async def submit(
        self, record: DecisionRecord, deadline: Deadline, arrived: float | None = None
    ) -> StoredRecord:
        """Queue ``record`` and wait until it is committed, never past ``deadline`` (see the module doc).

        Raises :class:`DecisionLogUnavailable` when it was not confirmed in time, or at once while a
        ``fail_fast`` writer is failed or stalled.
        """
        if self._task is None or self._queue is None:
            raise DecisionLogUnavailable("the decision log is not open", location=self._where)
        if self._task.get_loop() is not asyncio.get_running_loop():
            raise DecisionLogUnavailable(
                "the decision log was opened on another event loop", location=self._where
            )
        if self._fail_fast and (self.failure is not None or self.stalled):
            why = self.failure or "a write has not finished"
            raise DecisionLogUnavailable(f"the decision log is unavailable: {why}", location=self._where)
        loop = asyncio.get_running_loop()
        item = _Item(record, loop.create_future(), arrived)
        self._queue.put_nowait(item)
        # One timer that settles the item's future at the deadline, where ``asyncio.timeout`` around
        # ``asyncio.shield`` cost a Timeout, an outer future and its callbacks on every decision. Cancelling
        # the waiter cancels the item's future; the writer then stores the record all the same (as it stored
        # the shielded one), and sets no outcome on it.
        expiry = loop.call_later(deadline.remaining(), self._expire, item)
        try:
            return await item.future
        finally:
            expiry.cancel()

    def _expire(self, item: _Item) -> None:
        """At ``item``'s deadline: unless the writer answered it already, fail its waiter."""
        if item.future.done():
            return
        if not item.taken:
            # Not yet taken by the writer: withdrawn, so that no record contradicts the answer we give.
            item.withdrawn = True
            why = "the decision log did not take the record in time"
            item.future.set_exception(DecisionLogUnavailable(why, location=self._where))
            return
        # Taken, not confirmed: the answer is a denial, and the writer records that if the record lands.
        item.abandoned = True
        why = "the decision log did not confirm the record in time"
        item.future.set_exception(DecisionLogInDoubt(why, location=self._where))

    async def _run(self, queue: asyncio.Queue[_Item | None], commit: Commit, recover: Recover | None) -> None:
        while True:
            # Idle after a failure (or with undelivered records to write): check now and then.
            if (self.failure is not None and recover is not None) or self._undelivered:
                try:
                    async with asyncio.timeout(self._recover_interval):
                        first = await queue.get()
                except TimeoutError:
                    if self.failure is not None and recover is not None:
                        self.failure = await recover()
                    if self.failure is None and self._undelivered:
                        await self._write(commit, [])
                    continue
            else:  # no timeout to arm: the common case, once per batch
                first = await queue.get()
            if first is None:
                if self._undelivered:
                    await self._write(commit, [])
                return
            batch, stop = _drain(queue, first)
            taken = [item for item in batch if not item.withdrawn]
            if self._fail_fast and self.failure is not None:
                # Queued before the store failed: refused now rather than tried against a store known down.
                self._refuse(taken)
                taken = []
            now = time.monotonic()
            for item in taken:
                item.taken = True
                if item.arrived is not None:
                    # The whole answer time: from the request's arrival, this queue included, to this commit.
                    latency = round((now - item.arrived) * 1_000_000)
                    item.record = _with_latency(item.record, latency)
            if taken or self._undelivered:
                await self._write(commit, taken)
            if stop:
                if self._undelivered:
                    await self._write(commit, [])
                return

    def _refuse(self, items: list[_Item]) -> None:
        for item in items:
            item.withdrawn = True
            if not item.future.done():
                item.future.set_exception(
                    DecisionLogUnavailable(
                        f"the decision log is unavailable: {self.failure}", location=self._where
                    )
                )

    async def _write(self, commit: Commit, taken: list[_Item]) -> None:
        markers = list(self._undelivered)
        self._commit_started = time.monotonic()
        try:
            stored = await commit([*markers, *(item.record for item in taken)])
        except Exception as error:  # every waiter must get an answer; a failed write denies or spools
            message = describe(error)
            # Not ready until a commit or a recovery check succeeds again.
            self.failure = message
            self._log.error("decision log write failed: %s", message, extra={"store": self._where})
            for item in taken:
                # Its outcome may be unknown (an acknowledgement lost): if it is in the log, mark it denied.
                self._undelivered.append(undelivered(item.record))
                if not item.future.done() and not item.abandoned:  # an abandoned item has no waiter left
                    item.future.set_exception(
                        DecisionLogInDoubt(f"decision log write failed: {message}", location=self._where)
                    )
            return
        finally:
            self._commit_started = None
        self.failure = None
        # Written, or skipped by the store because their original is not in the log: either way, done.
        del self._undelivered[: len(markers)]
        if markers:
            self.undelivered_written += sum(1 for s in stored if original_id(s.record) is not None)
        by_id = {s.record.record_id: s for s in stored}
        for item in taken:
            result = by_id[item.record.record_id]
            if item.abandoned:
                self._undelivered.append(undelivered(item.record))
                self._log.warning(
                    "decision recorded after its answer deadline; recording it as undelivered",
                    extra={"store": self._where, "fields": {"uid": item.record.uid, "seq": result.seq}},
                )
            elif not item.future.done():  # done (not abandoned): its waiter was cancelled, nobody waits
                item.future.set_result(result)


class BatchedStore:
    """What both stores do alike through their :class:`BatchWriter`: a subclass sets ``_writer`` and
    ``_read_only`` in its ``__init__`` and defines ``description``."""

    _writer: BatchWriter
    _read_only: bool

    if TYPE_CHECKING:

        @property
        def description(self) -> str: ...

    @property
    def undelivered_pending(self) -> int:
        """Undelivered records not yet written (decisionlog._undelivered)."""
        return self._writer.undelivered_pending

    @property
    def undelivered_written(self) -> int:
        """Undelivered records written since the store was made."""
        return self._writer.undelivered_written

    async def append(
        self, record: DecisionRecord, *, deadline: Deadline, arrived: float | None = None
    ) -> AppendReceipt:
        """Queue ``record`` for the writer and wait for its commit (see ``DecisionStore.append``)."""
        if self._read_only:
            raise DecisionLogUnavailable("this decision log was opened read-only", location=self.description)
        stored = await self._writer.submit(record, deadline, arrived)
        return AppendReceipt(stored.seq, stored.hash)


def _drain(queue: asyncio.Queue[_Item | None], first: _Item) -> tuple[list[_Item], bool]:
    """``first`` and what else has queued up (up to MAX_BATCH), and whether the stop marker came."""
    batch = [first]
    while len(batch) < MAX_BATCH and not queue.empty():
        item = queue.get_nowait()
        if item is None:
            return batch, True
        batch.append(item)
    return batch, False


#: The fields of a DecisionRecord, in order (:func:`_with_latency` copies them).
_FIELDS: Final = tuple(f.name for f in dataclasses.fields(DecisionRecord))


def _with_latency(record: DecisionRecord, latency_us: int) -> DecisionRecord:
    """``dataclasses.replace(record, latency_us=latency_us)`` at about half its cost (it walks the fields'
    metadata and calls ``__init__``; a DecisionRecord has no ``__post_init__`` to run): once per record, on
    the event loop."""
    copy = object.__new__(DecisionRecord)
    for name in _FIELDS:
        object.__setattr__(copy, name, getattr(record, name))
    object.__setattr__(copy, "latency_us", latency_us)
    return copy
