"""Archived segments: one gzip-compressed JSON Lines file per sealed segment, in a folder.

``decisions-<first seq>-<last seq>.jsonl.gz`` holds, one JSON object a line: first the segment's signed
checkpoint (the checkpoint file's object), then each record as an evidence package's ``records.jsonl`` does,
``{"seq", "prev_hash", "hash", "record"}`` with the record in canonical form. Beside it,
``decisions-<first>-<last>.checkpoint.json`` is the checkpoint alone (an anchor for `audit verify`). A folder
is the archive: copy it to an object store with its own tools (versioned, write-once buckets suit it).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from verifier.keys import PublicKey
from webhook.decisionlog import checkpoints
from webhook.decisionlog.chain import ChainReport, ChainVerifier, Row
from webhook.decisionlog.checkpoints import Checkpoint
from webhook.decisionlog.errors import DecisionLogError
from webhook.decisionlog.record import INDEXED_NAMES, DecisionRecord, canonical_json, load_body
from webhook.decisionlog.segments import Ledger, SealedSegment, file_sha256

#: Longest line read back from an archive: a record is at most about 8 MB of canonical JSON.
MAX_LINE_BYTES: Final = 16 * 1024 * 1024


def segment_name(checkpoint: Checkpoint) -> str:
    """The archive's file name for ``checkpoint``'s segment."""
    return f"decisions-{checkpoint.first_seq:012d}-{checkpoint.last_seq:012d}.jsonl.gz"


def archive_segments(ledger: Ledger, folder: Path) -> list[SealedSegment]:
    """Write every sealed segment not yet archived to ``folder``, check each file, then record it.

    Returns the segments archived now, as stored afterwards.
    """
    folder.mkdir(parents=True, exist_ok=True)
    done = []
    for segment in ledger.segments():
        if segment.archive is not None:
            continue
        checkpoint = segment.checkpoint
        name = segment_name(checkpoint)
        path = folder / name
        _write(ledger, checkpoint, path)
        # Read it back as an auditor would before anything relies on it.
        report, _ = verify_segment(path, key=None)
        if not report.ok or report.head_hash != checkpoint.head_hash:
            raise DecisionLogError(
                f"the archive written does not verify: {report.summary()}", location=str(path)
            )
        checkpoints.write_file(checkpoint, folder / name.replace(".jsonl.gz", ".checkpoint.json"))
        digest = file_sha256(path)
        if digest is None:
            raise DecisionLogError("the archive written cannot be read back", location=str(path))
        ledger.mark_archived(segment, name, digest)
        done.append(dataclasses.replace(segment, archive=name, archive_sha256=digest))
    return done


def _write(ledger: Ledger, checkpoint: Checkpoint, path: Path) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as raw:
        # mtime 0: the same segment always gives the same bytes.
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
            out.write(json.dumps(checkpoint.to_json(), sort_keys=True).encode() + b"\n")
            for row in ledger.rows(checkpoint.first_seq - 1, checkpoint.last_seq):
                line = (
                    b'{"hash":"'
                    + row.hash.encode()
                    + b'","prev_hash":"'
                    + row.prev_hash.encode()
                    + b'","record":'
                    + canonical_json(load_body(row.body))
                    + b',"seq":'
                    + str(row.seq).encode()
                    + b"}\n"
                )
                out.write(line)
        raw.flush()
        os.fsync(raw.fileno())
    temporary.replace(path)
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class SegmentCheck:
    """What checking an archived segment found, beside its chain report."""

    checkpoint: Checkpoint
    signature_ok: bool | None
    seconds: float


def verify_segment(path: Path, *, key: PublicKey | None) -> tuple[ChainReport, SegmentCheck]:
    """Recompute an archived segment's chain from its checkpoint's ``prev_hash`` to its ``head_hash``.

    With ``key``, its checkpoint's signature is checked too (``signature_ok``); a segment is vouched for
    when the report is ok and the signature holds.
    """
    started = time.perf_counter()
    lines = _lines(path)
    try:
        header = json.loads(next(lines))
    except (StopIteration, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DecisionLogError(f"not an archived segment: {error}", location=str(path)) from None
    checkpoint = checkpoints.parse(header, where=str(path))
    verifier = ChainVerifier()
    verifier.start_after(checkpoint.first_seq - 1, checkpoint.prev_hash)
    for number, line in enumerate(lines, start=2):
        if not verifier.feed(_row(line, path, number)):
            break
    report = verifier.finish(head_seq=checkpoint.last_seq, head_hash=checkpoint.head_hash)
    signature_ok = None if key is None else checkpoint.verify(key)
    return report, SegmentCheck(checkpoint, signature_ok, time.perf_counter() - started)


def _lines(path: Path) -> Iterator[bytes]:
    try:
        with gzip.open(path, "rb") as handle:
            while line := handle.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES:
                    raise DecisionLogError("a line of the archive is too long", location=str(path))
                yield line
    except (OSError, EOFError) as error:
        raise DecisionLogError(f"cannot read the archived segment: {error}", location=str(path)) from None


def _row(line: bytes, path: Path, number: int) -> Row:
    try:
        data = json.loads(line)
        record = data["record"]
        body = canonical_json(record).decode()
        columns = DecisionRecord.from_json(record).to_json()
        return Row(
            int(data["seq"]),
            body,
            str(data["prev_hash"]),
            str(data["hash"]),
            {name: columns[name] for name in INDEXED_NAMES},
        )
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, DecisionLogError) as e:
        raise DecisionLogError(f"line {number} is not an archived record: {e}", location=str(path)) from None
