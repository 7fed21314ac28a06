"""Archived segments: one gzip-compressed JSON Lines file per sealed segment, in a folder.

``decisions-<first seq>-<last seq>.jsonl.gz`` holds, one JSON object a line: first the segment's signed
checkpoint (the checkpoint file's object), then each record as an evidence package's ``records.jsonl`` does,
``{"seq", "prev_hash", "hash", "record"}`` with the record in canonical form; a segment whose checkpoint is
of format 3 has, between the two, ``{"carried_before": [...]}``: change control's carried state the segment
starts from (:mod:`decisionlog._carried`), so that the state after it can be checked against the
checkpoint from the file alone. (A segment of format 2 archived before workloads were keyed by API group
has the state of that form there: it is read past, as nothing reads it any more.) Beside it,
``decisions-<first>-<last>.checkpoint.json`` is the checkpoint alone (an anchor for `audit verify`). A folder
is the archive: copy it to an object store with its own tools (versioned, write-once buckets suit it).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import time
from pathlib import Path

from decisionlog import _checkpoints as checkpoints
from decisionlog._archived_segment import SegmentCheck, check_segment, segment_header, segment_lines
from decisionlog._carried import CarriedState
from decisionlog._chain import ChainReport
from decisionlog._checkpoints import Checkpoint
from decisionlog._errors import DecisionLogError
from decisionlog._record import GENESIS_HASH, canonical_json, load_body
from decisionlog._segments import Ledger, SealedSegment, file_sha256
from verifier.crypto import PublicKey


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
        report, check = verify_segment(path, key=None)
        if not report.ok or report.head_hash != checkpoint.head_hash or check.carried_ok is False:
            raise DecisionLogError(
                f"the archive written does not verify: {report.summary()}"
                + ("" if check.carried_ok is not False else f"; {check.carried_problem}"),
                location=str(path),
            )
        checkpoints.write_checkpoint_file(checkpoint, folder / name.replace(".jsonl.gz", ".checkpoint.json"))
        digest = file_sha256(path)
        if digest is None:
            raise DecisionLogError("the archive written cannot be read back", location=str(path))
        ledger.mark_archived(segment, name, digest)
        done.append(dataclasses.replace(segment, archive=name, archive_sha256=digest))
    return done


def _write(ledger: Ledger, checkpoint: Checkpoint, path: Path) -> None:
    temporary = path.with_name(path.name + ".tmp")
    carried: CarriedState | None = None
    if checkpoint.signs_carried:
        first = checkpoint.first_seq == 1
        carried = CarriedState() if first else ledger.carried_state(checkpoint.first_seq - 1)
        if carried.digest() != checkpoint.prev_carried_hash:
            raise DecisionLogError(
                f"the carried state stored through seq {checkpoint.first_seq - 1} does not match the "
                f"checkpoint of seq {checkpoint.first_seq}…{checkpoint.last_seq}: not archived",
                location=ledger.where,
                hint="run `trtguard audit verify --key …`: trtguard_carried was changed",
            )
    with temporary.open("wb") as raw:
        # mtime 0: the same segment always gives the same bytes.
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
            out.write(json.dumps(checkpoint.to_json(), sort_keys=True).encode() + b"\n")
            if carried is not None:
                out.write(canonical_json({"carried_before": carried.to_json()}) + b"\n")
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


def verify_segment(path: Path, *, key: PublicKey | None) -> tuple[ChainReport, SegmentCheck]:
    """Recompute an archived segment's chain from its checkpoint's ``prev_hash`` to its ``head_hash``, and
    its carried state from ``prev_carried_hash`` to ``carried_hash``.

    With ``key``, its checkpoint's signature is checked too (``signature_ok``); a segment is vouched for
    when the report is ok, the carried state checks and the signature holds.
    """
    started = time.perf_counter()
    report, check = check_segment(path)
    signature_ok = None if key is None else check.checkpoint.verify(key)
    seconds = time.perf_counter() - started
    return report, dataclasses.replace(check, signature_ok=signature_ok, seconds=seconds)


def checkpoint_chain_problems(
    checkpoints: list[Checkpoint], *, key: PublicKey, through_seq: int | None = None
) -> list[str]:
    """What breaks the chain of ``checkpoints`` (any order): from seq 1 on, each signed by ``key`` and
    linked to the one before (``first_seq`` and ``prev_hash``), none missing, reaching ``through_seq`` (the
    seq a pruned live log starts after) when given."""
    problems: list[str] = []
    previous: Checkpoint | None = None
    for checkpoint in sorted(checkpoints, key=lambda c: c.first_seq):
        where = f"the checkpoint of seq {checkpoint.first_seq}…{checkpoint.last_seq}"
        expected_seq = 1 if previous is None else previous.last_seq + 1
        expected_hash = GENESIS_HASH if previous is None else previous.head_hash
        if checkpoint.first_seq > expected_seq:
            after = "" if previous is None else f" (after the checkpoint of seq …{previous.last_seq})"
            problems.append(
                f"the checkpoints of seq {expected_seq}…{checkpoint.first_seq - 1} are missing{after}: "
                "segments and their checkpoints were removed"
            )
        elif checkpoint.first_seq < expected_seq:
            problems.append(f"{where} overlaps the one before it (which ends at seq {expected_seq - 1})")
        elif checkpoint.prev_hash != expected_hash:
            problems.append(f"{where} does not link to the one before it (prev_hash)")
        if not checkpoint.verify(key):
            problems.append(f"{where} is not signed by --key")
        previous = checkpoint
    last = 0 if previous is None else previous.last_seq
    if through_seq is not None and last < through_seq:
        problems.append(
            f"the checkpoints of seq {last + 1}…{through_seq} are missing: the live log starts after seq "
            f"{through_seq}, the archive ends at seq {last}"
        )
    return problems


def verify_archive(
    folder: Path,
    *,
    key: PublicKey,
    stored: list[SealedSegment] | None = None,
    through_seq: int | None = None,
) -> tuple[int, list[str]]:
    """Check an archive folder as a whole: (records checked, problems).

    Every checkpoint from seq 1 on must be there, signed by ``key`` and linked (see
    :func:`checkpoint_chain_problems`), through ``through_seq`` (the seq the live log was pruned up to); for
    each, its segment file must be there and verify against it (chain, carried state). ``stored`` are the
    live log's own checkpoints: each archived one must be in the folder, with the digest recorded for it.
    A segment deleted with its checkpoint file thus leaves a gap in the chain, or a stored checkpoint whose
    file is missing.
    """
    problems: list[str] = []
    found: dict[int, Checkpoint] = {}
    for path in sorted(folder.glob("decisions-*.checkpoint.json")):
        try:
            checkpoint = checkpoints.read_checkpoint_file(path)
        except DecisionLogError as error:
            problems.append(f"{path.name}: {error.message}")
            continue
        found[checkpoint.last_seq] = checkpoint
    for segment in stored or []:
        if segment.archive is None and not segment.pruned:
            continue
        checkpoint = segment.checkpoint
        kept = found.setdefault(checkpoint.last_seq, checkpoint)
        if kept.statement() != checkpoint.statement():
            problems.append(
                f"the checkpoint file of seq …{checkpoint.last_seq} is not the checkpoint the log stores"
            )
    for path in sorted(folder.glob("decisions-*.jsonl.gz")):
        try:
            header = segment_header(next(segment_lines(path), None), path)
        except DecisionLogError as error:
            problems.append(f"{path.name}: {error.message}")
            continue
        found.setdefault(header.last_seq, header)
    problems += checkpoint_chain_problems(list(found.values()), key=key, through_seq=through_seq)
    digests = {s.checkpoint.last_seq: s.archive_sha256 for s in stored or [] if s.archive_sha256}
    records = 0
    for last_seq in sorted(found):
        checkpoint = found[last_seq]
        path = folder / segment_name(checkpoint)
        if not path.is_file():
            problems.append(f"the segment of seq {checkpoint.first_seq}…{last_seq} is missing ({path.name})")
            continue
        if (digest := digests.get(last_seq)) is not None and file_sha256(path) != digest:
            problems.append(f"{path.name} is not the file archived (its SHA-256 differs from the one stored)")
        try:
            report, check = verify_segment(path, key=None)
        except DecisionLogError as error:
            problems.append(f"{path.name}: {error.message}")
            continue
        records += report.records
        if check.checkpoint.statement() != checkpoint.statement():
            problems.append(f"{path.name} holds another checkpoint than the one of seq …{last_seq}")
        if not report.ok:
            problems.append(f"{path.name}: {report.summary()}")
        if check.carried_ok is False:
            problems.append(f"{path.name}: change control's carried state: {check.carried_problem}")
    return records, problems
