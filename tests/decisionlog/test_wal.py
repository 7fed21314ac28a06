"""The checkpoint thread is asked for a checkpoint when the WAL grows long, not after every batch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from decisionlog._sqlite import connect
from decisionlog._wal import WalKeeper


def test_a_wal_started_over_inside_its_file_asks_for_no_checkpoint_per_batch(tmp_path: Path) -> None:
    """Issue 31: a WAL started over is rewritten inside its file, which ``journal_size_limit`` leaves at the
    bound; its size alone said "past half the bound" forever after, so every batch woke the checkpoint
    thread (two fsyncs and about 300 us of CPU per decision). Only a WAL file that grows asks now."""
    path = tmp_path / "decisions.db"
    limit = 64 * 1024
    keeper = WalKeeper(path, lambda: connect(path), limit=limit, where="test")
    wal = path.with_name(path.name + "-wal")
    conn = sqlite3.connect(":memory:")
    try:
        wal.write_bytes(b"\0" * (limit // 2 + 1))  # grew past half the bound: a checkpoint is asked for
        keeper.before_batch(conn)
        assert keeper._due.is_set()
        keeper._due.clear()
        for _ in range(5):  # the same file, the WAL started over inside it: nothing more to ask
            keeper.before_batch(conn)
        assert not keeper._due.is_set()
        wal.write_bytes(b"\0" * (limit // 2 + 4096))  # growing again
        keeper.before_batch(conn)
        assert keeper._due.is_set()
    finally:
        conn.close()
