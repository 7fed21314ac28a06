"""Group commit, shared by both stores: one writer commits whatever has queued up as one batch.

A waiter is answered only once the batch holding its record is committed, so a record is durable before the
webhook's answer leaves; batches are taken in queue order and each links to the chain head it commits after,
so the chain follows the order of arrival. While a batch commits, the next one queues up: one transaction
(one fsync, one round trip) covers a burst of decisions.

Deadlines: a record whose deadline passes before the writer takes it is withdrawn, so the log never holds a
decision the webhook did not give (it denies, or spools). A record the writer has taken is waited for past
its deadline: only the store's own bound on one commit (SQLite's busy timeout, PostgreSQL's
``write_timeout``) ends that wait, because the answer must agree with the log.

What a store gives the writer: ``commit`` (one batch in one transaction; raising fails every record of the
batch and marks the writer failed until a commit or ``recover`` succeeds) and, optionally, ``recover``
(awaited every ``recover_interval`` seconds while the writer is failed and idle: SQLite's health check needs
the writer's own connection; PostgreSQL checks its health on a schedule of its own).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from verifier.deadline import Deadline
from webhook.decisionlog.errors import DecisionLogUnavailable, describe
from webhook.decisionlog.record import DecisionRecord, StoredRecord

#: Most records committed in one transaction.
MAX_BATCH: Final = 512

#: Commits one batch in one transaction; returns the stored records in the order given.
Commit = Callable[[list[DecisionRecord]], Awaitable[list[StoredRecord]]]
#: Checks whether a failed store works again; returns None when it does, else what is wrong.
Recover = Callable[[], Awaitable[str | None]]


@dataclass(slots=True, eq=False)
class _Item:
    """One record on its way to the writer."""

    record: DecisionRecord
    future: asyncio.Future[StoredRecord]
    taken: bool = False
    withdrawn: bool = False


class BatchWriter:
    """The queue of records waiting for the writer, and the writer: a task on the event loop that started it.

    Everything here runs on that one loop; a store that must block (SQLite) does so inside ``commit``, on a
    thread of its own.
    """

    def __init__(self, *, where: str, log: logging.Logger, recover_interval: float = 5.0) -> None:
        self._where = where
        self._log = log
        self._recover_interval = recover_interval
        self._queue: asyncio.Queue[_Item | None] | None = None
        self._task: asyncio.Task[None] | None = None
        #: Why the last commit (or recovery check) failed; None while the store takes records.
        self.failure: str | None = None

    @property
    def running(self) -> bool:
        """True while the writer runs."""
        return self._task is not None and not self._task.done()

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

    async def submit(self, record: DecisionRecord, deadline: Deadline) -> StoredRecord:
        """Queue ``record`` and wait until it is committed (see the module docstring for the deadline)."""
        if self._task is None or self._queue is None:
            raise DecisionLogUnavailable("the decision log is not open", location=self._where)
        if self._task.get_loop() is not asyncio.get_running_loop():
            raise DecisionLogUnavailable(
                "the decision log was opened on another event loop", location=self._where
            )
        item = _Item(record, asyncio.get_running_loop().create_future())
        self._queue.put_nowait(item)
        try:
            async with asyncio.timeout(deadline.remaining()):
                return await asyncio.shield(item.future)
        except TimeoutError:
            # Not yet taken by the writer: withdrawn, so that no record contradicts the answer we give.
            if not item.taken:
                item.withdrawn = True
                raise DecisionLogUnavailable(
                    "the decision log did not take the record in time", location=self._where
                ) from None
        # The writer has started on it: the outcome must be known, and the commit's own bound limits the wait.
        return await item.future

    async def _run(self, queue: asyncio.Queue[_Item | None], commit: Commit, recover: Recover | None) -> None:
        while True:
            try:
                # Idle after a failure: check now and then whether the store works again.
                idle = self._recover_interval if self.failure is not None and recover else None
                async with asyncio.timeout(idle):
                    first = await queue.get()
            except TimeoutError:
                if recover is not None:
                    self.failure = await recover()
                continue
            if first is None:
                return
            batch, stop = _drain(queue, first)
            taken = [item for item in batch if not item.withdrawn]
            for item in taken:
                item.taken = True
            if taken:
                await self._write(commit, taken)
            if stop:
                return

    async def _write(self, commit: Commit, taken: list[_Item]) -> None:
        try:
            stored = await commit([item.record for item in taken])
        except Exception as error:  # every waiter must get an answer; a failed write denies or spools
            message = describe(error)
            # Not ready until a commit or a recovery check succeeds again.
            self.failure = message
            self._log.error("decision log write failed: %s", message, extra={"store": self._where})
            for item in taken:
                if not item.future.done():
                    item.future.set_exception(
                        DecisionLogUnavailable(f"decision log write failed: {message}", location=self._where)
                    )
            return
        self.failure = None
        for item, result in zip(taken, stored, strict=True):
            if not item.future.done():
                item.future.set_result(result)


def _drain(queue: asyncio.Queue[_Item | None], first: _Item) -> tuple[list[_Item], bool]:
    """``first`` and what else has queued up (up to MAX_BATCH), and whether the stop marker came."""
    batch = [first]
    while len(batch) < MAX_BATCH and not queue.empty():
        item = queue.get_nowait()
        if item is None:
            return batch, True
        batch.append(item)
    return batch, False
