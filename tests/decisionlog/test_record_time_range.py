"""decisionlog/_record.py: a time of a valid RFC 3339 form that UTC cannot hold (year 1 ahead of UTC, 9999
behind it) is "not a decision record", a break naming its seq, not an OverflowError (attack 39b F4)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from decisionlog import DecisionLogError, DecisionRecord, RecordQuery, SQLiteStore, chain_hash
from trtguard.audit.package._records import RecordCollector
from trtguard.audit.package.contents import ChainScope
from trtguard.audit.package.selection import Selection
from verifier.base._deadline import Deadline

OUT_OF_RANGE = ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00")


def _record(uid: str) -> DecisionRecord:
    return DecisionRecord(
        uid=uid,
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        allowed=True,
        reason="ok",
        namespace="prod",
        name="a",
    )


@pytest.mark.parametrize("time", OUT_OF_RANGE)
def test_from_json_of_a_time_utc_cannot_hold_is_not_a_decision_record(time: str) -> None:
    data = _record("u").to_json()
    data["time"] = time
    with pytest.raises(DecisionLogError, match=r"not a decision record: time .* is out of range"):
        DecisionRecord.from_json(data)


class _Spool:
    def write(self, line: bytes) -> None:
        pass


@pytest.mark.parametrize("time", OUT_OF_RANGE)
async def test_verify_names_the_record_whose_time_utc_cannot_hold(tmp_path: Path, time: str) -> None:
    store = SQLiteStore(tmp_path / "d.db")
    await store.open()
    for uid in ("u1", "u2"):
        await store.append(_record(uid), deadline=Deadline.after(5))
    [stored] = await store.query(RecordQuery(after_seq=0, limit=1))
    whole = stored.record.to_json()
    whole["time"] = time
    with sqlite3.connect(store.path) as conn:
        body, prev = conn.execute("SELECT body, prev_hash FROM trtguard_decisions WHERE seq = 1").fetchone()
        data = json.loads(body)
        data["time"] = time
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute(
            "UPDATE trtguard_decisions SET body = ?, hash = ? WHERE seq = 1",
            (json.dumps(data), chain_hash(prev, whole)),
        )
    try:
        collector = RecordCollector(Selection.workload("prod/a"), ChainScope.SEGMENT, _Spool(), frozenset())  # type: ignore[arg-type]
        for report in (await store.verify(), await store.verify(collector)):
            assert report.first_break is not None
            assert report.first_break.seq == 1
            assert "not a decision record" in report.first_break.problem
            assert "out of range" in report.first_break.problem
    finally:
        await store.close()
