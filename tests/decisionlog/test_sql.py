"""decisionlog/_sql.py: a row read as text only where it is text (a body or shared part stored as a BLOB is a
break at its seq, named, not a reader's TypeError or AttributeError: attack 39a F5); the newest pruned
checkpoint's statement taken only as the canonical JSON stored."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from decisionlog import DecisionLogError, DecisionStore, RecordQuery, stored_exact
from decisionlog._sql import pruned_base
from tests.decisionlog.test_chain import _four
from tests.support.harness import RecordFactory


def _as_blob(url: str, sql: str) -> None:
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
        for name in ("decisions_no_update", "shared_no_update"):
            conn.execute(f"DROP TRIGGER IF EXISTS trtguard_{name}")
        conn.execute(sql)


@pytest.mark.parametrize(
    ("small", "sql"),
    [
        (True, "UPDATE trtguard_decisions SET body = CAST(body AS BLOB) WHERE seq = 3"),
        (False, "UPDATE trtguard_decisions SET body = CAST(body AS BLOB) WHERE seq = 3"),
        (
            False,
            "UPDATE trtguard_shared SET content = CAST(content AS BLOB)"
            " WHERE ref = (SELECT shared_ref FROM trtguard_decisions WHERE seq = 3)",
        ),
    ],
    ids=["whole body", "own part", "shared part"],
)
async def test_a_row_stored_as_a_blob_is_a_break_at_its_seq(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, small: bool, sql: str
) -> None:
    store, url = sqlite_log
    uids = await _four(store, make_record, small=small)
    _as_blob(url, sql)
    report = await store.verify()
    # A query still reads it (an investigator needs to see it), from text the chain does not vouch for.
    records = await store.query(RecordQuery())
    brk = report.first_break
    first = 1 if "trtguard_shared" in sql else 3  # the records before share the part
    assert brk is not None and brk.seq == first, report.summary()
    assert brk.uid is None or brk.uid == uids[first - 1]
    assert "it is stored as a BLOB, not as text" in brk.problem
    assert [stored.record.uid for stored in records] == uids
    assert [stored_exact(stored) for stored in records] == [seq != 3 and first == 3 for seq in range(1, 5)]


def test_the_newest_pruned_statement_is_taken_only_as_its_canonical_json() -> None:
    statement = '{"head_hash":"' + "a" * 64 + '","last_seq":6}'
    assert pruned_base([(statement,)]) == (6, "a" * 64)
    with pytest.raises(DecisionLogError, match="the key 'last_seq' appears twice"):
        pruned_base([(statement.replace('"last_seq":6', '"last_seq":9,"last_seq":6'),)])
