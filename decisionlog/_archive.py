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
import itertools
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from decisionlog import _checkpoints as checkpoints
from decisionlog._carried import CarriedState, state_from_json
from decisionlog._chain import ChainReport, ChainVerifier, Row
from decisionlog._checkpoints import Checkpoint
from decisionlog._errors import DecisionLogError
from decisionlog._record import GENESIS_HASH, INDEXED_NAMES, DecisionRecord, canonical_json, load_body
from decisionlog._segments import Ledger, SealedSegment, file_sha256
from verifier.keys import PublicKey

#: How the line of the carried state a segment starts from begins (canonical JSON: its only key).
_CARRIED_BEFORE: Final = b'{"carried_before":'
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


@dataclass(frozen=True, slots=True)
class SegmentCheck:
    """What checking an archived segment found, beside its chain report.

    ``carried_ok``: the carried state the file starts from has the checkpoint's ``prev_carried_hash``, and
    folded over the records gives its ``carried_hash`` (None for a checkpoint of format 1 or 2, which names
    no carried state of the form kept now).
    """

    checkpoint: Checkpoint
    signature_ok: bool | None
    seconds: float
    carried_ok: bool | None = None
    carried_problem: str | None = None


def verify_segment(path: Path, *, key: PublicKey | None) -> tuple[ChainReport, SegmentCheck]:
    """Recompute an archived segment's chain from its checkpoint's ``prev_hash`` to its ``head_hash``, and
    its carried state from ``prev_carried_hash`` to ``carried_hash``.

    With ``key``, its checkpoint's signature is checked too (``signature_ok``); a segment is vouched for
    when the report is ok, the carried state checks and the signature holds.
    """
    started = time.perf_counter()
    lines = _lines(path)
    checkpoint = _header(next(lines, None), path)
    verifier = ChainVerifier()
    verifier.start_after(checkpoint.first_seq - 1, checkpoint.prev_hash)
    second = next(lines, None)
    carried, problem, read = _carried_before(checkpoint, second, path)
    records = lines if read or second is None else itertools.chain([second], lines)
    for number, line in enumerate(records, start=3 if read else 2):
        row, record = _row(line, path, number)
        if not verifier.feed(row):
            break
        if carried is not None:
            carried.fold(row.seq, record)
    report = verifier.finish(head_seq=checkpoint.last_seq, head_hash=checkpoint.head_hash)
    if carried is not None and problem is None and report.ok and carried.digest() != checkpoint.carried_hash:
        problem = "the carried state after the records is not the one the checkpoint signs"
    carried_ok = problem is None if checkpoint.signs_carried else None
    signature_ok = None if key is None else checkpoint.verify(key)
    seconds = time.perf_counter() - started
    return report, SegmentCheck(checkpoint, signature_ok, seconds, carried_ok, problem)


def segment_rows(path: Path, checkpoint: Checkpoint) -> Iterator[Row]:
    """The records of the archived segment of ``checkpoint``, once the whole file is checked against it."""
    report, check = verify_segment(path, key=None)
    if check.checkpoint.statement() != checkpoint.statement() or not report.ok or check.carried_ok is False:
        raise DecisionLogError(
            f"the archive is not the segment of seq {checkpoint.first_seq}…{checkpoint.last_seq}: "
            f"{check.carried_problem or report.summary()}",
            location=str(path),
        )
    lines = _lines(path)
    next(lines, None)
    for number, line in enumerate(lines, start=2):
        if number == 2 and line.startswith(_CARRIED_BEFORE):
            continue
        yield _row(line, path, number)[0]


def _header(line: bytes | None, path: Path) -> Checkpoint:
    try:
        header = json.loads(line if line is not None else b"")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DecisionLogError(f"not an archived segment: {error}", location=str(path)) from None
    return checkpoints.parse(header, where=str(path))


def _carried_before(
    checkpoint: Checkpoint, line: bytes | None, path: Path
) -> tuple[CarriedState | None, str | None, bool]:
    """The carried state the segment starts from (its second ``line``), what is wrong with it, if anything,
    and whether the line was it (else it is the first record).

    A format-2 segment archived before workloads were keyed by API group holds a state of that form there:
    read past, unchecked (nothing reads it any more); one archived since holds none."""
    if not checkpoint.signs_carried:
        earlier = checkpoint.prev_carried_hash is not None and (line or b"").startswith(_CARRIED_BEFORE)
        return None, None, earlier
    try:
        data = json.loads(line or b"")
        state = state_from_json(data["carried_before"], where=f"{path}:2")
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, DecisionLogError) as error:
        detail = error.message if isinstance(error, DecisionLogError) else repr(error)
        return CarriedState(), f"line 2 is not the carried state the segment starts from: {detail}", True
    if state.digest() != checkpoint.prev_carried_hash:
        return state, "the carried state the segment starts from is not the one the checkpoint signs", True
    return state, None, True


def _lines(path: Path) -> Iterator[bytes]:
    try:
        with gzip.open(path, "rb") as handle:
            while line := handle.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES:
                    raise DecisionLogError("a line of the archive is too long", location=str(path))
                yield line
    except (OSError, EOFError) as error:
        raise DecisionLogError(f"cannot read the archived segment: {error}", location=str(path)) from None


def _row(line: bytes, path: Path, number: int) -> tuple[Row, DecisionRecord]:
    try:
        data = json.loads(line)
        record = data["record"]
        body = canonical_json(record).decode()
        decision = DecisionRecord.from_json(record)
        columns = decision.to_json()
        row = Row(
            int(data["seq"]),
            body,
            str(data["prev_hash"]),
            str(data["hash"]),
            {**{name: columns[name] for name in INDEXED_NAMES}, "api_group": decision.api_group},
        )
        return row, decision
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, DecisionLogError) as e:
        raise DecisionLogError(f"line {number} is not an archived record: {e}", location=str(path)) from None


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
            header = _header(next(_lines(path), None), path)
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
