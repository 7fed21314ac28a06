"""One archived segment file read back (the format: :mod:`decisionlog._archive`): its checkpoint, its records
checked against it, the carried state it starts from.

Apart from the archive's writing so that the ledger (:mod:`decisionlog._segments`), which reads a pruned
segment's records back from its file, does not import the module that archives the ledger's segments.
"""

from __future__ import annotations

import gzip
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from decisionlog import _checkpoints as checkpoints
from decisionlog._body_json import canonical_object, unique_json
from decisionlog._carried import CarriedState, state_from_json
from decisionlog._chain import ChainReport, ChainVerifier, Row
from decisionlog._checkpoints import Checkpoint
from decisionlog._errors import DecisionLogError
from decisionlog._record import INDEXED_NAMES, DecisionRecord, canonical_json

#: How the line of the carried state a segment starts from begins (canonical JSON: its only key).
_CARRIED_BEFORE: Final = b'{"carried_before":'
#: Longest line read back from an archive: a record is at most about 8 MB of canonical JSON.
MAX_LINE_BYTES: Final = 16 * 1024 * 1024


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


def check_segment(path: Path) -> tuple[ChainReport, SegmentCheck]:
    """Recompute an archived segment's chain from its checkpoint's ``prev_hash`` to its ``head_hash``, and
    its carried state from ``prev_carried_hash`` to ``carried_hash``; its signature is not checked
    (``signature_ok`` None: :func:`decisionlog._archive.verify_segment` checks it with a key).
    """
    started = time.perf_counter()
    lines = segment_lines(path)
    checkpoint = segment_header(next(lines, None), path)
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
    seconds = time.perf_counter() - started
    return report, SegmentCheck(checkpoint, None, seconds, carried_ok, problem)


def segment_rows(path: Path, checkpoint: Checkpoint) -> Iterator[Row]:
    """The records of the archived segment of ``checkpoint``, once the whole file is checked against it."""
    report, check = check_segment(path)
    if check.checkpoint.statement() != checkpoint.statement() or not report.ok or check.carried_ok is False:
        raise DecisionLogError(
            f"the archive is not the segment of seq {checkpoint.first_seq}…{checkpoint.last_seq}: "
            f"{check.carried_problem or report.summary()}",
            location=str(path),
        )
    lines = segment_lines(path)
    next(lines, None)
    for number, line in enumerate(lines, start=2):
        if number == 2 and line.startswith(_CARRIED_BEFORE):
            continue
        yield _row(line, path, number)[0]


def segment_header(line: bytes | None, path: Path) -> Checkpoint:
    """The checkpoint an archived segment file starts with (its first ``line``), exactly as archived: the
    checkpoint file's object as ``json.dumps`` writes it with sorted keys (``decisionlog._archive``)."""
    try:
        header = unique_json(line if line is not None else b"", what="line 1", where=str(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DecisionLogError(f"not an archived segment: {error}", location=str(path)) from None
    checkpoint = checkpoints.parse(header, where=str(path))
    if line != json.dumps(checkpoint.to_json(), sort_keys=True).encode() + b"\n":
        raise DecisionLogError(
            "line 1 is not the checkpoint as trtguard archives it: other text for the same values "
            "(whitespace, order of keys, escapes); it was changed",
            location=str(path),
        )
    return checkpoint


def _carried_before(
    checkpoint: Checkpoint, line: bytes | None, path: Path
) -> tuple[CarriedState | None, str | None, bool]:
    """The carried state the segment starts from (its second ``line``), what is wrong with it, if anything,
    and whether the line was it (else it is the first record).

    A format-2 segment archived before workloads were keyed by API group holds a state of that form there:
    read past, unchecked (nothing reads it any more); one archived since holds none."""
    if not checkpoint.signs_carried:
        earlier = checkpoint.prev_carried_hash is not None and (line or b"").startswith(_CARRIED_BEFORE)
        if earlier:
            try:
                _carried_line(line or b"", path)
            except DecisionLogError as error:
                what = f"line 2 is not the carried state as trtguard archived it: {error.message}"
                raise DecisionLogError(what, location=str(path)) from None
        return None, None, earlier
    try:
        state = state_from_json(_carried_line(line or b"", path), where=f"{path}:2")
    except DecisionLogError as error:
        what = f"line 2 is not the carried state the segment starts from: {error.message}"
        return CarriedState(), what, True
    if state.digest() != checkpoint.prev_carried_hash:
        return state, "the carried state the segment starts from is not the one the checkpoint signs", True
    return state, None, True


def _carried_line(line: bytes, path: Path) -> object:
    """``carried_before`` of a segment's second line, which must be exactly its canonical JSON, that object
    alone: a line that held more (a record) would be read otherwise by a reader of the lines."""
    data = canonical_object(line.removesuffix(b"\n"), what="the line", where=f"{path}:2")
    if (others := sorted(set(data) - {"carried_before"})) or "carried_before" not in data:
        raise DecisionLogError(
            f"the line holds other members than carried_before ({', '.join(others)})"
            if others
            else "the line holds no carried_before",
            location=f"{path}:2",
        )
    return data["carried_before"]


def segment_lines(path: Path) -> Iterator[bytes]:
    """The lines of an archived segment file, each at most ``MAX_LINE_BYTES``."""
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
        seq, prev_hash, hash_ = int(data["seq"]), str(data["prev_hash"]), str(data["hash"])
        # The record's text as the line holds it, where the line is laid out as trtguard writes it (see
        # decisionlog._archive): the chain check takes it only as the canonical JSON its hash covers.
        head = f'{{"hash":"{hash_}","prev_hash":"{prev_hash}","record":'.encode()
        tail = f',"seq":{seq}}}\n'.encode()
        framed = line.startswith(head) and line.endswith(tail) and len(line) > len(head) + len(tail)
        row = Row(
            seq,
            line[len(head) : -len(tail)].decode() if framed else body,
            prev_hash,
            hash_,
            {**{name: columns[name] for name in INDEXED_NAMES}, "api_group": decision.api_group},
            framed=framed,
        )
        return row, decision
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, DecisionLogError) as e:
        raise DecisionLogError(f"line {number} is not an archived record: {e}", location=str(path)) from None
