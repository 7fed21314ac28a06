"""An archived segment's line is taken only as trtguard writes it: a record whose values recompute its hash
but whose text in the line is other text (a duplicate key, whitespace), or a line laid out otherwise, is a
break at its seq; the fixture archived by an earlier trtguard still verifies."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decisionlog import DecisionStore
from decisionlog._archive import archive_segments, verify_segment
from decisionlog._segments import Ledger
from tests.support.harness import RecordFactory
from verifier.base._deadline import Deadline
from verifier.crypto._keys import PrivateKey

SCHEMA_3_ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "770-schema-3-rotated-log" / "archive"


def _duplicate_in_record(line: bytes) -> bytes:
    return line.replace(b'"record":{', b'"record":{"allowed":false,', 1)


def _spaced_record(line: bytes) -> bytes:
    data = json.loads(line)
    record = json.dumps(data["record"], sort_keys=True).encode()
    head, _, _ = line.partition(b'"record":')
    return head + b'"record":' + record + b',"seq":' + str(data["seq"]).encode() + b"}\n"


def _spaced_frame(line: bytes) -> bytes:
    return line.replace(b',"seq":', b', "seq": ', 1)


def _duplicate_seq(line: bytes) -> bytes:
    data = json.loads(line)
    return line.replace(b'{"hash":', b'{"seq":0,"hash":', 1) if data["seq"] else line


EDITS: dict[str, Callable[[bytes], bytes]] = {
    "duplicate key in the record": _duplicate_in_record,
    "whitespace in the record": _spaced_record,
    "whitespace around it": _spaced_frame,
    "duplicate key in the line": _duplicate_seq,
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
async def test_a_record_in_an_archive_line_as_other_text_is_a_break_at_its_seq(
    sqlite_log: tuple[DecisionStore, str],
    make_record: RecordFactory,
    key: PrivateKey,
    tmp_path: Path,
    edit: Callable[[bytes], bytes],
) -> None:
    store, url = sqlite_log
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(3):
        await store.append(make_record(time=start + timedelta(minutes=i)), deadline=Deadline.after(5))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=3, partial=False)
        [segment] = archive_segments(ledger, tmp_path)
    assert segment.archive is not None
    path = tmp_path / segment.archive
    report, _ = verify_segment(path, key=key.public_key())
    assert report.ok, report.summary()
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"hash":') and b'"seq":2}' in line)
    edited = edit(lines[at])
    assert edited != lines[at] and json.loads(edited)["record"] == json.loads(lines[at])["record"]
    lines[at] = edited
    path.write_bytes(gzip.compress(b"".join(lines)))
    report, _ = verify_segment(path, key=key.public_key())
    assert report.first_break is not None and report.first_break.seq == 2, report.summary()
    assert "not the canonical JSON (RFC 8785) its hash covers" in report.first_break.problem
    if edit is _duplicate_in_record:
        assert "the key 'allowed' appears twice" in report.first_break.problem


def test_segments_an_earlier_trtguard_archived_still_verify() -> None:
    paths = sorted(SCHEMA_3_ARCHIVE.glob("*.jsonl.gz"))
    assert paths
    for path in paths:
        report, _ = verify_segment(path, key=None)
        assert report.ok, report.summary()
