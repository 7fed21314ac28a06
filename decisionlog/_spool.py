"""Admit-and-spool: when PostgreSQL cannot take a record, keep it in a local SQLite file and ship it later.

Chosen with ``--decision-log-unavailable spool``. A record is answered only after it is durable in one of the
two places, so none is lost; the shipper re-appends spooled records to the shared chain in their spool order
and skips any ``record_id`` the database already holds, so a record that reached PostgreSQL after all (a
commit whose acknowledgement was lost) is not stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar

from decisionlog._carried import Carried
from decisionlog._chain import ChainReport, ChainSink
from decisionlog._errors import DecisionLogError, DecisionLogInDoubt, DecisionLogUnavailable
from decisionlog._postgres import PostgresStore
from decisionlog._record import DecisionRecord, StoredRecord, load_body, new_record_id, storable
from decisionlog._store import AppendReceipt, RecordQuery, writable_room
from decisionlog._undelivered import original_id, undelivered
from verifier.base import Deadline

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Seconds of the request's budget kept for the local write when PostgreSQL is tried first.
SPOOL_RESERVE: Final = 0.5
SHIP_BATCH: Final = 500
#: Longest wait between shipping rounds after rounds that failed (the wait doubles from ``ship_interval``).
MAX_SHIP_BACKOFF: Final = 60.0


class Spool:
    """Records waiting for the shared store, in one SQLite file used by one thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trtguard-spool")
        self._conn: sqlite3.Connection | None = None

    async def open(self) -> int:
        """Create the file if needed; returns how many records wait in it."""
        return await self._run(self._open)

    async def close(self) -> None:
        """Close the file."""
        if self._conn is not None:
            await self._run(self._conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)

    async def put(self, record: DecisionRecord) -> None:
        """Store ``record`` durably."""
        await self._run(self._put, record)

    async def peek(self, limit: int) -> list[DecisionRecord]:
        """The oldest ``limit`` waiting records."""
        return await self._run(self._peek, limit)

    async def remove(self, record_ids: list[str]) -> None:
        """Forget records that were shipped."""
        await self._run(self._remove, record_ids)

    async def _run(self, func: Callable[..., _T], *args: object) -> _T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, func, *args)
        except sqlite3.Error as error:
            raise DecisionLogUnavailable(
                f"cannot use the local decision spool: {error}",
                location=str(self.path),
                hint="the spool must be on a writable volume (an emptyDir or a persistent volume)",
            ) from None

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS trtguard_spool ("
            " n INTEGER PRIMARY KEY AUTOINCREMENT,"
            " record_id TEXT NOT NULL UNIQUE,"
            " queued_at TEXT NOT NULL,"
            " body TEXT NOT NULL)"
        )
        self._conn = conn
        return int(conn.execute("SELECT COUNT(*) FROM trtguard_spool").fetchone()[0])

    def _put(self, record: DecisionRecord) -> None:
        self._connection().execute(
            "INSERT OR IGNORE INTO trtguard_spool (record_id, queued_at, body) VALUES (?, ?, ?)",
            (record.record_id, datetime.now(UTC).isoformat(), storable(record).canonical().decode()),
        )

    def _peek(self, limit: int) -> list[DecisionRecord]:
        rows = (
            self._connection()
            .execute("SELECT body FROM trtguard_spool ORDER BY n LIMIT ?", (limit,))
            .fetchall()
        )
        return [DecisionRecord.from_json(load_body(row[0])) for row in rows]

    def _remove(self, record_ids: list[str]) -> None:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("DELETE FROM trtguard_spool WHERE record_id = ?", [(i,) for i in record_ids])
        conn.execute("COMMIT")

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise sqlite3.ProgrammingError("the spool is not open")
        return self._conn


class SpoolingStore:
    """PostgreSQL first; the local spool when it is down; a background shipper that empties the spool."""

    def __init__(
        self,
        primary: PostgresStore,
        spool_path: Path,
        *,
        primary_timeout: float = 2.0,
        ship_interval: float = 2.0,
        retry_after: float = 5.0,
    ) -> None:
        self.primary = primary
        self.spool = Spool(spool_path)
        self._primary_timeout = primary_timeout
        self._ship_interval = ship_interval
        self._retry_after = retry_after
        # While PostgreSQL is known to be down, requests go straight to the spool instead of waiting on it.
        self._skip_primary_until = 0.0
        self._pending = 0
        self._shipped_undelivered = 0
        #: Why the spool cannot take a record now (its last write failed, or no room); None while it can.
        self.spool_failure: str | None = None
        self._shipper: asyncio.Task[None] | None = None
        self._late: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()

    @property
    def description(self) -> str:
        """The PostgreSQL URL (no password) and the spool file."""
        return f"{self.primary.description} (spooling to {self.spool.path} while unreachable)"

    @property
    def ready(self) -> bool:
        """True while a record can be taken now: PostgreSQL takes it, or the spool can, and the shipper runs.

        The spool counts as able when its last write did not fail and its folder is writable with room left.
        """
        return self.problem is None

    @property
    def problem(self) -> str | None:
        """Why neither PostgreSQL nor the spool can take a record now, for ``/readyz``; None while one can."""
        if self._shipper is None or self._shipper.done():
            return "the spool shipper is not running"
        primary = self.primary.problem
        if primary is None:
            return None
        spool = self.spool_failure or writable_room(self.spool.path)
        return None if spool is None else f"PostgreSQL: {primary}; spool: {spool}"

    @property
    def size_bytes(self) -> int | None:
        """The PostgreSQL log's size (the spool is measured by ``pending``)."""
        return self.primary.size_bytes

    @property
    def undelivered_written(self) -> int:
        """Undelivered records written to PostgreSQL: by its writer, and shipped from the spool."""
        return self.primary.undelivered_written + self._shipped_undelivered

    @property
    def pending(self) -> int:
        """Records waiting in the spool."""
        return self._pending

    async def open(self) -> None:
        """Open the spool and PostgreSQL, then start the shipper."""
        self._pending = await self.spool.open()
        await self.primary.open()
        self._shipper = asyncio.create_task(self._ship_loop(), name="trtguard-spool-shipper")

    async def close(self) -> None:
        """Stop the shipper after one last attempt, then close both stores, whatever became of the shipper."""
        shipper, self._shipper = self._shipper, None
        if shipper is not None:
            self._closing.set()
            # A shipper that was cancelled or crashed has nothing more to say here (it logs its failures).
            await asyncio.gather(shipper, return_exceptions=True)
        await asyncio.gather(*self._late, return_exceptions=True)
        try:
            await self.primary.close()
        finally:
            await self.spool.close()

    async def append(
        self, record: DecisionRecord, *, deadline: Deadline, arrived: float | None = None
    ) -> AppendReceipt:
        """PostgreSQL within its share of ``deadline``; otherwise the spool.

        A record PostgreSQL has started writing is waited for (up to its ``write_timeout``), which can take
        longer than that share.
        """
        budget = min(self._primary_timeout, deadline.remaining() - SPOOL_RESERVE)
        if budget > 0 and time.monotonic() >= self._skip_primary_until:
            try:
                return await self.primary.append(record, deadline=Deadline.after(budget), arrived=arrived)
            except DecisionLogUnavailable as error:
                self._skip_primary_until = time.monotonic() + self._retry_after
                _log.warning("spooling decisions locally: %s", error.message)
                if isinstance(error, DecisionLogInDoubt):
                    # PostgreSQL may still commit the record it took, and then follows it with an undelivered
                    # record naming its record_id: the copy answered from the spool must not share that id,
                    # or the delivered answer would be marked undelivered once shipped.
                    record = dataclasses.replace(record, record_id=new_record_id())
        if arrived is not None:
            # The whole answer time, the wait for PostgreSQL included.
            latency = round((time.monotonic() - arrived) * 1_000_000)
            record = dataclasses.replace(record, latency_us=latency)
        try:
            async with asyncio.timeout(deadline.remaining()):
                await self.spool.put(record)
        except TimeoutError:
            # The put may still land: spool the undelivered record after it (the spool's one thread keeps the
            # order), and PostgreSQL writes it only beside the original (decisionlog._undelivered).
            late = asyncio.create_task(self.spool.put(undelivered(record)))
            self._late.add(late)
            late.add_done_callback(self._late_done)
            raise DecisionLogUnavailable(
                "the local decision spool did not take the record in time", location=str(self.spool.path)
            ) from None
        except DecisionLogUnavailable as error:
            self.spool_failure = error.message
            raise
        self.spool_failure = None
        self._pending += 1
        return AppendReceipt(None, None, spooled=True)

    async def ship_once(self) -> int:
        """Move spooled records to PostgreSQL; returns how many were shipped."""
        shipped = 0
        while True:
            batch = await self.spool.peek(SHIP_BATCH)
            if not batch:
                if time.monotonic() < self._skip_primary_until and await self.primary.probe():
                    self._skip_primary_until = 0.0
                return shipped
            try:
                stored = await self.primary.append_many(batch, dedupe=True)
            except DecisionLogError as error:
                self._skip_primary_until = time.monotonic() + self._retry_after
                _log.debug("spool not shipped yet: %s", error.message)
                return shipped
            await self.spool.remove([r.record_id for r in batch])
            shipped += len(batch)
            self._shipped_undelivered += sum(1 for s in stored if original_id(s.record) is not None)
            self._pending = max(0, self._pending - len(batch))
            self._skip_primary_until = 0.0
            _log.info("shipped %d spooled decisions to %s", len(batch), self.primary.description)

    async def query(self, query: RecordQuery) -> list[StoredRecord]:
        """Records in PostgreSQL (spooled ones appear once shipped)."""
        return await self.primary.query(query)

    async def carried(
        self, namespace: str, name: str, *, group: str | None = None, kind: str | None = None
    ) -> Carried:
        """What the PostgreSQL log carried forward of the workload's pruned records (the spool holds none)."""
        return await self.primary.carried(namespace, name, group=group, kind=kind)

    async def verify(self, sink: ChainSink | None = None) -> ChainReport:
        """Verify the PostgreSQL chain (``sink``: see ``DecisionStore.verify``)."""
        return await self.primary.verify(sink)

    def _late_done(self, task: asyncio.Task[None]) -> None:
        self._late.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            _log.error(
                "could not spool an undelivered record: %s",
                error,
                extra={"spool": str(self.spool.path)},
            )

    async def _ship_loop(self) -> None:
        wait = self._ship_interval
        while not self._closing.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._closing.wait()
            if self.spool_failure is not None and writable_room(self.spool.path) is None:
                # Room again: ready, so that requests come and show whether the spool takes them.
                self.spool_failure = None
            try:
                await self.ship_once()
            except Exception as error:  # the records stay in the spool; the shipper must outlive a bad round
                message = error.message if isinstance(error, DecisionLogError) else repr(error)
                _log.error(
                    "shipping spooled decisions failed: %s",
                    message,
                    exc_info=not isinstance(error, DecisionLogError),
                    extra={"spool": str(self.spool.path)},
                )
                wait = min(wait * 2, MAX_SHIP_BACKOFF)
            else:
                wait = self._ship_interval
