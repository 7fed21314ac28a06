"""The embedded decision log: one SQLite file in WAL mode, written by one dedicated thread.

Appends are queued to the group-commit writer (:mod:`decisionlog._batching`), which commits whatever
has queued up in one transaction on the store's writer thread: one fsync covers a burst of decisions, and the
event loop never blocks on disk. The waiters of a batch are woken with one call into the event loop, not one
each.

``synchronous=FULL`` (the default) makes a committed record survive a power loss; ``synchronous=NORMAL``
(``sqlite:///path?synchronous=normal``) skips the fsync per commit, which still survives a killed process
but may lose the last commits on a power loss, for a shorter wait per decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Final, Literal

from decisionlog import _head as head
from decisionlog import _schema, _sql
from decisionlog import _undelivered as undelivered
from decisionlog._batching import BatchedStore, BatchWriter
from decisionlog._body_json import SharedParts
from decisionlog._carried import Carried, carried_from_rows
from decisionlog._chain import Break, ChainReport, ChainSink, Row, verify_rows
from decisionlog._errors import DecisionLogError, DecisionLogUnavailable
from decisionlog._record import DecisionRecord, StoredRecord
from decisionlog._store import RecordQuery, writable_room
from decisionlog._wal import WAL_LIMIT_BYTES, WalKeeper
from decisionlog._writer_thread import WriterThread

_log = logging.getLogger(__name__)

#: How long a writer waits for another process's lock on the same file before failing the batch.
BUSY_TIMEOUT_MS: Final = 5000
#: Seconds between health checks while the last write failed (see ``SQLiteStore.ready``).
HEALTH_INTERVAL: Final = 5.0
#: A commit running longer than this (a lock held elsewhere, a stalled disk) makes the store unready.
STALL_AFTER: Final = 2.0


Synchronous = Literal["full", "normal"]

# The write path's statements, formatted once (sqlite3 keeps each prepared, by its text).
_INSERT: Final = _sql.insert("?")
_INSERT_SHARED: Final = _sql.INSERT_SHARED.format(p="?")


def connect(
    path: Path,
    *,
    readonly: bool = False,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    synchronous: Synchronous = "full",
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, this sync level, busy timeout."""
    if readonly:
        if not path.is_file():
            raise DecisionLogError(
                "decision log file does not exist",
                location=str(path),
                hint="pass the --decision-log URL that `trtguard serve` writes to",
            )
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL" if synchronous == "normal" else "PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    return conn


def migrate(conn: sqlite3.Connection, *, where: str) -> int:
    """Apply pending migrations in one ``IMMEDIATE`` transaction; returns the schema version."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_schema.CREATE_MIGRATIONS_TABLE)
        applied = conn.execute(_schema.SELECT_VERSION).fetchone()[0]
        for statement, params in _schema.steps(applied, "sqlite", where=where):
            conn.execute(statement, params)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return _schema.LATEST_VERSION


def write_batch(
    conn: sqlite3.Connection,
    records: list[DecisionRecord],
    *,
    dedupe: bool,
    parts: _sql.KnownParts | None = None,
) -> list[StoredRecord]:
    """Append ``records`` after the current chain head in one transaction.

    With ``dedupe`` records whose ``record_id`` is already stored are skipped (shipping a spool twice). An
    undelivered record is skipped unless the record it names is stored (or, pruned since, carried forward
    as an admission: :mod:`decisionlog._carried`) and it is not stored yet itself.

    ``parts``: the shared parts this connection knows are stored (kept by the caller for one connection):
    those are not inserted again, unless the chain's head is not the one it left.
    """

    def stored_id(record_id: str) -> bool:
        found = conn.execute("SELECT 1 FROM trtguard_decisions WHERE record_id = ?", (record_id,))
        return found.fetchone() is not None

    def carried_id(record_id: str) -> bool:
        found = conn.execute(_sql.CARRIED_ADMISSION.format(p="?"), (_sql.carried_pattern(record_id),))
        return found.fetchone() is not None

    # One cursor for the batch's statements: ``conn.execute`` makes one for each.
    cursor = conn.cursor()
    cursor.execute("BEGIN IMMEDIATE")
    try:
        head_found = seq, prev = cursor.execute(
            "SELECT seq, hash FROM trtguard_chain_head WHERE id = 1"
        ).fetchone()
        stored: list[StoredRecord] = []
        rows: list[tuple[object, ...]] = []
        shared: dict[str, tuple[str, str]] = {}
        # Rows are inserted together at the end (one statement run for the batch): a record of this batch
        # counts as stored for the checks of the records after it.
        batch: set[str] = set()
        for record in records:
            original = undelivered.target(record)
            if (dedupe or original is not None) and (
                record.record_id in batch or stored_id(record.record_id)
            ):
                continue
            if original is not None and not (
                original in batch or stored_id(original) or carried_id(original)
            ):
                continue
            seq += 1
            values, part, linked = _sql.link(record, seq, prev)
            if part is not None:
                shared[part[0]] = part
            rows.append(values)
            batch.add(record.record_id)
            stored.append(linked)
            prev = linked.hash
        new_parts = list(shared.values()) if parts is None else parts.unknown(shared, tuple(head_found))
        if new_parts:
            cursor.executemany(_INSERT_SHARED, new_parts)
        cursor.executemany(_INSERT, rows)
        cursor.execute("UPDATE trtguard_chain_head SET seq = ?, hash = ? WHERE id = 1", (seq, prev))
        cursor.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    finally:
        cursor.close()
    if parts is not None:
        parts.committed(new_parts, (seq, prev))
    return stored


class SQLiteStore(BatchedStore):
    """Decision log in one SQLite file; see the module docstring for how writes happen."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        read_only: bool = False,
        synchronous: Synchronous = "full",
        health_interval: float = HEALTH_INTERVAL,
        accept_broken: bool = False,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
    ) -> None:
        self.path = path
        #: Open a log whose head does not verify, or that was reset (decisionlog._head), all the same.
        self.accept_broken = accept_broken
        self._read_only = read_only
        self._synchronous: Synchronous = synchronous
        self._busy_timeout_ms = busy_timeout_ms
        # The writer's connection is used only on the writer thread, where busy waits and fsyncs happen.
        self._conn: sqlite3.Connection | None = None
        self._writer_thread: WriterThread | None = None
        # The shared parts the writer's connection committed to the file (write_batch).
        self._parts = _sql.KnownParts()
        # After a failed batch the writer checks whether it can take the write lock again (see ``ready``).
        self._writer = BatchWriter(
            where=self.description, log=_log, recover_interval=health_interval, stall_after=STALL_AFTER
        )
        # Checkpoints in a thread of their own, and the WAL's bound (decisionlog._wal).
        self._wal = WalKeeper(
            path,
            lambda: connect(path, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous),
            limit=wal_limit_bytes,
            where=self.description,
        )

    @property
    def synchronous(self) -> Synchronous:
        """``full`` (fsync on every commit) or ``normal`` (fsync at checkpoints only)."""
        return self._synchronous

    @property
    def description(self) -> str:
        """``sqlite:///path``."""
        return f"sqlite:///{self.path}"

    @property
    def ready(self) -> bool:
        """True while a record can be taken now: the writer runs, its last batch (or health check) did not
        fail, no commit stalls, and the file's folder is writable with room left.

        After a failed batch the idle writer checks every ``health_interval`` seconds whether it can take the
        write lock again: a replica that is not ready gets no requests, so it could not otherwise recover.
        """
        return self.problem is None

    @property
    def problem(self) -> str | None:
        """Why the store cannot take a record now, for ``/readyz``; None while it can."""
        return self._writer.problem or writable_room(self.path)

    @property
    def size_bytes(self) -> int | None:
        """The database file and its WAL, measured by the checkpoint thread after each checkpoint."""
        return self._wal.size_bytes

    async def open(self) -> None:
        """Create the file and schema, then start the writer thread (a ``read_only`` store only reads, and
        refuses a log of an older schema, which it would not migrate)."""
        if self._read_only:
            if self.path.is_file():
                await asyncio.to_thread(self._check_schema)
            return
        thread = WriterThread("trtguard-decision-log")
        try:
            conn = await thread.run(self._connect_writer)
        except BaseException:
            thread.shutdown()
            raise
        self._writer_thread, self._conn = thread, conn
        self._parts = _sql.KnownParts()
        self._writer.start(
            functools.partial(self._commit, thread, conn),
            functools.partial(thread.run, self._check_health, conn),
            name="trtguard-decision-log-writer",
        )
        self._wal.start()

    async def close(self) -> None:
        """Write what is queued, then stop the writer thread."""
        thread, conn = self._writer_thread, self._conn
        if thread is None or conn is None:
            return
        await self._writer.stop()
        await thread.run(self._close_writer, conn)
        thread.shutdown()
        self._writer_thread = self._conn = None
        await self._wal.stop()

    async def query(self, query: RecordQuery) -> list[StoredRecord]:
        """Records matching ``query``, read on a separate read-only connection in a thread."""
        return await asyncio.to_thread(self._query, query)

    async def verify(self, sink: ChainSink | None = None) -> ChainReport:
        """Recompute the chain in a thread (``sink``, called on that thread: see ``DecisionStore.verify``)."""
        return await asyncio.to_thread(self._verify, sink)

    async def carried(
        self, namespace: str, name: str, *, group: str | None = None, kind: str | None = None
    ) -> Carried:
        """What rotation carried forward of the workload's pruned records (``DecisionStore.carried``)."""
        return await asyncio.to_thread(self._carried, namespace, name, group, kind)

    def _carried(self, namespace: str, name: str, group: str | None, kind: str | None) -> Carried:
        with self._reading() as conn:
            # One read transaction: a prune between the statements cannot mix two states.
            conn.execute("BEGIN")
            try:
                if not _has_table(conn, "trtguard_checkpoints"):  # schema 1, read without migrating
                    return Carried(0, True)
                base = int(conn.execute(_sql.CARRIED_BASE).fetchone()[0])
                if not _has_table(conn, "trtguard_carried"):
                    return Carried(base, base == 0)
                stored = base == 0 or (
                    conn.execute(_sql.CARRIED_STORED.format(p="?"), (base,)).fetchone() is not None
                )
                sql, params = _sql.carried_rows(namespace, name, base, "?", group=group, kind=kind)
                rows = conn.execute(sql, params).fetchall()
            finally:
                conn.execute("COMMIT")
        return carried_from_rows(base, stored, rows, where=f"{self.description} trtguard_carried")

    def _query(self, query: RecordQuery) -> list[StoredRecord]:
        sql, params = _sql.select(query, "?")
        with self._reading() as conn:
            rows = conn.execute(sql, params).fetchall()
        shared = SharedParts()
        return [_sql.stored_record(row, shared) for row in rows]

    def _verify(self, sink: ChainSink | None) -> ChainReport:
        with self._reading() as conn:
            # One read transaction, so that rows and head are one snapshot while writers go on.
            conn.execute("BEGIN")
            head = conn.execute("SELECT seq, hash FROM trtguard_chain_head WHERE id = 1").fetchone()
            base = _sql.pruned_base(
                conn.execute(_sql.PRUNED_BASE).fetchall() if _has_table(conn, "trtguard_checkpoints") else []
            )
            cursor = conn.execute(f"SELECT {_sql.ROW_COLUMNS} FROM trtguard_decisions ORDER BY seq")  # noqa: S608
            report = verify_rows(
                _rows(cursor), head_seq=head and head[0], head_hash=head and head[1], base=base, sink=sink
            )
            report = self._against_head_file(conn, report, base)
            conn.execute("COMMIT")
        return report

    def _against_head_file(
        self, conn: sqlite3.Connection, report: ChainReport, base: tuple[int, str] | None
    ) -> ChainReport:
        """``report``, broken where the head file beside the log names records the chain no longer holds.

        The check a writer makes at open (head.py), made by readers too: a copy of the file without its WAL,
        or a rolled-back file, verifies on its own as a shorter chain.
        """
        recorded = head.read_head_file(self.path)
        if not report.ok or recorded is None:
            return report
        current = head.Head(report.head_seq, report.head_hash)
        problem = head.rollback_problem(current, recorded, _hash_at(conn, recorded, current), base)
        if problem is None:
            return report
        where = head.head_file(self.path).name
        return replace(report, first_break=Break(recorded.seq, None, f"{problem} (from {where})"))

    def _check_schema(self) -> None:
        with self._reading() as conn:  # a file without the table is no log trtguard wrote: reads say so
            found = _has_table(conn, "trtguard_schema_migrations") and conn.execute(_schema.SELECT_VERSION)
            applied = found.fetchone()[0] if found else _schema.LATEST_VERSION
        _schema.require_current(applied, where=self.description)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection; SQLite errors (locked, corrupt, not a database) become the store's own.

        Callers such as change control (``DecisionLogHistory``) handle DecisionLogError, never sqlite3's.
        """
        try:
            with contextlib.closing(connect(self.path, readonly=True)) as conn:
                yield conn
        except sqlite3.Error as error:
            raise DecisionLogUnavailable(
                f"cannot read the decision log: {error}", location=self.description
            ) from None

    def _connect_writer(self) -> sqlite3.Connection:
        """The writer's connection, with the schema migrated and the log's head checked (head.py)."""
        recorded = head.read_head_file(self.path)
        self._refuse_broken(head.reset_problem(self.path, recorded))
        try:
            conn = connect(self.path, busy_timeout_ms=self._busy_timeout_ms, synchronous=self._synchronous)
            try:
                migrate(conn, where=self.description)
                # One read transaction: another process writing the same file cannot move the head meanwhile.
                conn.execute("BEGIN")
                try:
                    current = self._check_head(conn, recorded)
                finally:
                    with contextlib.suppress(sqlite3.Error):  # the check's own error is the one to report
                        conn.execute("COMMIT")
            except BaseException:
                conn.close()
                raise
        except (sqlite3.Error, OSError) as error:
            no_room = writable_room(self.path)
            raise DecisionLogError(
                f"cannot open the decision log: {error}",
                location=self.description,
                hint=f"{no_room}: free space on its volume or grow it"
                if no_room is not None
                else "check that the directory exists and is writable, and that the file is a trtguard "
                "decision log; a damaged file must be restored from a backup (docs/decision-log-storage.md)",
            ) from None
        with contextlib.suppress(OSError):  # a full disk: the store reports not ready; the head file waits
            head.write_head_file(self.path, current)
        self._wal.prepare(conn)
        return conn

    def _check_head(self, conn: sqlite3.Connection, recorded: head.Head | None) -> head.Head:
        """Verify the last records against the head row and the head file; returns the head."""
        seq, hash_ = conn.execute("SELECT seq, hash FROM trtguard_chain_head WHERE id = 1").fetchone()
        current = head.Head(int(seq), str(hash_))
        cursor = conn.execute(
            f"SELECT {_sql.ROW_COLUMNS} FROM trtguard_decisions WHERE seq > ? ORDER BY seq",  # noqa: S608
            (current.seq - head.TAIL_RECORDS,),
        )
        tail = list(_rows(cursor))
        base = _sql.pruned_base(conn.execute(_sql.PRUNED_BASE).fetchall())
        self._refuse_broken(head.tail_problem(tail, current, base=base))
        self._refuse_broken(head.rollback_problem(current, recorded, _hash_at(conn, recorded, current), base))
        self._refuse_broken(_carried_problem(conn, self.description))
        return current

    def _refuse_broken(self, problem: str | None) -> None:
        if problem is None:
            return
        if self.accept_broken:
            _log.error("decision log accepted as it is: %s", problem, extra={"store": self.description})
            return
        raise DecisionLogError(problem, location=self.description, hint=head.ACCEPT_HINT)

    def _close_writer(self, conn: sqlite3.Connection) -> None:
        """Record the head for the next start (head.py), checkpoint the WAL into the file, then close the
        writer's connection."""
        try:
            seq, hash_ = conn.execute("SELECT seq, hash FROM trtguard_chain_head WHERE id = 1").fetchone()
            head.write_head_file(self.path, head.Head(int(seq), str(hash_)))
        except (sqlite3.Error, OSError) as error:  # the next start checks the tail all the same
            _log.warning("decision log head file not updated: %s", error, extra={"store": self.description})
        try:
            # Everything into the file, WAL emptied: after a clean stop the file alone is the whole log. A
            # reader holding an older snapshot (another process) keeps frames in the WAL past the busy
            # timeout: SQLite answers busy in the result row rather than raising, so the row is read.
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy or copied < frames:
                _log.warning(
                    "decision log WAL not checkpointed: another connection held the log, so %s alone lacks "
                    "records that %s-wal holds; copy both, or use `trtguard audit backup`",
                    self.path.name,
                    self.path.name,
                    extra={"store": self.description},
                )
        except sqlite3.Error as error:  # the WAL still holds the records; the next open replays it
            _log.warning("decision log WAL not checkpointed: %s", error, extra={"store": self.description})
        finally:
            conn.close()

    async def _commit(
        self, thread: WriterThread, conn: sqlite3.Connection, records: list[DecisionRecord]
    ) -> list[StoredRecord]:
        """One batch on the writer thread, after a checkpoint of its own if the WAL is past its bound."""
        stored = await thread.run(self._write, conn, records)
        self._wal.committed(len(stored))
        return stored

    def _write(self, conn: sqlite3.Connection, records: list[DecisionRecord]) -> list[StoredRecord]:
        self._wal.before_batch(conn)
        return write_batch(conn, records, dedupe=False, parts=self._parts)

    def _check_health(self, conn: sqlite3.Connection) -> str | None:
        """Take and release the write lock and read the chain head; None when the store is writable again."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("SELECT seq FROM trtguard_chain_head WHERE id = 1").fetchone()
            finally:
                conn.execute("ROLLBACK")
        except sqlite3.Error as error:
            return str(error)
        if (no_room := writable_room(self.path)) is not None:
            return no_room
        _log.info("decision log writable again", extra={"store": self.description})
        return None


def _hash_at(conn: sqlite3.Connection, recorded: head.Head | None, current: head.Head) -> str | None:
    """The hash of the record at the head file's ``seq``, where the chain reaches it (else None)."""
    if recorded is None or not 0 < recorded.seq <= current.seq:
        return None
    row = conn.execute("SELECT hash FROM trtguard_decisions WHERE seq = ?", (recorded.seq,)).fetchone()
    return str(row[0]) if row else None


def _carried_problem(conn: sqlite3.Connection, where: str) -> str | None:
    """The carried state through the newest pruned checkpoint against its digest (head.carried_problem)."""
    found = conn.execute(_sql.PRUNED_BASE).fetchone()
    if found is None:
        return None
    base = _sql.pruned_base([found])
    sql, params = _sql.carried_rows(None, None, base[0] if base else 0, "?")
    return head.carried_problem(found[0], conn.execute(sql, params).fetchall(), where=where)


def _has_table(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def _rows(cursor: sqlite3.Cursor) -> Iterator[Row]:
    for row in cursor:
        yield _sql.chain_row(row)
