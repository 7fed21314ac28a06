"""decisionlog/_segments.py and archive.py: seal, archive and prune on real SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from decisionlog import DecisionLogError, DecisionStore
from decisionlog._archive import archive_segments, verify_segment
from decisionlog._segments import Ledger
from tests.support.harness import RecordFactory
from verifier.base._deadline import Deadline
from verifier.crypto._keys import PrivateKey


async def _append(store: DecisionStore, make_record: RecordFactory, n: int, start: datetime) -> None:
    for i in range(n):
        record = make_record(time=start + timedelta(minutes=i))
        await store.append(record, deadline=Deadline.after(5))


async def test_seal_archive_prune_and_the_rest_still_verifies(
    log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = log
    old = datetime(2026, 1, 1, tzinfo=UTC)
    await _append(store, make_record, 25, old)
    folder = tmp_path / "archive"
    with Ledger.open(url) as ledger:
        sealed = ledger.seal(key, segment_records=10, partial=False)
        assert [(c.first_seq, c.last_seq) for c in sealed] == [(1, 10), (11, 20)]
        assert all(c.verify(key.public_key()) for c in sealed)
        assert sealed[1].prev_hash == sealed[0].head_hash
        # Nothing archived yet: the store refuses to prune.
        assert ledger.prune(folder, keep_records=0, keep_since=None) == []
        archived = archive_segments(ledger, folder)
        assert len(archived) == 2
        # Retention keeps the 12 newest records: only the first segment may go.
        pruned = ledger.prune(folder, keep_records=12, keep_since=None)
        assert [s.checkpoint.last_seq for s in pruned] == [10]
    report = await store.verify()
    assert report.ok, report.summary()
    assert (report.records, report.base_seq, report.head_seq) == (15, 10, 25)
    assert "after the checkpoint at seq 10" in report.summary()
    # The archived segment verifies on its own, against its signed checkpoint.
    assert archived[0].archive is not None
    segment_report, check = verify_segment(folder / archived[0].archive, key=key.public_key())
    assert segment_report.ok and check.signature_ok
    assert (segment_report.records, segment_report.head_hash) == (10, sealed[0].head_hash)
    # Appending goes on after pruning, and the chain holds.
    await _append(store, make_record, 3, old + timedelta(days=1))
    assert (await store.verify()).ok


async def test_pruning_only_through_the_controlled_path(
    log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = log
    await _append(store, make_record, 6, datetime(2026, 1, 1, tzinfo=UTC))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=3, partial=False)
        archive_segments(ledger, tmp_path)
    # Sealed and archived: deletable by anyone with write access, but only those (seq 1-6), not seq 7 on.
    await _append(store, make_record, 1, datetime(2026, 1, 2, tzinfo=UTC))
    statements = ("DELETE FROM trtguard_decisions WHERE seq = 7", "DELETE FROM trtguard_checkpoints")
    for statement in statements:
        with pytest.raises((sqlite3.DatabaseError, psycopg.errors.RaiseException), match="append-only"):
            _execute(url, statement)
    with pytest.raises((sqlite3.DatabaseError, psycopg.errors.RaiseException), match="append-only"):
        _execute(url, "UPDATE trtguard_checkpoints SET archive = 'elsewhere' WHERE last_seq = 3")


def _execute(url: str, statement: str) -> None:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(statement)
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(statement)


async def test_a_missing_or_changed_archive_is_not_pruned(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = sqlite_log
    await _append(store, make_record, 4, datetime(2026, 1, 1, tzinfo=UTC))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=2, partial=False)
        [first, _] = archive_segments(ledger, tmp_path)
        assert first.archive == "decisions-000000000001-000000000002.jsonl.gz"
        path = tmp_path / first.archive
        path.write_bytes(path.read_bytes() + b"x")
        with pytest.raises(DecisionLogError, match="missing or changed: not pruned"):
            ledger.prune(tmp_path, keep_records=0, keep_since=None)
    assert (await store.verify()).records == 4


async def test_an_edited_archive_does_not_verify(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = sqlite_log
    await _append(store, make_record, 3, datetime(2026, 1, 1, tzinfo=UTC))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=3, partial=False)
        [segment] = archive_segments(ledger, tmp_path)
    path = tmp_path / "decisions-000000000001-000000000003.jsonl.gz"
    text = gzip.decompress(path.read_bytes()).replace(b'"allowed":true', b'"allowed":false', 1)
    path.write_bytes(gzip.compress(text))
    report, _ = verify_segment(path, key=key.public_key())
    assert report.first_break is not None and report.first_break.seq == 1
    assert segment.checkpoint.last_seq == 3


async def test_a_broken_chain_is_not_sealed(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey
) -> None:
    store, url = sqlite_log
    await _append(store, make_record, 3, datetime(2026, 1, 1, tzinfo=UTC))
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute("UPDATE trtguard_decisions SET namespace = 'x' WHERE seq = 2")
    with (
        Ledger.open(url) as ledger,
        pytest.raises(DecisionLogError, match="not sealed: chain broken at record seq 2"),
    ):
        ledger.seal(key, segment_records=10, partial=True)
