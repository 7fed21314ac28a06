"""A log of schema version 1 is migrated in place: old whole-body records and new ones verify as one."""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from tests.support.harness import RecordFactory
from verifier.deadline import Deadline
from webhook.decisionlog import GENESIS_HASH, RecordQuery, SQLiteStore
from webhook.decisionlog._schema import LATEST_VERSION, MIGRATIONS
from webhook.decisionlog.record import INDEXED_NAMES, canonical_json, link_hash


def _version_1_log(path: Path, make_record: RecordFactory) -> list[str]:
    """A log as trtguard wrote it before schema version 2: whole bodies, no shared parts."""
    uids = []
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE trtguard_schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL,"
            " applied_at TEXT NOT NULL)"
        )
        for statement in MIGRATIONS[0].statements("sqlite"):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO trtguard_schema_migrations VALUES (1, 'v1', ?)", (datetime.now(UTC).isoformat(),)
        )
        prev = GENESIS_HASH
        for seq in (1, 2, 3):
            data = make_record().to_json()
            body = canonical_json(data)
            digest = link_hash(prev, body)
            columns = ", ".join(("seq", *INDEXED_NAMES, "body", "prev_hash", "hash"))
            marks = ", ".join("?" * (len(INDEXED_NAMES) + 4))
            conn.execute(
                f"INSERT INTO trtguard_decisions ({columns}) VALUES ({marks})",  # noqa: S608
                (seq, *(data[n] for n in INDEXED_NAMES), body.decode(), prev, digest),
            )
            conn.execute("UPDATE trtguard_chain_head SET seq = ?, hash = ?", (seq, digest))
            prev = digest
            uids.append(data["uid"])
    return uids


async def test_a_version_1_log_is_migrated_and_continues(tmp_path: Path, make_record: RecordFactory) -> None:
    path = tmp_path / "decisions.db"
    old = _version_1_log(path, make_record)
    store = SQLiteStore(path)
    await store.open()
    try:
        new = make_record()
        await store.append(new, deadline=Deadline.after(5))
    finally:
        await store.close()
    report = await store.verify()
    assert report.ok and report.records == 4, report.summary()
    stored = await store.query(RecordQuery())
    assert [s.record.uid for s in stored] == [*old, new.uid]
    assert stored[-1].record == new
    with contextlib.closing(sqlite3.connect(path)) as conn:
        versions = conn.execute("SELECT version FROM trtguard_schema_migrations ORDER BY version").fetchall()
        refs = conn.execute("SELECT shared_ref IS NOT NULL FROM trtguard_decisions ORDER BY seq").fetchall()
    assert versions == [(v,) for v in range(1, LATEST_VERSION + 1)]
    assert refs == [(0,), (0,), (0,), (1,)]  # old rows keep their whole body; new ones share images/engines
