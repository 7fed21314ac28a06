"""trtguard/audit/_chain.py: `audit tail --follow` vouches for a new record only as the chain check would:
one whose stored text is not the canonical JSON its hash covers (a key twice) is not followed, though its
values recompute the hash (attack 39a F4)."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from decisionlog import DecisionStore, RecordQuery
from tests.decisionlog import conftest as decisionlog_fixtures
from tests.decisionlog.test_chain import _four
from tests.support.harness import RecordFactory
from trtguard.audit import follows

sqlite_log = decisionlog_fixtures.sqlite_log
make_record = decisionlog_fixtures.make_record


def _edit(url: str, sql: str) -> None:
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
        for name in ("decisions_no_update", "shared_no_update"):
            conn.execute(f"DROP TRIGGER IF EXISTS trtguard_{name}")
        conn.execute(sql)


@pytest.mark.parametrize(
    ("small", "sql"),
    [
        (
            True,
            """UPDATE trtguard_decisions SET body = '{"allowed":false,' || substr(body, 2) WHERE seq = 4""",
        ),
        (
            False,
            """UPDATE trtguard_decisions SET body = '{"allowed":false,' || substr(body, 2) WHERE seq = 4""",
        ),
        (
            False,
            """UPDATE trtguard_shared SET content = '{"engines":[],' || substr(content, 2)"""
            " WHERE ref = (SELECT shared_ref FROM trtguard_decisions WHERE seq = 4)",
        ),
    ],
    ids=["whole body", "own part", "shared part"],
)
async def test_a_followed_record_stored_with_a_key_twice_does_not_follow(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, small: bool, sql: str
) -> None:
    store, url = sqlite_log
    await _four(store, make_record, small=small)
    before = await store.query(RecordQuery())
    assert [follows(b, a) for a, b in zip([None, *before], before, strict=False)] == [True] * 4
    _edit(url, sql)
    after = await store.query(RecordQuery())
    assert [stored.record for stored in after] == [stored.record for stored in before]  # Python reads alike
    shared = "trtguard_shared" in sql  # every record holds the one part
    expected = [not shared, not shared, not shared, False]
    assert [follows(b, a) for a, b in zip([None, *after], after, strict=False)] == expected
