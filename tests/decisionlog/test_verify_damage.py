"""``verify`` on a damaged log: a missing chain head or table is a clear error, an edited record is named."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import psycopg
import pytest
import rfc8785

from decisionlog import (
    DecisionLogError,
    DecisionStore,
    PostgresStore,
    RecordQuery,
    SQLiteStore,
    chain_hash,
    link_hash,
)
from tests.support.harness import RecordFactory
from trtguard.cli import main
from verifier.base._deadline import Deadline


async def _five(store: DecisionStore, make_record: RecordFactory) -> list[str]:
    uids = []
    for i in range(1, 6):
        record = make_record(allowed=(i != 3), reason="x")
        await store.append(record, deadline=Deadline.after(5))
        uids.append(record.uid)
    return uids


async def _rehash(store: DecisionStore, body: str, prev: str) -> tuple[str, str]:
    """Seq 3 admitted after the fact, with its own hash recomputed: (new stored body, new hash).

    The stored body may lack the parts kept in the shared table; the hash covers the whole record.
    """
    [stored] = await store.query(RecordQuery(after_seq=2, limit=1))
    whole = stored.record.to_json()
    whole["allowed"] = True
    data = json.loads(body)
    data["allowed"] = True
    return json.dumps(data), chain_hash(prev, whole)


async def _sqlite_log(tmp_path: Path, make_record: RecordFactory) -> tuple[SQLiteStore, list[str]]:
    store = SQLiteStore(tmp_path / "d.db")
    await store.open()
    uids = await _five(store, make_record)
    await store.close()
    return store, uids


def _sqlite_edit(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute("DROP TRIGGER trtguard_decisions_no_delete")
        for statement in statements:
            conn.execute(statement)


async def test_an_edited_record_with_a_recomputed_hash_is_named(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    store, uids = await _sqlite_log(tmp_path, make_record)
    with sqlite3.connect(store.path) as conn:
        body, prev = conn.execute("SELECT body, prev_hash FROM trtguard_decisions WHERE seq = 3").fetchone()
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        new_body, new_hash = await _rehash(store, body, prev)
        conn.execute(
            "UPDATE trtguard_decisions SET body = ?, hash = ?, allowed = 1 WHERE seq = 3",
            (new_body, new_hash),
        )
    report = await store.verify()
    assert report.first_break is not None
    assert (report.first_break.seq, report.first_break.uid) == (3, uids[2])
    assert "changed after seq 4 was written" in report.first_break.problem


async def test_a_missing_chain_head_is_a_break_not_a_traceback(
    tmp_path: Path, make_record: RecordFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = await _sqlite_log(tmp_path, make_record)
    with sqlite3.connect(store.path) as conn:
        conn.execute("DELETE FROM trtguard_chain_head")
    report = await store.verify()
    assert report.first_break is not None
    assert report.first_break.seq == 6
    assert "chain-head row" in report.first_break.problem
    assert (
        await asyncio.to_thread(main, ["audit", "verify", "--decision-log", f"sqlite:///{store.path}"]) == 1
    )
    assert "chain-head row (trtguard_chain_head, id 1) is missing" in capsys.readouterr().out


async def test_a_dropped_table_is_a_clear_error(
    tmp_path: Path, make_record: RecordFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = await _sqlite_log(tmp_path, make_record)
    _sqlite_edit(store.path, "DROP TABLE trtguard_decisions")
    with pytest.raises(DecisionLogError, match="no such table: trtguard_decisions"):
        await store.verify()
    status = await asyncio.to_thread(main, ["audit", "verify", "--decision-log", f"sqlite:///{store.path}"])
    err = capsys.readouterr().err
    assert status == 1
    assert "no such table: trtguard_decisions" in err
    assert "Traceback" not in err


@pytest.mark.postgres
async def test_postgres_damage(pg_url: str, make_record: RecordFactory) -> None:
    store = PostgresStore(pg_url)
    await store.open()
    try:
        uids = await _five(store, make_record)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE trtguard_decisions DISABLE TRIGGER USER")
            row = conn.execute("SELECT body, prev_hash FROM trtguard_decisions WHERE seq = 3").fetchone()
            assert row is not None
            new_body, new_hash = await _rehash(store, row[0], row[1])
            conn.execute(
                "UPDATE trtguard_decisions SET body = %s, hash = %s, allowed = true WHERE seq = 3",
                (new_body, new_hash),
            )
        report = await store.verify()
        assert report.first_break is not None
        assert (report.first_break.seq, report.first_break.uid) == (3, uids[2])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DELETE FROM trtguard_chain_head")
        report = await store.verify()
        assert report.first_break is not None and report.first_break.seq == 3
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP TABLE trtguard_decisions")
        with pytest.raises(DecisionLogError, match="holds no trtguard decision log"):
            await store.verify()
    finally:
        await store.close()


async def test_swapped_records_are_named_where_the_order_breaks_not_at_the_intact_one_before(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    """Issue 31: a reorder blamed seq 2, intact, for what the swap of seq 3 and 4 did."""
    store, uids = await _sqlite_log(tmp_path, make_record)
    _sqlite_edit(
        store.path,
        "UPDATE trtguard_decisions SET seq = -3 WHERE seq = 3",
        "UPDATE trtguard_decisions SET seq = 3 WHERE seq = 4",
        "UPDATE trtguard_decisions SET seq = 4 WHERE seq = -3",
    )
    report = await store.verify()
    assert report.first_break is not None
    assert (report.first_break.seq, report.first_break.uid) == (3, uids[3])
    assert "records were reordered" in report.first_break.problem


async def test_a_record_deleted_and_the_later_ones_renumbered_is_named_with_both_readings(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    """Issue 31: a delete-and-renumber said only that the intact seq 2 was changed. The hashes cannot tell
    a deletion after seq 2 from an edit of seq 2 (both recompute): the break names seq 2, the first record the
    chain does not vouch for (so readers mark it and every later one unverified), and says both."""
    store, uids = await _sqlite_log(tmp_path, make_record)
    _sqlite_edit(
        store.path,
        "DELETE FROM trtguard_decisions WHERE seq = 3",
        "UPDATE trtguard_decisions SET seq = seq - 1 WHERE seq > 3",
        "UPDATE trtguard_chain_head SET seq = 4",
    )
    report = await store.verify()
    assert report.first_break is not None
    assert (report.first_break.seq, report.first_break.uid) == (2, uids[1])
    assert "records after it were deleted and the later ones renumbered" in report.first_break.problem
    assert "seq 3 links to" in report.first_break.problem


async def test_the_last_record_edited_and_rehashed_is_named_not_called_removed(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    """Issue 31: with no record after it to link to it, an edited last record was reported as "records at
    the end were removed"; the head row (or an archived segment's checkpoint) names its original hash."""
    store, uids = await _sqlite_log(tmp_path, make_record)
    with sqlite3.connect(store.path) as conn:
        body, prev = conn.execute("SELECT body, prev_hash FROM trtguard_decisions WHERE seq = 5").fetchone()
    data = json.loads(body)
    [stored] = await store.query(RecordQuery(after_seq=4, limit=1))
    whole = stored.record.to_json()
    whole["allowed"], data["allowed"] = (not whole["allowed"],) * 2
    with sqlite3.connect(store.path) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute(
            "UPDATE trtguard_decisions SET body = ?, hash = ?, allowed = ? WHERE seq = 5",
            (json.dumps(data), chain_hash(prev, whole), whole["allowed"]),
        )
    report = await store.verify()
    assert report.first_break is not None
    assert (report.first_break.seq, report.first_break.uid) == (5, uids[4])
    assert "the record was changed and its hash recomputed" in report.first_break.problem


async def test_a_record_with_a_float_verifies_by_rfc_8785_not_by_python_json(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    # Python writes 1e-07 where RFC 8785 writes 1e-7: the fast encoding must not decide for such a record.
    store = SQLiteStore(tmp_path / "d.db")
    await store.open()
    await store.append(make_record(reason="x"), deadline=Deadline.after(5))
    record = make_record(reason="x", violations=({"rule": "r", "score": 1e-07},))
    await store.append(record, deadline=Deadline.after(5))
    await store.close()
    given: list[tuple[int, bytes]] = []
    report = await store.verify(lambda stored, canonical: given.append((stored.seq, canonical)))
    assert report.ok, report.summary()
    assert [seq for seq, _ in given] == [1, 2]
    assert b'"score":1e-7' in given[1][1]
    assert given[1][1] == rfc8785.dumps(record.to_json())
    with sqlite3.connect(store.path) as conn:
        prev = conn.execute("SELECT prev_hash FROM trtguard_decisions WHERE seq = 2").fetchone()[0]
    python = json.dumps(record.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    forged = link_hash(prev, python.encode())
    with sqlite3.connect(store.path) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute(
            "UPDATE trtguard_decisions SET body = ?, hash = ?, shared_ref = NULL WHERE seq = 2",
            (python, forged),
        )
        conn.execute("UPDATE trtguard_chain_head SET hash = ? WHERE id = 1", (forged,))
    given.clear()
    report = await store.verify(lambda stored, canonical: given.append((stored.seq, canonical)))
    assert report.first_break is not None
    assert report.first_break.seq == 2
    assert "stored hash does not match" in report.first_break.problem
    assert [seq for seq, _ in given] == [1]  # a record that does not check goes to no sink


async def test_verify_hands_each_record_with_the_bytes_its_hash_covers(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    store, _ = await _sqlite_log(tmp_path, make_record)
    given: list[tuple[int, bytes, str]] = []
    report = await store.verify(lambda stored, canonical: given.append((stored.seq, canonical, stored.hash)))
    assert report.ok
    stored = await store.query(RecordQuery())
    assert given == [(s.seq, s.record.canonical(), s.hash) for s in stored]
    assert all(link_hash(s.prev_hash, s.record.canonical()) == s.hash for s in stored)


@pytest.mark.parametrize(
    "value",
    [
        '"\\ud800"',  # a lone surrogate
        "123456789012345678901234567890",  # an integer RFC 8785 cannot write
        "1E400",  # a float beyond any double
        "[" * 50_000 + "]" * 50_000,  # nested past the parser's recursion
    ],
)
async def test_a_record_edited_to_hold_what_rfc_8785_cannot_write_is_named_not_a_traceback(
    tmp_path: Path, make_record: RecordFactory, value: str
) -> None:
    # attack 35a F2: such a body made `audit verify` and `evidence export` end in a traceback
    store, _ = await _sqlite_log(tmp_path, make_record)
    with sqlite3.connect(store.path) as conn:
        (body,) = conn.execute("SELECT body FROM trtguard_decisions WHERE seq = 3").fetchone()
        data = json.loads(body)
        data.pop("latency_us", None)
        edited = json.dumps(data)[:-1] + f', "latency_us": {value}}}'
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute("UPDATE trtguard_decisions SET body = ? WHERE seq = 3", (edited,))
    report = await store.verify()
    assert report.first_break is not None
    assert report.first_break.seq == 3
    assert "canonical JSON" in report.first_break.problem or "not JSON" in report.first_break.problem
    assert (
        await asyncio.to_thread(main, ["audit", "verify", "--decision-log", f"sqlite:///{store.path}"]) == 1
    )
