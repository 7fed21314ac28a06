"""Opening a decision store by its URL: ``sqlite:///path`` or ``postgresql://…``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from decisionlog._errors import DecisionLogError
from decisionlog._postgres import PostgresStore
from decisionlog._spool import SpoolingStore
from decisionlog._sqlite import SQLiteStore
from decisionlog._store import DecisionStore, redact


def open_store(
    url: str,
    *,
    unavailable: Literal["deny", "spool"] = "deny",
    spool: Path | None = None,
    read_only: bool = False,
    accept_broken: bool = False,
) -> DecisionStore:
    """A store for ``sqlite:///path`` or ``postgresql://…``, not yet opened.

    With ``unavailable="spool"`` a PostgreSQL store that cannot be written admits the decision and keeps the
    record in the local SQLite file ``spool`` until it can be shipped; SQLite stores ignore it (a local file
    that cannot be written has no better place to spool to). A ``read_only`` store (``trtguard audit``) never
    creates a file or tables. ``accept_broken`` opens a log whose head does not verify, or that was reset
    (:mod:`decisionlog._head`), instead of refusing it.
    """
    if url.startswith("sqlite:///"):
        path, _, query = url.removeprefix("sqlite:///").partition("?")
        return SQLiteStore(
            Path(path),
            read_only=read_only,
            synchronous=_sqlite_sync(query, url),
            accept_broken=accept_broken,
        )
    if url.startswith(("postgresql://", "postgres://")):
        primary = PostgresStore(url, read_only=read_only, accept_broken=accept_broken)
        if unavailable == "spool" and not read_only:
            return SpoolingStore(primary, spool or Path("trtguard-spool.db"))
        return primary
    raise DecisionLogError(
        f"unsupported decision log URL {redact(url)!r}",
        location="--decision-log",
        hint="use sqlite:///relative/file.db, sqlite:////absolute/file.db or postgresql://user@host/db",
    )


def _sqlite_sync(query: str, url: str) -> Literal["full", "normal"]:
    options = dict(part.partition("=")[::2] for part in query.split("&") if part)
    unknown = set(options) - {"synchronous"}
    value = options.get("synchronous", "full").lower()
    if unknown or value not in ("full", "normal"):
        raise DecisionLogError(
            f"unsupported option in decision log URL {url!r}",
            location="--decision-log",
            hint="the only SQLite option is ?synchronous=full (default) or ?synchronous=normal",
        )
    return "normal" if value == "normal" else "full"
