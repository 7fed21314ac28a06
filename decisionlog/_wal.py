"""Keeping an SQLite log's write-ahead log copied into the file, and bounded.

WAL checkpoints copy the log into the database and fsync it: done inline by the writer they stall every
decision waiting behind that commit, so a thread of their own does them every :data:`CHECKPOINT_INTERVAL`
seconds (PASSIVE: it never blocks the writer). A PASSIVE checkpoint never catches up with a writer that is
never idle, though, and SQLite starts the WAL over only once it is wholly copied: the WAL then grew to its
largest size under load and stayed there. So past its bound the writer finishes the copy itself before its
next batch (the thread did most of it), the commit after it starts the WAL over, and ``journal_size_limit``
cuts the file back to the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

_log = logging.getLogger(__name__)

#: Seconds between background checkpoints, and records after which the writer asks for one sooner.
CHECKPOINT_INTERVAL: Final = 1.0
CHECKPOINT_RECORDS: Final = 1000
#: WAL bytes past which the writer checkpoints itself between two batches.
WAL_LIMIT_BYTES: Final = 4 * 2**20


class WalKeeper:
    """The checkpoint thread of one SQLite log, and the writer's side of the WAL's bound."""

    def __init__(
        self, path: Path, connect: Callable[[], sqlite3.Connection], *, limit: int, where: str
    ) -> None:
        self.path = path
        self.limit = limit
        self._wal = path.with_name(path.name + "-wal")
        self._connect = connect
        self._where = where
        self._thread: threading.Thread | None = None
        self._due = threading.Event()
        # The thread's checkpoint would make the writer's one busy (skipped): one at a time.
        self._checkpointing = threading.Lock()
        self._stopping = threading.Event()
        self._since = 0
        self._size_bytes: int | None = None
        #: The WAL file's size at the writer's last look: a WAL started over is rewritten inside the file,
        #: which keeps its size (``journal_size_limit`` cuts it back to the bound, not below).
        self._wal_seen = 0

    @property
    def size_bytes(self) -> int | None:
        """The database file and its WAL, measured after each checkpoint of the thread."""
        return self._size_bytes

    def prepare(self, conn: sqlite3.Connection) -> None:
        """Set up the writer's connection: no automatic checkpoints, the WAL file cut back to the bound."""
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute(f"PRAGMA journal_size_limit={int(self.limit)}")

    def start(self) -> None:
        """Start the checkpoint thread."""
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._run, name="trtguard-decision-log-checkpoint", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        """One last checkpoint, then stop the thread."""
        if self._thread is not None:
            self._stopping.set()
            self._due.set()
            await asyncio.to_thread(self._thread.join)
            self._thread = None

    def committed(self, records: int) -> None:
        """After a batch: ask for a checkpoint once CHECKPOINT_RECORDS records were written since the last."""
        self._since += records
        if self._since >= CHECKPOINT_RECORDS:
            self._since = 0
            self._due.set()

    def before_batch(self, conn: sqlite3.Connection) -> None:
        """On the writer thread, before a batch: checkpoint on ``conn`` when the WAL is past its bound.

        Before the batch, not after it: the decisions of the batch just committed are answered without
        waiting for it. It does not wait for readers (PASSIVE); the commit after it starts the WAL over.
        """
        try:
            wal = self._wal.stat().st_size
        except OSError:
            wal = 0
        grew, self._wal_seen = wal > self._wal_seen, wal
        if grew and wal > self.limit // 2:
            # Only a file that grows says the WAL is long: one started over inside a file of that size again
            # would otherwise ask for a checkpoint (two fsyncs) after every batch.
            self._due.set()
        if wal > self.limit:
            try:
                with self._checkpointing:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as error:  # the records are safe in the WAL; the next batch tries again
                _log.warning("decision log checkpoint failed: %s", error, extra={"store": self._where})

    def _run(self) -> None:
        """Checkpoint every CHECKPOINT_INTERVAL s or when asked; once more when stopping."""
        try:
            conn = self._connect()
        except sqlite3.Error as error:
            _log.error("decision log checkpointer cannot start: %s", error, extra={"store": self._where})
            return
        self._size_bytes = file_bytes(self.path)
        try:
            while True:
                self._due.wait(CHECKPOINT_INTERVAL)
                self._due.clear()
                try:
                    with self._checkpointing:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as error:  # the records are safe in the WAL; the next try catches up
                    _log.warning("decision log checkpoint failed: %s", error, extra={"store": self._where})
                self._size_bytes = file_bytes(self.path)
                if self._stopping.is_set():
                    return
        finally:
            conn.close()


def file_bytes(path: Path) -> int:
    """Bytes of the SQLite database and its write-ahead log (a file not there counts 0).

    Never raises: it runs in the checkpoint thread, which must go on whatever a stat says.
    """
    total = 0
    for part in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            total += part.stat().st_size
    return total
