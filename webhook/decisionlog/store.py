"""The decision store interface shared by the SQLite, PostgreSQL and spooling stores, and the URL factory."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from verifier.deadline import Deadline
from webhook.decisionlog.chain import ChainReport
from webhook.decisionlog.record import DecisionRecord, StoredRecord


@dataclass(frozen=True, slots=True)
class AppendReceipt:
    """Where a record went: its place in the chain, or the local spool awaiting shipment."""

    seq: int | None
    hash: str | None
    spooled: bool = False


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """Filters for reading records back; ``None`` means any. ``newest_first`` with ``limit`` gives a tail.

    ``by_time`` orders by the decision time (then ``seq``) instead of ``seq`` alone: records shipped from a
    spool after an outage are appended after newer ones written directly, so "the last admission" is the
    newest by time. ``offset`` skips that many records of the order (for paging by time).
    """

    namespace: str | None = None
    name: str | None = None
    kind: str | None = None
    uid: str | None = None
    allowed: bool | None = None
    dry_run: bool | None = None
    since: datetime | None = None
    until: datetime | None = None
    after_seq: int | None = None
    before_seq: int | None = None
    limit: int | None = None
    newest_first: bool = False
    by_time: bool = False
    offset: int | None = None


class DecisionStore(Protocol):
    """An append-only, hash-chained store of :class:`DecisionRecord` objects."""

    @property
    def description(self) -> str:
        """Where the records go, for logs and ``/readyz`` (never with a password)."""
        ...

    @property
    def ready(self) -> bool:
        """True while the store takes records (or spools them)."""
        ...

    @property
    def size_bytes(self) -> int | None:
        """Space the log takes on its storage, as last measured (periodically); None before the first."""
        ...

    async def open(self) -> None:
        """Connect and apply pending schema migrations."""
        ...

    async def close(self) -> None:
        """Finish pending writes and release connections."""
        ...

    async def append(self, record: DecisionRecord, *, deadline: Deadline) -> AppendReceipt:
        """Write ``record`` durably before returning.

        Raises :class:`DecisionLogUnavailable` when it was not written before ``deadline``; a record that a
        writer had already started is waited for rather than abandoned, so that the log and the answer agree
        (past ``deadline`` by at most the store's own bound on one write).
        """
        ...

    async def query(self, query: RecordQuery) -> list[StoredRecord]:
        """Records matching ``query`` in chain order (or newest first)."""
        ...

    async def verify(self) -> ChainReport:
        """Recompute the whole chain."""
        ...


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user, has_password, _ = credentials.partition(":")
    return f"{scheme}://{user}{':***' if has_password else ''}@{host}"
