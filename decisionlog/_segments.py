"""Sealed segments of the decision log: sealing with signed checkpoints, and pruning archived segments.

A *segment* is the records after one checkpoint up to the next (``trtguard_checkpoints``, one row each).
:class:`Ledger` works on the store directly, on one synchronous connection (SQLite or PostgreSQL), beside a
running webhook: sealing reads records that no writer changes any more, and pruning deletes only records of
segments already archived (the tables' triggers refuse anything else, see ``_schema``). Once records are
pruned, the live log's chain starts after the newest pruned checkpoint (``SQLiteStore.verify``), whose
signature ``trtguard audit verify --key`` checks.

Sealing also stores change control's *carried state* at each checkpoint (:mod:`decisionlog._carried`:
each workload's last admissions, signed in the checkpoint by its digest), and pruning deletes a segment only
once that state is stored and matches its checkpoint: what the webhook must remember of the records pruned
stays in ``trtguard_carried``.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import psycopg

from decisionlog import _checkpoints as checkpoints
from decisionlog import _schema, _sql
from decisionlog._carried import CarriedState, CarriedWorkload, WorkloadKey, carried_from_rows
from decisionlog._chain import ChainVerifier, Row
from decisionlog._checkpoints import Checkpoint
from decisionlog._errors import DecisionLogError
from decisionlog._record import GENESIS_HASH, DecisionRecord, canonical_json, load_body, parse_time
from decisionlog._schema import Dialect
from decisionlog._sqlite import connect, migrate
from decisionlog._store import redact
from verifier.crypto import PrivateKey

#: Rows read per query while sealing or archiving.
PAGE: Final = 2000
#: Seconds a PostgreSQL connection may take, and a statement may run, for sealing and pruning.
PG_TIMEOUT_S: Final = 30


@dataclass(frozen=True, slots=True)
class SealedSegment:
    """A checkpoint as stored: where its segment was archived and whether it was pruned from the store."""

    checkpoint: Checkpoint
    archive: str | None
    archive_sha256: str | None
    pruned: bool


class Ledger:
    """Sealing, archiving and pruning on one synchronous connection to a decision log."""

    def __init__(self, conn: Any, dialect: Dialect, where: str) -> None:
        self._conn = conn
        self._dialect: Dialect = dialect
        self._p = "?" if dialect == "sqlite" else "%s"
        self.where = where

    @classmethod
    @contextlib.contextmanager
    def open(cls, url: str, *, read_only: bool = False) -> Iterator[Ledger]:
        """A ledger on the existing log at ``url``, migrated to this schema first unless ``read_only`` (then a
        SQLite log without checkpoints table has no segments, and a PostgreSQL one must be of this schema)."""
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///").partition("?")[0])
            if not path.is_file():
                raise DecisionLogError(
                    "decision log file does not exist",
                    location=str(path),
                    hint="pass the --decision-log URL that `trtguard serve` writes to",
                )
            try:
                conn = connect(path, readonly=read_only)
                if not read_only:
                    migrate(conn, where=url)
            except sqlite3.Error as error:
                raise DecisionLogError(f"cannot open the decision log: {error}", location=url) from None
            try:
                yield cls(conn, "sqlite", url)
            finally:
                conn.close()
            return
        try:
            pg = psycopg.connect(url, autocommit=True, connect_timeout=PG_TIMEOUT_S)
            pg.execute(f"SET statement_timeout = {PG_TIMEOUT_S * 1000}")
        except psycopg.Error as error:
            raise DecisionLogError(f"cannot open the decision log: {error}", location=redact(url)) from None
        try:
            ledger = cls(pg, "postgresql", redact(url))
            if read_only:
                applied = (
                    ledger._all(_schema.SELECT_VERSION)
                    if ledger._has_table("trtguard_schema_migrations")
                    else []
                )
                _schema.require_current(int(applied[0][0]) if applied else 0, where=ledger.where)
            else:
                ledger._migrate()
            yield ledger
        finally:
            pg.close()

    def _migrate(self) -> None:
        """Apply pending schema migrations to a PostgreSQL log, under the lock `serve` takes for them (a
        SQLite file is migrated when opened)."""
        with self._transaction():
            self._all(_schema.PG_MIGRATION_LOCK)
            self._all(_schema.CREATE_MIGRATIONS_TABLE)
            for statement, params in _schema.steps(
                int(self._all(_schema.SELECT_VERSION)[0][0]), "postgresql", where=self.where
            ):
                self._all(statement, *params)

    def _all(self, sql: str, *params: object) -> list[Any]:
        try:
            cursor = self._conn.execute(sql.replace("?", self._p), params)
            return list(cursor.fetchall()) if cursor.description is not None else []
        except (sqlite3.Error, psycopg.Error) as error:
            raise DecisionLogError(f"decision log: {error}", location=self.where) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._all("BEGIN IMMEDIATE" if self._dialect == "sqlite" else "BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error, psycopg.Error):
                self._conn.execute("ROLLBACK")
            raise
        self._all("COMMIT")

    def head(self) -> tuple[int, str]:
        """The chain head ``(seq, hash)``."""
        rows = self._all("SELECT seq, hash FROM trtguard_chain_head WHERE id = 1")
        if not rows:
            raise DecisionLogError(
                "the chain-head row is missing", location=self.where, hint="run `trtguard audit verify`"
            )
        return int(rows[0][0]), str(rows[0][1])

    def has_segments_table(self) -> bool:
        """Whether the log's schema has sealed segments (version 2 on)."""
        return self._has_table("trtguard_checkpoints")

    def _has_table(self, table: str) -> bool:
        sql = (
            "SELECT name FROM sqlite_master WHERE name = ?"
            if self._dialect == "sqlite"
            else "SELECT to_regclass(?)"
        )
        rows = self._all(sql, table)
        return bool(rows) and rows[0][0] is not None

    def carried_through(self) -> set[int]:
        """The checkpoints (their ``last_seq``) whose carried state the store holds (schema 3 on)."""
        if not self._has_table("trtguard_carried_checkpoints"):
            return set()
        return {int(r[0]) for r in self._all("SELECT last_seq FROM trtguard_carried_checkpoints")}

    def carried_state(self, through_seq: int) -> CarriedState:
        """The carried state at checkpoint ``through_seq``: each workload's newest row at or before it.

        Raises when a row's content is not the entry of the workload its columns name (edited by hand).
        """
        if not self._has_table("trtguard_carried"):
            return CarriedState()
        sql, params = _sql.carried_rows(None, None, through_seq, "?")
        rows = self._all(sql, *params)
        return CarriedState(
            carried_from_rows(through_seq, True, rows, where=f"{self.where} trtguard_carried").workloads
        )

    def _store_carried(
        self, through_seq: int, before: Mapping[WorkloadKey, CarriedWorkload | None], after: CarriedState
    ) -> None:
        """Rows at ``through_seq`` for the workloads whose entry in ``after`` is not the one ``before`` had,
        and the mark that the state through it is stored (inside the caller's transaction)."""
        for key in sorted(before):
            entry = after.get(key)
            if entry == before[key]:
                continue
            self._all(
                "INSERT INTO trtguard_carried (namespace, api_group, kind, name, through_seq, content)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                *key,
                through_seq,
                None if entry is None else canonical_json(entry.to_json()).decode(),
            )
        self._all("INSERT INTO trtguard_carried_checkpoints (last_seq) VALUES (?)", through_seq)

    def _carried_start(self, existing: list[SealedSegment], archive: Path | None) -> CarriedState:
        """The carried state at the last checkpoint (empty before the first), as stored.

        The stored state of a checkpoint of format 3 must have the digest it signs. Checkpoints sealed
        before the carried state existed (format 1), or while it keyed workloads without their API group
        (format 2), get theirs now, folded from the records: live ones from the store, pruned ones from
        their archived segments in ``archive`` (checked first).
        """
        if not existing:
            return CarriedState()
        stored = self.carried_through()
        known = [i for i, segment in enumerate(existing) if segment.checkpoint.last_seq in stored]
        start = known[-1] if known else -1
        state = self.carried_state(existing[start].checkpoint.last_seq) if known else CarriedState()
        if known:
            self.check_carried(existing[start].checkpoint, state)
        for segment in existing[start + 1 :]:
            before: dict[WorkloadKey, CarriedWorkload | None] = {}
            for seq, record in self._segment_records(segment, archive):
                state.fold(seq, record, before=before)
            self.check_carried(segment.checkpoint, state)
            with self._transaction():
                self._store_carried(segment.checkpoint.last_seq, before, state)
        return state

    def check_carried(self, checkpoint: Checkpoint, state: CarriedState) -> None:
        """Raise when ``state`` is not the carried state ``checkpoint`` signs (one of format 1 or 2 signs
        none of this form)."""
        if checkpoint.signs_carried and state.digest() != checkpoint.carried_hash:
            raise DecisionLogError(
                f"the carried state stored through seq {checkpoint.last_seq} does not match its signed "
                "checkpoint: trtguard_carried was changed",
                location=self.where,
                hint="run `trtguard audit verify --key …` and restore the log from a backup",
            )

    def _segment_records(
        self, segment: SealedSegment, archive: Path | None
    ) -> Iterator[tuple[int, DecisionRecord]]:
        """The records of a sealed segment, chain-checked: from the store, or its archive once pruned."""
        checkpoint = segment.checkpoint
        if segment.pruned:
            from decisionlog._archived_segment import segment_rows  # noqa: PLC0415

            if archive is None or segment.archive is None:
                raise DecisionLogError(
                    f"seq {checkpoint.first_seq}…{checkpoint.last_seq} was pruned before trtguard carried "
                    "change control's last admissions forward by workload (API group, kind, namespace and "
                    "name): they must be read back from its archive",
                    location=self.where,
                    hint="pass --archive FOLDER (the folder the segments were archived to) once; "
                    "`trtguard audit rotate` passes its own",
                )
            path = archive / segment.archive
            if file_sha256(path) != segment.archive_sha256:
                raise DecisionLogError(
                    "the archive is missing or changed", location=str(path), hint="pass the right --archive"
                )
            for row in segment_rows(path, checkpoint):
                yield row.seq, DecisionRecord.from_json(load_body(row.body))
            return
        verifier = ChainVerifier()
        verifier.start_after(checkpoint.first_seq - 1, checkpoint.prev_hash)
        for row in self.rows(checkpoint.first_seq - 1, checkpoint.last_seq):
            if not verifier.feed(row) or verifier.last_record is None:
                break
            yield row.seq, verifier.last_record
        report = verifier.finish(head_seq=checkpoint.last_seq, head_hash=checkpoint.head_hash)
        if not report.ok:
            raise DecisionLogError(
                f"seq {checkpoint.first_seq}…{checkpoint.last_seq} does not match its checkpoint: "
                f"{report.summary()}",
                location=self.where,
                hint="run `trtguard audit verify` and restore the log from a backup",
            )

    def segments(self) -> list[SealedSegment]:
        """Every checkpoint, oldest first."""
        if not self.has_segments_table():
            return []
        rows = self._all(
            "SELECT statement, signature, archive, archive_sha256, pruned FROM trtguard_checkpoints"
            " ORDER BY last_seq"
        )
        return [
            SealedSegment(checkpoints.from_row(r[0], r[1], where=self.where), r[2], r[3], bool(r[4]))
            for r in rows
        ]

    def rows(self, after_seq: int, through_seq: int) -> Iterator[Row]:
        """Stored rows ``after_seq < seq <= through_seq`` in order, a page at a time."""
        while after_seq < through_seq:
            page = self._all(
                f"SELECT {_sql.ROW_COLUMNS} FROM trtguard_decisions WHERE seq > ? AND seq <= ?"  # noqa: S608
                " ORDER BY seq LIMIT ?",
                after_seq,
                through_seq,
                PAGE,
            )
            if not page:
                return
            for row in page:
                yield _sql.chain_row(row)
            after_seq = int(page[-1][0])

    def seal(
        self, key: PrivateKey, *, segment_records: int, partial: bool, archive: Path | None = None
    ) -> list[Checkpoint]:
        """Seal the records after the last checkpoint into segments of ``segment_records``, signed by ``key``.

        The chain is checked on the way: a broken chain is not sealed. With ``partial`` the records left
        over at the head form a last, shorter segment; without, they wait for the next seal. Each checkpoint
        and the carried state at it are stored in one transaction; ``archive`` is where pruned segments of a
        log sealed before the carried state existed are read back from, once (:meth:`_carried_start`).
        """
        existing = self.segments()
        after, prev = (
            (existing[-1].checkpoint.last_seq, existing[-1].checkpoint.head_hash)
            if existing
            else (0, GENESIS_HASH)
        )
        state = self._carried_start(existing, archive)
        before: dict[WorkloadKey, CarriedWorkload | None] = {}
        before_hash = state.digest()
        head_seq, _ = self.head()
        verifier = ChainVerifier()
        verifier.start_after(after, prev)
        sealed: list[Checkpoint] = []
        first: Row | None = None
        for row in self.rows(after, head_seq):
            if not verifier.feed(row) or verifier.last_record is None:
                report = verifier.finish(head_seq=None, head_hash=None)
                raise DecisionLogError(
                    f"not sealed: {report.summary()}",
                    location=self.where,
                    hint="run `trtguard audit verify` and restore the log from a backup",
                )
            state.fold(row.seq, verifier.last_record, before=before)
            first = first or row
            if row.seq - first.seq + 1 == segment_records or (partial and row.seq == head_seq):
                checkpoint = checkpoints.sign(
                    key,
                    first_seq=first.seq,
                    last_seq=row.seq,
                    prev_hash=first.prev_hash,
                    head_hash=row.hash,
                    first_time=str(first.columns["time"]),
                    last_time=str(row.columns["time"]),
                    prev_carried_hash=before_hash,
                    carried_hash=state.digest(),
                )
                with self._transaction():
                    self._all(
                        "INSERT INTO trtguard_checkpoints (last_seq, statement, signature) VALUES (?, ?, ?)",
                        checkpoint.last_seq,
                        canonical_json(checkpoint.statement()).decode(),
                        checkpoint.signature_text(),
                    )
                    self._store_carried(checkpoint.last_seq, before, state)
                sealed.append(checkpoint)
                before, before_hash = {}, state.digest()
                first = None
        return sealed

    def mark_archived(self, segment: SealedSegment, name: str, sha256: str) -> None:
        """Record where ``segment`` was archived (once)."""
        self._all(
            "UPDATE trtguard_checkpoints SET archive = ?, archive_sha256 = ? WHERE last_seq = ?",
            name,
            sha256,
            segment.checkpoint.last_seq,
        )

    def prune(self, folder: Path, *, keep_records: int, keep_since: datetime | None) -> list[SealedSegment]:
        """Delete the records of archived segments, oldest first, that are older than both limits.

        A segment is pruned only while its archive in ``folder`` is there with the digest recorded when it
        was written, and the ``keep_records`` newest records (and those decided at or after ``keep_since``)
        stay. Each segment goes in its own transaction with its ``pruned`` mark.
        """
        head_seq, _ = self.head()
        pruned: list[SealedSegment] = []
        carried = self.carried_through()
        for segment in self.segments():
            checkpoint = segment.checkpoint
            if segment.pruned:
                continue
            too_new = checkpoint.last_seq > head_seq - keep_records or (
                keep_since is not None and parse_time(checkpoint.last_time) >= keep_since
            )
            if too_new or segment.archive is None or segment.archive_sha256 is None:
                break
            archived = folder / segment.archive
            if file_sha256(archived) != segment.archive_sha256:
                raise DecisionLogError(
                    f"the archive of seq {checkpoint.first_seq}…{checkpoint.last_seq} is missing or changed:"
                    " not pruned",
                    location=str(archived),
                    hint="pass the --archive folder the segment was archived to, or archive it again",
                )
            # What change control must remember of these records is stored and signed, or nothing goes.
            if checkpoint.last_seq not in carried:
                raise DecisionLogError(
                    f"the carried state through seq {checkpoint.last_seq} is not stored: not pruned",
                    location=self.where,
                    hint="run `trtguard audit seal` first (it stores it; `trtguard audit rotate` does both)",
                )
            self.check_carried(checkpoint, self.carried_state(checkpoint.last_seq))
            with self._transaction():
                self._all("DELETE FROM trtguard_decisions WHERE seq <= ?", checkpoint.last_seq)
                self._all(
                    "UPDATE trtguard_checkpoints SET pruned = TRUE WHERE last_seq = ?", checkpoint.last_seq
                )
                # Rows a newer one at or before this checkpoint replaces can no longer be looked up.
                self._all(
                    _sql.CARRIED_SUPERSEDED.replace("{p}", "?"), checkpoint.last_seq, checkpoint.last_seq
                )
            pruned.append(segment)
        return pruned


def carried_problems(ledger: Ledger, base_seq: int) -> list[str]:
    """What does not hold of the carried state of a log whose live chain starts after ``base_seq``.

    The state stored at the base checkpoint must have the digest it signs; folding the live records from it
    must give, at each later checkpoint, the state it starts from and ends in and the state stored there.
    """
    segments = [s.checkpoint for s in ledger.segments()]
    stored = ledger.carried_through()
    if base_seq and base_seq not in stored:
        return [
            f"the log was pruned to seq {base_seq} without carrying change control's last admissions "
            "forward: run `trtguard audit seal --archive FOLDER` (it rebuilds them from the archived "
            "segments)"
        ]
    try:
        state = ledger.carried_state(base_seq) if base_seq else CarriedState()
        for checkpoint in (c for c in segments if c.last_seq == base_seq):
            ledger.check_carried(checkpoint, state)
        later = [c for c in segments if c.last_seq > base_seq]
        rows = ledger.rows(base_seq, later[-1].last_seq if later else base_seq)
        pending = next(rows, None)
        for checkpoint in later:
            if checkpoint.signs_carried and checkpoint.prev_carried_hash != state.digest():
                return [
                    f"the checkpoint at seq {checkpoint.last_seq} does not start from the state before it"
                ]
            while pending is not None and pending.seq <= checkpoint.last_seq:
                state.fold(pending.seq, DecisionRecord.from_json(load_body(pending.body)))
                pending = next(rows, None)
            if checkpoint.signs_carried and checkpoint.carried_hash != state.digest():
                return [
                    f"the records up to seq {checkpoint.last_seq} do not give the state its checkpoint signs"
                ]
            if (
                checkpoint.last_seq in stored
                and ledger.carried_state(checkpoint.last_seq).digest() != state.digest()
            ):
                return [
                    f"the carried state stored through seq {checkpoint.last_seq} is not the one its records "
                    "give: trtguard_carried was changed"
                ]
    except DecisionLogError as error:
        return [f"change control's carried state: {error.message}"]
    return []


def file_sha256(path: Path) -> str | None:
    """Hex SHA-256 of a file's bytes; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
