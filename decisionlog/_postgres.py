"""The shared decision log: PostgreSQL through a psycopg 3 connection pool.

Several webhook replicas append to one chain: every append transaction first locks the single chain-head row
(``SELECT … FOR UPDATE``), so writers queue inside the database and each batch links to the true latest
record. Within one replica, appends queued while a transaction runs are committed together (group commit,
:mod:`decisionlog._batching`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from decisionlog import _head as head
from decisionlog import _schema, _sql
from decisionlog import _undelivered as undelivered
from decisionlog._batching import BatchedStore, BatchWriter
from decisionlog._body_json import SharedParts
from decisionlog._carried import Carried, carried_from_rows
from decisionlog._chain import ChainReport, ChainSink, ChainVerifier, builds_records, feed
from decisionlog._errors import DecisionLogError, DecisionLogUnavailable, describe
from decisionlog._record import DecisionRecord, StoredRecord
from decisionlog._store import RecordQuery, redact

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """Pool and timeout settings; the defaults suit a webhook with a 5-10 s admission timeout."""

    min_size: int = 1
    max_size: int = 4
    connect_timeout: float = 3.0
    #: Upper bound of one write: schema setup if still pending, getting a connection and the transaction
    #: (lock waits on the chain head included). A write past it is abandoned with its connection, never
    #: waited on (cancelling a query on a hung server would wait for that server).
    write_timeout: float = 5.0
    statement_timeout_ms: int = 5000
    #: Seconds between health checks, which make the store ready again once the database answers.
    health_interval: float = 5.0
    #: Seconds between health checks while the store is failed: how soon it takes records again.
    retry_interval: float = 1.0
    #: A commit running longer than this makes the store unready and refuse new records at once.
    stall_after: float = 2.0
    extra: dict[str, Any] = field(default_factory=dict)


class PostgresStore(BatchedStore):
    """Decision log in PostgreSQL; see the module docstring for how appends are serialised."""

    def __init__(
        self,
        url: str,
        options: PostgresOptions | None = None,
        *,
        read_only: bool = False,
        accept_broken: bool = False,
    ) -> None:
        self._url = url
        self._read_only = read_only
        self._accept_broken = accept_broken
        self._options = options or PostgresOptions()
        self._pool: psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        # Its failure is also set by the health check, which runs on the event loop at all times (while
        # ready too, so that a database gone while idle makes the replica unready before a request fails).
        # A database known to be down (or hung) refuses records at once: waiting out a connect timeout per
        # batch would hold every decision queued behind it past the API server's deadline.
        self._writer = BatchWriter(
            where=self.description, log=_log, fail_fast=True, stall_after=self._options.stall_after
        )
        self._abandoned: set[asyncio.Task[Any]] = set()
        self._schema_ready = False
        self._schema_lock = asyncio.Lock()
        self._health: asyncio.Task[None] | None = None
        self._size_bytes: int | None = None

    @property
    def description(self) -> str:
        """The URL without its password."""
        return redact(self._url)

    @property
    def ready(self) -> bool:
        """True once the schema is in place, the last write or health check succeeded, and no write stalls."""
        return self.problem is None

    @property
    def problem(self) -> str | None:
        """Why the store cannot take a record now, for ``/readyz``; None while it can."""
        if self._writer.problem is not None:
            return self._writer.problem
        return None if self._schema_ready else "the schema is not in place yet"

    @property
    def size_bytes(self) -> int | None:
        """The decisions table with its indexes and TOAST data, measured by each health check."""
        return self._size_bytes

    async def open(self) -> None:
        """Start the pool, the writer and the health check, and try to apply migrations.

        A database that is down does not fail ``open``: the store reports not ready, appends fail (or spool),
        and the schema is applied by the first append or health check that reaches the database. A
        ``read_only`` store never creates tables and fails at once when the server cannot be reached.
        """
        options = self._options
        self._pool = psycopg_pool.AsyncConnectionPool(
            self._url,
            min_size=options.min_size,
            max_size=options.max_size,
            open=False,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, round(options.connect_timeout)),
                **options.extra,
            },
            configure=self._configure,
            check=psycopg_pool.AsyncConnectionPool.check_connection,
            timeout=options.connect_timeout,
            # Give up a failed background connection at once: the next append (or the spool shipper) asks
            # again within its own deadline, instead of a retry loop logging while the database is down.
            reconnect_timeout=0,
            name="trtguard-decision-log",
        )
        if self._read_only:
            try:
                await self._pool.open(wait=True, timeout=options.connect_timeout)
            except psycopg_pool.PoolTimeout:
                raise DecisionLogUnavailable(
                    "PostgreSQL is not reachable",
                    location=self.description,
                    hint="check that the database is up and the URL, user and network policy are right",
                ) from None
            async with self._connection() as conn:
                # A log of an older schema is refused: a reader does not migrate it.
                found = await self._fetch(conn, "SELECT to_regclass('trtguard_schema_migrations')", [])
                if found[0][0] is not None:
                    version = await self._fetch(conn, _schema.SELECT_VERSION, [])
                    _schema.require_current(int(version[0][0]), where=self.description)
            return
        await self._pool.open(wait=False)
        self._writer.start(
            functools.partial(self._write_bounded, dedupe=False), name="trtguard-decision-log-writer"
        )
        try:
            await self._ensure_schema()
        except DecisionLogUnavailable as error:
            self._writer.failure = error.message
            _log.warning(
                "decision log not reachable yet: %s", error.message, extra={"store": self.description}
            )
        self._health = asyncio.create_task(self._health_loop(), name="trtguard-decision-log-health")

    async def close(self) -> None:
        """Stop the health check, finish queued appends, then close the pool."""
        if self._health is not None:
            self._health.cancel()
            await asyncio.gather(self._health, return_exceptions=True)
            self._health = None
        await self._writer.stop()
        if self._abandoned:  # cancelled writes closing their connections (see _bounded)
            await asyncio.wait(set(self._abandoned), timeout=1.0)
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def append_many(self, records: Sequence[DecisionRecord], *, dedupe: bool) -> list[StoredRecord]:
        """Append ``records`` in one transaction, skipping stored ``record_id``s when ``dedupe`` is set.

        Raises :class:`DecisionLogUnavailable` when that does not finish within ``write_timeout``.
        """
        return await self._write_bounded(list(records), dedupe=dedupe)

    async def probe(self) -> bool:
        """True when the database answers within the connect timeout."""
        try:
            async with self._connection() as conn:
                await conn.execute("SELECT 1")
        except DecisionLogUnavailable:
            return False
        return True

    async def check_health(self) -> bool:
        """Reach the database (applying the schema if still pending) and set :attr:`ready` by the outcome.

        Runs every ``health_interval`` seconds while the store is open: a replica that is not ready gets no
        requests, so without it one failed write, or a database that was down at start, would keep the store
        unready for good.
        """
        try:
            size = await self._bounded(self._measure())
        except Exception as error:  # whatever the cause, the store cannot take records now
            if self._writer.failure is None:
                _log.warning(
                    "decision log health check failed: %s",
                    describe(error),
                    extra={"store": self.description},
                )
            self._writer.failure = describe(error)
            return False
        if size is not None:
            self._size_bytes = int(size[0])
        if self._writer.failure is not None:
            _log.info("decision log reachable again", extra={"store": self.description})
        self._writer.failure = None
        return True

    async def _measure(self) -> Any:
        await self._ensure_schema()
        async with self._connection() as conn:
            # Reaching the database and measuring the log in one round trip.
            cursor = await conn.execute("SELECT pg_total_relation_size('trtguard_decisions')")
            return await cursor.fetchone()

    async def _bounded(self, work: Coroutine[Any, Any, _T]) -> _T:
        """``work`` within ``write_timeout``; past it, abandoned rather than waited on.

        Cancelling a query makes psycopg ask the server to cancel it and wait for that (up to 10 s); on a
        hung server that wait is the whole cost. The task is cancelled once more shortly after, which makes
        psycopg close the connection instead; it ends in the background and the pool replaces the connection.
        """
        task = asyncio.ensure_future(work)
        done, _ = await asyncio.wait({task}, timeout=self._options.write_timeout)
        if task in done:
            return task.result()
        task.cancel()
        asyncio.get_running_loop().call_later(0.05, task.cancel)
        self._abandoned.add(task)
        task.add_done_callback(_forget(self._abandoned))
        raise DecisionLogUnavailable(
            f"the write did not finish within {self._options.write_timeout:g} s; abandoned it",
            location=self.description,
        )

    async def query(self, query: RecordQuery) -> list[StoredRecord]:
        """Records matching ``query``."""
        sql, params = _sql.select(query, "%s")
        async with self._connection() as conn:
            rows = await self._fetch(conn, sql, params)
        shared = SharedParts()
        return [_sql.stored_record(row, shared) for row in rows]

    async def verify(self, sink: ChainSink | None = None) -> ChainReport:
        """Recompute the chain from one snapshot, streaming rows through a server-side cursor (``sink``,
        called on the event loop: see ``DecisionStore.verify``)."""
        async with self._connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            head = await self._fetch(conn, "SELECT seq, hash FROM trtguard_chain_head WHERE id = 1", [])
            verifier = ChainVerifier(records=builds_records(sink))
            # Through _fetch first: a dropped table is the store's own error, not psycopg's.
            await self._fetch(conn, "SELECT 1 FROM trtguard_decisions LIMIT 1", [])
            has_checkpoints = await self._fetch(conn, "SELECT to_regclass('trtguard_checkpoints')", [])
            if has_checkpoints[0][0] is not None and (
                base := _sql.pruned_base(await self._fetch(conn, _sql.PRUNED_BASE, []))
            ):
                verifier.start_after(*base)
            async with conn.cursor(name="trtguard_verify") as cursor:
                await cursor.execute(f"SELECT {_sql.ROW_COLUMNS} FROM trtguard_decisions ORDER BY seq")  # noqa: S608
                async for row in cursor:
                    if not feed(verifier, _sql.chain_row(row), sink):
                        break
        if not head:
            return verifier.finish(head_seq=None, head_hash=None)
        return verifier.finish(head_seq=int(head[0][0]), head_hash=str(head[0][1]))

    async def carried(
        self, namespace: str, name: str, *, group: str | None = None, kind: str | None = None
    ) -> Carried:
        """What rotation carried forward of the workload's pruned records (``DecisionStore.carried``)."""
        async with self._connection() as conn, conn.transaction():
            # One snapshot: a prune between the statements cannot mix two states.
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            tables = await self._fetch(
                conn, "SELECT to_regclass('trtguard_checkpoints'), to_regclass('trtguard_carried')", []
            )
            if tables[0][0] is None:
                return Carried(0, True)
            base = int((await self._fetch(conn, _sql.CARRIED_BASE, []))[0][0])
            if tables[0][1] is None:
                return Carried(base, base == 0)
            stored = base == 0 or bool(await self._fetch(conn, _sql.CARRIED_STORED.format(p="%s"), [base]))
            sql, params = _sql.carried_rows(namespace, name, base, "%s", group=group, kind=kind)
            rows = await self._fetch(conn, sql, params)
        return carried_from_rows(base, stored, rows, where=f"{self.description} trtguard_carried")

    async def _fetch(self, conn: psycopg.AsyncConnection[Any], sql: str, params: list[object]) -> list[Any]:
        try:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchall()
        except psycopg.errors.UndefinedTable:
            raise DecisionLogError(
                "this database holds no trtguard decision log",
                location=self.description,
                hint="check the --decision-log URL; `trtguard serve` creates the tables on first start",
            ) from None

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._pool is None:
            raise DecisionLogUnavailable("the decision log is not open", location=self.description)
        try:
            async with self._pool.connection(timeout=self._options.connect_timeout) as conn:
                yield conn
        except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as error:
            raise DecisionLogUnavailable(
                f"PostgreSQL is not reachable: {error}",
                location=self.description,
                hint="check that the database is up and the URL, user and network policy are right",
            ) from None

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(f"SET statement_timeout = {int(self._options.statement_timeout_ms)}")
        await conn.execute(f"SET lock_timeout = {int(self._options.statement_timeout_ms)}")
        if self._read_only:  # the server refuses any write on it, whatever a caller does by mistake
            await conn.execute("SET default_transaction_read_only = on")

    async def _ensure_schema(self) -> None:
        if self._schema_ready:
            return
        async with self._schema_lock:
            if self._schema_ready:
                return
            async with self._connection() as conn, conn.transaction():
                await conn.execute(_schema.PG_MIGRATION_LOCK)
                await conn.execute(_schema.CREATE_MIGRATIONS_TABLE)
                cursor = await conn.execute(_schema.SELECT_VERSION)
                row = await cursor.fetchone()
                applied = int(row[0]) if row else 0
                for statement, params in _schema.steps(applied, "postgresql", where=self.description):
                    await conn.execute(statement.replace("?", "%s"), params)
                await self._check_head(conn)
            self._schema_ready = True

    async def _check_head(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Verify the last records against the head row before the first write (decisionlog._head)."""
        # FOR SHARE: a writer of another replica cannot move the head between reading it and the tail.
        cursor = await conn.execute("SELECT seq, hash FROM trtguard_chain_head WHERE id = 1 FOR SHARE")
        row = await cursor.fetchone()
        problem = "the chain head row is missing"
        if row is not None:
            current = head.Head(int(row[0]), str(row[1]))
            cursor = await conn.execute(
                f"SELECT {_sql.ROW_COLUMNS} FROM trtguard_decisions WHERE seq > %s ORDER BY seq",  # noqa: S608
                (current.seq - head.TAIL_RECORDS,),
            )
            rows = [_sql.chain_row(r) for r in await cursor.fetchall()]
            cursor = await conn.execute(_sql.PRUNED_BASE)
            statement = await cursor.fetchall()
            base = _sql.pruned_base(statement)
            problem = head.tail_problem(rows, current, base=base) or ""
            if not problem and base is not None:
                sql, params = _sql.carried_rows(None, None, base[0], "%s")
                cursor = await conn.execute(sql, params)
                carried = await cursor.fetchall()
                problem = head.carried_problem(statement[0][0], carried, where=self.description) or ""
        if not problem:
            return
        if self._accept_broken:
            _log.error("decision log accepted as it is: %s", problem, extra={"store": self.description})
            return
        raise DecisionLogError(problem, location=self.description, hint=head.ACCEPT_HINT)

    async def _write_bounded(self, records: list[DecisionRecord], *, dedupe: bool) -> list[StoredRecord]:
        # Schema setup is inside the bound: it waits for a connection and a lock like the write itself.
        return await self._bounded(self._write_unbounded(records, dedupe=dedupe))

    async def _write_unbounded(self, records: list[DecisionRecord], *, dedupe: bool) -> list[StoredRecord]:
        await self._ensure_schema()
        return await self._write_batch(records, dedupe=dedupe)

    async def _write_batch(self, records: list[DecisionRecord], *, dedupe: bool) -> list[StoredRecord]:
        async with self._connection() as conn, conn.transaction():
            cursor = await conn.execute("SELECT seq, hash FROM trtguard_chain_head WHERE id = 1 FOR UPDATE")
            head = await cursor.fetchone()
            if head is None:
                raise DecisionLogError("the chain head row is missing", location=self.description)
            seq, prev = int(head[0]), str(head[1])
            known: set[str] = set()
            if dedupe:
                cursor = await conn.execute(
                    "SELECT record_id FROM trtguard_decisions WHERE record_id = ANY(%s)",
                    ([r.record_id for r in records],),
                )
                known = {row[0] for row in await cursor.fetchall()}
            # Undelivered records are written only for an original in the log, and once (undelivered.py).
            originals = {r.record_id: o for r in records if (o := undelivered.target(r)) is not None}
            if originals:
                cursor = await conn.execute(
                    "SELECT record_id FROM trtguard_decisions WHERE record_id = ANY(%s)",
                    ([*originals, *originals.values()],),
                )
                present = {row[0] for row in await cursor.fetchall()}
                for original in set(originals.values()) - present:  # pruned since, but carried forward
                    cursor = await conn.execute(
                        _sql.CARRIED_ADMISSION.format(p="%s"), (_sql.carried_pattern(original),)
                    )
                    if await cursor.fetchone() is not None:
                        present.add(original)
                # An original in this very batch counts too: it is inserted before its undelivered record.
                batch = {r.record_id for r in records}
                known |= {m for m, o in originals.items() if m in present or not {o} & (present | batch)}
            stored: list[StoredRecord] = []
            values: list[tuple[object, ...]] = []
            shared: dict[str, tuple[str, str]] = {}
            for record in records:
                if record.record_id in known:
                    continue
                seq += 1
                row, part, linked = _sql.link(record, seq, prev)
                values.append(row)
                if part is not None:
                    shared[part[0]] = part
                stored.append(linked)
                prev = linked.hash
            if values:
                async with conn.cursor() as insert:
                    if shared:
                        await insert.executemany(_sql.INSERT_SHARED.format(p="%s"), list(shared.values()))
                    await insert.executemany(_sql.insert("%s"), values)
                await conn.execute(
                    "UPDATE trtguard_chain_head SET seq = %s, hash = %s WHERE id = 1", (seq, prev)
                )
        return stored

    async def _health_loop(self) -> None:
        while True:
            failed = self._writer.failure is not None
            await asyncio.sleep(self._options.retry_interval if failed else self._options.health_interval)
            await self.check_health()


def _forget(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    """A done-callback that drops an abandoned task and consumes its outcome (it was already reported)."""

    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()

    return done
