"""Sealed segments of the decision log: sealing with signed checkpoints, and pruning archived segments.

A *segment* is the records after one checkpoint up to the next (``trtguard_checkpoints``, one row each).
:class:`Ledger` works on the store directly, on one synchronous connection (SQLite or PostgreSQL), beside a
running webhook: sealing reads records that no writer changes any more, and pruning deletes only records of
segments already archived (the tables' triggers refuse anything else, see ``_schema``). Once records are
pruned, the live log's chain starts after the newest pruned checkpoint (``SQLiteStore.verify``), whose
signature ``trtguard audit verify --key`` checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import psycopg

from verifier.keys import PrivateKey
from webhook.decisionlog import _sql, checkpoints
from webhook.decisionlog._schema import Dialect
from webhook.decisionlog.chain import ChainVerifier, Row
from webhook.decisionlog.checkpoints import Checkpoint
from webhook.decisionlog.errors import DecisionLogError
from webhook.decisionlog.record import GENESIS_HASH, canonical_json, parse_time
from webhook.decisionlog.sqlite import connect, migrate
from webhook.decisionlog.store import redact

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
        """A ledger on the existing log at ``url`` (a SQLite file is migrated to this schema first, unless
        ``read_only``: then a log without checkpoints table has no segments)."""
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
            if not ledger.has_segments_table():
                raise DecisionLogError(
                    "this decision log has no sealed segments table",
                    location=ledger.where,
                    hint="start `trtguard serve` of this version on it once: it migrates the schema",
                )
            yield ledger
        finally:
            pg.close()

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
        sql = (
            "SELECT name FROM sqlite_master WHERE name = 'trtguard_checkpoints'"
            if self._dialect == "sqlite"
            else "SELECT to_regclass('trtguard_checkpoints')"
        )
        rows = self._all(sql)
        return bool(rows) and rows[0][0] is not None

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

    def seal(self, key: PrivateKey, *, segment_records: int, partial: bool) -> list[Checkpoint]:
        """Seal the records after the last checkpoint into segments of ``segment_records``, signed by ``key``.

        The chain is checked on the way: a broken chain is not sealed. With ``partial`` the records left
        over at the head form a last, shorter segment; without, they wait for the next seal.
        """
        existing = self.segments()
        after, prev = (
            (existing[-1].checkpoint.last_seq, existing[-1].checkpoint.head_hash)
            if existing
            else (0, GENESIS_HASH)
        )
        head_seq, _ = self.head()
        verifier = ChainVerifier()
        verifier.start_after(after, prev)
        sealed: list[Checkpoint] = []
        first: Row | None = None
        for row in self.rows(after, head_seq):
            if not verifier.feed(row):
                report = verifier.finish(head_seq=None, head_hash=None)
                raise DecisionLogError(
                    f"not sealed: {report.summary()}",
                    location=self.where,
                    hint="run `trtguard audit verify` and restore the log from a backup",
                )
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
                )
                self._all(
                    "INSERT INTO trtguard_checkpoints (last_seq, statement, signature) VALUES (?, ?, ?)",
                    checkpoint.last_seq,
                    canonical_json(checkpoint.statement()).decode(),
                    checkpoint.signature_text(),
                )
                sealed.append(checkpoint)
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
            with self._transaction():
                self._all("DELETE FROM trtguard_decisions WHERE seq <= ?", checkpoint.last_seq)
                self._all(
                    "UPDATE trtguard_checkpoints SET pruned = TRUE WHERE last_seq = ?", checkpoint.last_seq
                )
            pruned.append(segment)
        return pruned


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
