"""Checking a log's head when a writer opens it, so that a broken or reset chain is refused, not extended.

A store that opens an existing log verifies its last :data:`TAIL_RECORDS` records and the chain-head row
(every link, hash and indexed column, and that the last record is the head). An SQLite log also keeps a
*head file* beside it (``decisions.db.head``): the head seen at the last start and clean stop. A log file that
is missing or empty (0 bytes) while its head file exists, or whose chain is shorter than the head file says,
or holds another record at that place, was reset or rolled back, and is refused too. An empty file without a
head file is refused as well: trtguard never leaves one behind, so something else truncated the log.

What the log carries forward for change control (:mod:`decisionlog._carried`) is checked as well: the
state stored through the newest pruned checkpoint must have the digest that checkpoint signs (without the
operator's key here: ``trtguard audit verify --key`` checks the signature), so that rows deleted or changed
by hand, which would make the webhook forget what a workload ran, are refused at start.

``trtguard serve --accept-broken-log`` opens such a log anyway (the problem is logged): for an operator who
has looked at it and chosen to go on (``trtguard audit verify`` shows where the chain breaks).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from decisionlog._body_json import canonical_object
from decisionlog._carried import CarriedState, carried_from_rows
from decisionlog._chain import ChainVerifier, Row
from decisionlog._errors import DecisionLogError
from decisionlog._record import GENESIS_HASH

#: Records at the end of the chain verified when a writer opens a log.
TAIL_RECORDS: Final = 100

ACCEPT_HINT: Final = (
    "restore the log from a backup (docs/decision-log.md), or, to go on writing after this break, start "
    "with --accept-broken-log (chart: decisionLog.acceptBrokenLog); `trtguard audit verify` shows the break"
)


@dataclass(frozen=True, slots=True)
class Head:
    """The chain head: the last record's ``seq`` and ``hash`` (0 and the genesis hash for an empty log)."""

    seq: int
    hash: str


def tail_problem(
    rows: Sequence[Row], head: Head, *, base: tuple[int, str] | None = None, window: int = TAIL_RECORDS
) -> str | None:
    """What is wrong with the log's last records ``rows`` (``seq`` above ``head.seq - window``), or None.

    ``base`` is ``(seq, hash)`` of the last record pruned away (the live chain starts after it), if any.
    """
    base_seq, base_hash = base or (0, GENESIS_HASH)
    first = max(base_seq + 1, head.seq - window + 1)
    if head.seq == base_seq:
        return f"the chain head says seq {head.seq}, but {len(rows)} records follow it" if rows else None
    if not rows or rows[0].seq != first:
        found = f"the first is seq {rows[0].seq}" if rows else "there are none"
        return f"the chain head says seq {head.seq}, but of its last records from seq {first} {found}"
    verifier = ChainVerifier()
    verifier.start_after(first - 1, base_hash if first == base_seq + 1 else rows[0].prev_hash)
    for row in rows:
        if not verifier.feed(row):
            break
    report = verifier.finish(head_seq=head.seq, head_hash=head.hash)
    return None if report.ok else report.summary()


def head_file(log: Path) -> Path:
    """Where the head file of the SQLite log ``log`` lives."""
    return log.with_name(log.name + ".head")


def read_head_file(log: Path) -> Head | None:
    """The head recorded beside ``log``, or None when there is no (readable) head file."""
    try:
        data = json.loads(head_file(log).read_text())
        return Head(int(data["seq"]), str(data["hash"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_head_file(log: Path, head: Head) -> None:
    """Record ``head`` beside ``log`` (atomically: a new file renamed over the old one)."""
    target = head_file(log)
    scratch = target.with_name(target.name + ".tmp")
    try:
        with scratch.open("w") as out:
            json.dump({"seq": head.seq, "hash": head.hash}, out)
            out.flush()
            os.fsync(out.fileno())
        scratch.replace(target)
    finally:
        with contextlib.suppress(OSError):
            scratch.unlink()


def reset_problem(log: Path, recorded: Head | None) -> str | None:
    """Before opening: a log file that is missing or empty where a log was, or None."""
    exists = log.exists()
    if exists and log.stat().st_size == 0:
        return "the decision log file is empty (0 bytes): it was truncated"
    if not exists and recorded is not None and recorded.seq > 0:
        return (
            f"the decision log file is missing, but {head_file(log).name} says it held {recorded.seq} records"
        )
    return None


def rollback_problem(
    head: Head, recorded: Head | None, hash_at_recorded: str | None, base: tuple[int, str] | None = None
) -> str | None:
    """After opening: a chain shorter than the head file says, or with another record at its place.

    ``base`` is the pruned checkpoint the live log starts from (``last_seq``, ``head_hash``): a record the
    head file names may have been pruned since (``audit prune`` beside a webhook that was then killed); it is
    then checked against that checkpoint where it ends there, and otherwise left to the signed checkpoints
    (``trtguard audit verify --key --anchor``).
    """
    if recorded is None or recorded.seq == 0:
        return None
    if base is not None and recorded.seq <= base[0]:
        if recorded.seq == base[0] and recorded.hash != base[1]:
            return f"record seq {recorded.seq} is not the one that was there before: the log was replaced"
        return None
    if head.seq < recorded.seq:
        return (
            f"the chain ends at seq {head.seq}, but {recorded.seq} records were there before: the log was "
            "reset or rolled back"
        )
    if hash_at_recorded != recorded.hash:
        return f"record seq {recorded.seq} is not the one that was there before: the log was replaced"
    return None


def carried_problem(base_statement: str | None, carried_rows: Sequence[Any], *, where: str) -> str | None:
    """What is wrong with the carried state stored through the newest pruned checkpoint, or None.

    ``base_statement`` is that checkpoint's stored statement (None: nothing was pruned); ``carried_rows`` the
    state's rows (``_sql.carried_rows`` at its ``last_seq``). A checkpoint of format 1 or 2 signs no state
    of the form kept now (:attr:`~decisionlog._checkpoints.Checkpoint.signs_carried`).
    """
    if base_statement is None:
        return None
    from decisionlog._checkpoints import CHECKPOINT_TYPE  # noqa: PLC0415 - it loads the key code

    try:
        statement = canonical_object(base_statement, what="the stored checkpoint statement")
        signed = statement.get("carried_hash")
        if statement.get("type") != CHECKPOINT_TYPE or not isinstance(signed, str):
            return None
        state = carried_from_rows(0, True, carried_rows, where=where)
    except DecisionLogError as error:
        return f"the carried state of change control cannot be read: {error.message}"
    if CarriedState(state.workloads).digest() != signed:
        return (
            f"the carried state stored through seq {statement.get('last_seq')} is not the one its checkpoint "
            "signs: trtguard_carried was changed, so the webhook would forget what workloads last ran"
        )
    return None
