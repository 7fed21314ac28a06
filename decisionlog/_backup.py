"""A consistent copy of a SQLite decision log, for backups.

A SQLite log in WAL mode keeps its newest commits in ``decisions.db-wal`` until a checkpoint copies them into
``decisions.db``: a plain copy of ``decisions.db`` alone silently lacks them, and still verifies (the chain
head row is as old as the records). SQLite's online backup copies the database as its readers see it, WAL
included, as one snapshot, while writers go on.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from decisionlog._errors import DecisionLogError
from decisionlog._sqlite import connect
from decisionlog._store import redact


def backup_sqlite(url: str, target: Path) -> None:
    """Copy the SQLite log at ``url`` to the new file ``target`` (a self-contained file, no WAL)."""
    if not url.startswith("sqlite:///"):
        raise DecisionLogError(
            "`trtguard audit backup` copies SQLite decision logs",
            location=redact(url),
            hint="back up a PostgreSQL log with pg_dump (or the database's own backups)",
        )
    source = Path(url.removeprefix("sqlite:///").partition("?")[0])
    if target.exists():
        raise DecisionLogError("the backup file already exists", location=str(target), hint="name a new file")
    temporary = target.with_name(target.name + ".tmp")
    temporary.unlink(missing_ok=True)
    try:
        with (
            contextlib.closing(connect(source, readonly=True)) as src,
            contextlib.closing(sqlite3.connect(temporary)) as dst,
        ):
            src.backup(dst)  # all pages in one step: one consistent snapshot
            dst.execute("PRAGMA journal_mode=DELETE")  # the copy stands alone, without a -wal beside it
        with temporary.open("rb") as handle:
            os.fsync(handle.fileno())
        temporary.replace(target)
    except sqlite3.Error as error:
        temporary.unlink(missing_ok=True)
        raise DecisionLogError(f"cannot back up the decision log: {error}", location=str(source)) from None
