"""An archived segment's line is taken only as trtguard writes it: a record whose values recompute its hash
but whose text in the line is other text (a duplicate key, whitespace), or a line laid out otherwise, is a
break at its seq; the fixture archived by an earlier trtguard still verifies. Its header (line 1) and carried
state (line 2) too are taken only as archived (attack 39a F1, F2)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decisionlog import DecisionLogError, DecisionStore
from decisionlog._archive import archive_segments, verify_archive, verify_segment
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


async def _archived(
    store: DecisionStore, url: str, make_record: RecordFactory, key: PrivateKey, folder: Path
) -> Path:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(3):
        await store.append(make_record(time=start + timedelta(minutes=i)), deadline=Deadline.after(5))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=3, partial=False)
        [segment] = archive_segments(ledger, folder)
    assert segment.archive is not None
    return folder / segment.archive


def _edit_line(path: Path, number: int, edit: Callable[[bytes], bytes]) -> None:
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    edited = edit(lines[number - 1])
    assert edited != lines[number - 1]
    lines[number - 1] = edited
    path.write_bytes(gzip.compress(b"".join(lines)))


HEADER_EDITS: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "a first last_seq": (
        lambda line: line.replace(b'"last_seq": 3,', b'"last_seq": 2, "last_seq": 3,', 1),
        "the key 'last_seq' appears twice in one object",
    ),
    "compact": (
        lambda line: json.dumps(json.loads(line), sort_keys=True, separators=(",", ":")).encode() + b"\n",
        "line 1 is not the checkpoint as trtguard archives it",
    ),
    "a member beside checkpoint and signature": (
        lambda line: line.replace(b'{"checkpoint": ', b'{"carried_before": [], "checkpoint": ', 1),
        "members other than checkpoint and signature (carried_before)",
    ),
}


@pytest.mark.parametrize("edit", HEADER_EDITS.values(), ids=HEADER_EDITS.keys())
async def test_a_segment_header_not_as_archived_is_refused_naming_why(
    sqlite_log: tuple[DecisionStore, str],
    make_record: RecordFactory,
    key: PrivateKey,
    tmp_path: Path,
    edit: tuple[Callable[[bytes], bytes], str],
) -> None:
    """Attack 39a F1: a first ``last_seq`` in line 1 verified (``--archive SEGMENT`` and ``FOLDER``)."""
    store, url = sqlite_log
    path = await _archived(store, url, make_record, key, tmp_path)
    change, why = edit
    _edit_line(path, 1, change)
    with pytest.raises(DecisionLogError) as caught:
        verify_segment(path, key=key.public_key())
    assert why in caught.value.message and caught.value.location == str(path)
    _, problems = verify_archive(tmp_path, key=key.public_key())
    assert any(why in problem for problem in problems), problems


async def test_a_checkpoint_file_of_an_archive_with_a_key_twice_is_a_problem_of_the_archive(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = sqlite_log
    path = await _archived(store, url, make_record, key, tmp_path)
    beside = path.with_name(path.name.replace(".jsonl.gz", ".checkpoint.json"))
    beside.write_text(beside.read_text().replace('"count": 3,', '"count": 2, "count": 3,', 1))
    _, problems = verify_archive(tmp_path, key=key.public_key())
    assert any("the key 'count' appears twice" in problem for problem in problems), problems


CARRIED_EDITS: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "a whole record beside it": (
        lambda line: line[:-2] + b',"hash":"' + b"0" * 64 + b'","record":{"allowed":false},"seq":1}\n',
        "the line holds other members than carried_before (hash, record, seq)",
    ),
    "a first carried_before": (
        lambda line: line.replace(b'{"carried_before":', b'{"carried_before":[],"carried_before":', 1),
        "the key 'carried_before' appears twice",
    ),
    "spaced": (
        lambda line: line.replace(b'{"carried_before":', b'{"carried_before": ', 1),
        "other text for the same values",
    ),
}


@pytest.mark.parametrize("edit", CARRIED_EDITS.values(), ids=CARRIED_EDITS.keys())
async def test_a_carried_before_line_that_is_not_exactly_its_canonical_json_fails_the_carried_state(
    sqlite_log: tuple[DecisionStore, str],
    make_record: RecordFactory,
    key: PrivateKey,
    tmp_path: Path,
    edit: tuple[Callable[[bytes], bytes], str],
) -> None:
    """Attack 39a F2: line 2 carried a whole fake record beside ``carried_before``, and verified."""
    store, url = sqlite_log
    path = await _archived(store, url, make_record, key, tmp_path)
    assert gzip.decompress(path.read_bytes()).splitlines()[1] == b'{"carried_before":[]}'
    change, why = edit
    _edit_line(path, 2, change)
    _, check = verify_segment(path, key=key.public_key())
    assert check.carried_ok is False and check.carried_problem is not None
    assert check.carried_problem.startswith("line 2 is not the carried state the segment starts from")
    assert why in check.carried_problem
    _, problems = verify_archive(tmp_path, key=key.public_key())
    assert any(why in problem for problem in problems), problems


def test_a_format_2_segments_carried_line_with_more_than_it_is_refused(tmp_path: Path) -> None:
    """A segment of format 2 (the fixture) has its earlier carried state on line 2, read past: it too must
    be exactly ``{"carried_before": …}`` as archived."""
    [source] = [p for p in SCHEMA_3_ARCHIVE.glob("*.jsonl.gz") if p.name.startswith("decisions-000000000003")]
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes())
    report, _ = verify_segment(path, key=None)
    assert report.ok, report.summary()
    _edit_line(path, 2, lambda line: line[:-2] + b',"seq":3}\n')
    with pytest.raises(DecisionLogError) as caught:
        verify_segment(path, key=None)
    assert "line 2 is not the carried state as trtguard archived it" in caught.value.message
    assert "other members than carried_before (seq)" in caught.value.message
