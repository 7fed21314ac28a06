"""The decision store interface shared by the SQLite, PostgreSQL and spooling stores, and the URL factory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final, Protocol

from decisionlog._carried import Carried
from decisionlog._chain import ChainReport, ChainSink
from decisionlog._record import DecisionRecord, StoredRecord
from verifier.base import Deadline


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
    newest by time. ``offset`` skips that many records of the order (for paging by time); ``older_than``
    keeps only records before ``(time, seq)`` in that order (paging by key: pruning between two pages
    cannot make the next one skip a record, as it can with an offset).
    """

    namespace: str | None = None
    name: str | None = None
    kind: str | None = None
    #: The API group that identifies the object (``DecisionRecord.api_group``; ``""`` the core group).
    group: str | None = None
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
    older_than: tuple[datetime, int] | None = None


class DecisionStore(Protocol):
    """An append-only, hash-chained store of :class:`DecisionRecord` objects."""

    @property
    def description(self) -> str:
        """Where the records go, for logs and ``/readyz`` (never with a password)."""
        ...

    @property
    def ready(self) -> bool:
        """True while a record can be taken now (or spooled)."""
        ...

    @property
    def problem(self) -> str | None:
        """Why no record can be taken now (shown by ``/readyz``); None while :attr:`ready`."""
        ...

    @property
    def size_bytes(self) -> int | None:
        """Space the log takes on its storage, as last measured (periodically); None before the first."""
        ...

    @property
    def undelivered_written(self) -> int:
        """Undelivered records this store has written since it was made (decisionlog._undelivered)."""
        ...

    async def open(self) -> None:
        """Connect and apply pending schema migrations."""
        ...

    async def close(self) -> None:
        """Finish pending writes and release connections."""
        ...

    async def append(
        self, record: DecisionRecord, *, deadline: Deadline, arrived: float | None = None
    ) -> AppendReceipt:
        """Write ``record`` durably before returning, never waiting past ``deadline``.

        Raises :class:`DecisionLogUnavailable` when it was not confirmed before ``deadline``; if it reaches
        the log later, an undelivered record follows it (:mod:`decisionlog._undelivered`). With
        ``arrived`` (the request's arrival, ``time.monotonic()``) the record's ``latency_us`` is set to the
        time from it to the start of the commit that makes the record durable: the whole answer time.
        """
        ...

    async def query(self, query: RecordQuery) -> list[StoredRecord]:
        """Records matching ``query`` in chain order (or newest first)."""
        ...

    async def verify(self, sink: ChainSink | None = None) -> ChainReport:
        """Recompute the whole chain from one snapshot.

        Each record that checks goes to ``sink`` with its canonical JSON, in ``seq`` order, as it is read:
        a reader that needs the verified records (an evidence export) reads them in the same pass, in
        bounded memory. The sink may be called on a thread of the store's; it must not block on the event
        loop. Records it was given are proven only once the report is ``ok``.
        """
        ...

    async def carried(
        self, namespace: str, name: str, *, group: str | None = None, kind: str | None = None
    ) -> Carried:
        """What rotation carried forward of pruned records: the last admissions of the workload (API group,
        kind, namespace and name) as of the newest pruned checkpoint (:mod:`decisionlog._carried`);
        without ``group`` and ``kind``, of every workload of that namespace and name."""
        ...


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user, has_password, _ = credentials.partition(":")
    return f"{scheme}://{user}{':***' if has_password else ''}@{host}"


#: Free bytes a local log's (or spool's) file system must have to count as able to take a record (a record
#: is a few KiB; SQLite needs room for its write-ahead log too).
MIN_FREE_BYTES: Final = 1024 * 1024


def writable_room(path: Path, min_free: int = MIN_FREE_BYTES) -> str | None:
    """None when the folder of ``path`` is writable with ``min_free`` bytes free, else what is wrong.

    What readiness asks of a local file store: a record can be taken now (one ``statvfs`` call).
    """
    folder = path.parent
    try:
        stats = os.statvfs(folder)
    except OSError as error:
        return f"cannot check {folder}: {error.strerror or error}"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{path} is not writable"
    free = stats.f_bavail * stats.f_frsize
    if free < min_free:
        return f"the file system of {path} is full ({free} bytes free)"
    return None
