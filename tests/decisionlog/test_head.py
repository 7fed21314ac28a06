"""decisionlog/_head.py: a writer opening a log checks its head and refuses a broken or reset chain.

Real SQLite files damaged the ways an operator meets them (truncated to 0 bytes, deleted, restored from an
older copy, edited, overwritten with garbage), and a real PostgreSQL log with an edited record.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest

from decisionlog import DecisionLogError, PostgresStore, SQLiteStore
from decisionlog._archive import archive_segments
from decisionlog._head import TAIL_RECORDS, head_file
from decisionlog._segments import Ledger
from tests.support.harness import RecordFactory
from verifier.base._deadline import Deadline
from verifier.crypto._keys import generate_private_key


async def _log(path: Path, make_record: RecordFactory, records: int) -> None:
    store = SQLiteStore(path)
    await store.open()
    for _ in range(records):
        await store.append(make_record(), deadline=Deadline.after(5))
    await store.close()


async def _opens(path: Path, *, accept_broken: bool = False) -> SQLiteStore:
    store = SQLiteStore(path, accept_broken=accept_broken)
    await store.open()
    return store


async def test_a_log_records_its_head_beside_it_and_reopens(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    path = tmp_path / "d.db"
    await _log(path, make_record, 3)
    assert json.loads(head_file(path).read_text())["seq"] == 3
    store = await _opens(path)
    assert (await store.append(make_record(), deadline=Deadline.after(5))).seq == 4
    await store.close()


async def test_an_empty_file_is_refused_unless_accepted(tmp_path: Path, make_record: RecordFactory) -> None:
    path = tmp_path / "d.db"
    await _log(path, make_record, 2)
    path.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    with pytest.raises(DecisionLogError, match=r"empty \(0 bytes\)") as caught:
        await _opens(path)
    assert "--accept-broken-log" in (caught.value.hint or "")
    store = await _opens(path, accept_broken=True)
    assert (await store.append(make_record(), deadline=Deadline.after(5))).seq == 1
    await store.close()


async def test_an_empty_file_without_a_head_file_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    path.write_bytes(b"")
    with pytest.raises(DecisionLogError, match="truncated"):
        await _opens(path)


async def test_a_missing_log_with_a_head_file_is_refused(tmp_path: Path, make_record: RecordFactory) -> None:
    path = tmp_path / "d.db"
    await _log(path, make_record, 2)
    path.unlink()
    with pytest.raises(DecisionLogError, match=r"missing, but d\.db\.head says it held 2 records"):
        await _opens(path)


async def test_a_log_restored_from_an_older_copy_is_refused(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    path = tmp_path / "d.db"
    await _log(path, make_record, 2)
    shutil.copy(path, tmp_path / "old.db")
    await _log(path, make_record, 3)
    shutil.copy(tmp_path / "old.db", path)
    with pytest.raises(DecisionLogError, match="ends at seq 2, but 5 records were there before"):
        await _opens(path)


async def test_a_log_pruned_past_its_head_file_while_the_webhook_was_killed_reopens(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    """`audit prune` beside a running webhook that is then killed: the head file names a pruned record."""
    path = tmp_path / "d.db"
    await _log(path, make_record, 5)  # the head file says seq 5
    store = await _opens(path)
    for _ in range(25):
        await store.append(make_record(), deadline=Deadline.after(5))
    with Ledger.open(f"sqlite:///{path}") as ledger:
        ledger.seal(generate_private_key(), segment_records=10, partial=False)
        archive_segments(ledger, tmp_path / "archive")
        pruned = ledger.prune(tmp_path / "archive", keep_records=10, keep_since=None)
    assert [p.checkpoint.last_seq for p in pruned] == [10, 20]
    # Killed: close() never runs, so the head file still names seq 5, now pruned.
    reopened = await _opens(path)
    assert (await reopened.verify()).ok
    await reopened.close()
    await store.close()


async def test_an_edited_record_at_the_end_is_refused(tmp_path: Path, make_record: RecordFactory) -> None:
    path = tmp_path / "d.db"
    await _log(path, make_record, TAIL_RECORDS + 5)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute("UPDATE trtguard_decisions SET body = replace(body, 'prod', 'dev') WHERE seq = 100")
    with pytest.raises(DecisionLogError, match=r"seq 100.*changed"):
        await _opens(path)


async def test_a_damaged_file_is_refused_with_sqlites_own_error(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    path = tmp_path / "d.db"
    await _log(path, make_record, 20)
    data = bytearray(path.read_bytes())
    data[100 : len(data)] = b"\xa5" * (len(data) - 100)
    path.write_bytes(bytes(data))
    with pytest.raises(DecisionLogError, match=r"cannot open the decision log: .*(malformed|not a database)"):
        await _opens(path)


@pytest.mark.postgres
async def test_postgres_refuses_an_edited_record_at_the_end(pg_url: str, make_record: RecordFactory) -> None:
    store = PostgresStore(pg_url)
    await store.open()
    for _ in range(3):
        await store.append(make_record(), deadline=Deadline.after(5))
    await store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE trtguard_decisions DISABLE TRIGGER trtguard_decisions_append_only")
        conn.execute("UPDATE trtguard_decisions SET body = replace(body, 'prod', 'dev') WHERE seq = 2")
    reopened = PostgresStore(pg_url)
    with pytest.raises(DecisionLogError, match=r"seq 2.*changed"):
        await reopened.open()
    await reopened.close()
    accepting = PostgresStore(pg_url, accept_broken=True)
    await accepting.open()
    try:
        assert (await accepting.append(make_record(), deadline=Deadline.after(5))).seq == 4
    finally:
        await accepting.close()


async def test_a_stop_while_another_connection_reads_says_so_and_the_copy_of_the_file_alone_is_a_break(
    tmp_path: Path,
    make_record: RecordFactory,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Attack 36 F1: a reader's snapshot keeps the last records in the WAL at a clean stop; the stop said
    nothing, and a copy of decisions.db alone (with its head file) verified as a shorter chain."""
    path = tmp_path / "d.db"
    await _log(path, make_record, 3)  # closed cleanly: the WAL is empty, the head file says seq 3
    store = SQLiteStore(path, busy_timeout_ms=10)
    await store.open()
    reader = sqlite3.connect(path)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM trtguard_decisions").fetchone() == (3,)
        for _ in range(5):
            await store.append(make_record(), deadline=Deadline.after(5))
        with caplog.at_level("WARNING", logger="decisionlog"):
            await store.close()
        copy = tmp_path / "copy"
        copy.mkdir()
        shutil.copy(path, copy / "d.db")  # the file alone, as a backup of the file would take it
        shutil.copy(head_file(path), head_file(copy / "d.db"))
    finally:
        reader.close()
    assert "WAL not checkpointed: another connection held the log" in caplog.text
    assert json.loads(head_file(path).read_text())["seq"] == 8

    found = SQLiteStore(copy / "d.db", read_only=True)
    await found.open()
    report = await found.verify()
    await found.close()
    assert not report.ok
    assert "the chain ends at seq 3, but 8 records were there before" in report.summary()
    assert "d.db.head" in report.summary()
    original = await _opens(path)  # the original, WAL and all, is whole
    assert (await original.verify()).head_seq == 8
    await original.close()

    from trtguard.cli import main  # noqa: PLC0415 - the command an auditor runs on the copy

    command = ["audit", "verify", "--decision-log", f"sqlite:///{copy / 'd.db'}"]
    assert await asyncio.to_thread(main, command) == 1
    assert "8 records were there before" in capsys.readouterr().out


async def test_a_stop_with_nobody_reading_empties_the_wal_and_says_nothing(
    tmp_path: Path, make_record: RecordFactory, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "d.db"
    with caplog.at_level("WARNING", logger="decisionlog"):
        await _log(path, make_record, 4)
    assert "not checkpointed" not in caplog.text
    assert not path.with_name("d.db-wal").exists() or path.with_name("d.db-wal").stat().st_size == 0
    store = await _opens(path)
    report = await store.verify()
    await store.close()
    assert report.ok and report.head_seq == 4
