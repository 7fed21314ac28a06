"""``trtguard audit verify``: recompute the decision log's hash chain, against signed checkpoints if given.

Without options the live log's chain is recomputed (from genesis, or from the newest checkpoint its records
were pruned up to). ``--key`` checks that checkpoint's signature; ``--anchor CHECKPOINT`` (with ``--key``)
checks the log against a checkpoint kept outside it: the log must still hold the anchor's head, or have been
pruned past it along signed checkpoints that link to it. ``--archive SEGMENT`` checks an archived segment
instead of the live log; ``--archive FOLDER`` checks the archive as a whole: every checkpoint from seq 1 on
present, signed and linked, every segment present and matching its checkpoint, and, with ``--decision-log``,
the checkpoints the log stores all archived there (same file digest) through the seq the live log starts
after.

Change control's carried state (each workload's last admissions, which pruning keeps: docs/decision-log-
storage.md) is checked too: the state stored at the checkpoint the log starts from must have the digest
that checkpoint signs, and folding the live records from it must give, at each later checkpoint, the state
it signs and the state stored there; an archived segment's state is checked from its own file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from trtguard.cli._audit_log import chain_json
from trtguard.cli._commands import Subparsers, add_subcommand

if TYPE_CHECKING:
    from decisionlog import ChainReport, Checkpoint, DecisionStore
    from verifier.crypto import PublicKey


def register(commands: Subparsers, log_flag: Any, format_flag: Any) -> None:
    """Add ``audit verify`` (``log_flag`` and ``format_flag`` add ``audit``'s shared options)."""
    verify = add_subcommand(
        commands,
        "verify",
        help="recompute the hash chain; exit 1 if it is broken",
        description="Recompute the decision log's hash chain (or an archived segment's with --archive). "
        "With --key, the signature of the checkpoint the live log was pruned up to is checked; with "
        "--anchor, the log is checked against a signed checkpoint kept outside it.",
    )
    log_flag(verify)
    verify.add_argument(
        "--key", type=Path, metavar="PUBLIC_KEY", help="the operator's checkpoint public key (PEM)"
    )
    verify.add_argument(
        "--anchor",
        type=Path,
        metavar="CHECKPOINT",
        help="a checkpoint file (from `audit seal` or `audit archive`) the log must agree with; needs --key",
    )
    verify.add_argument(
        "--archive",
        type=Path,
        metavar="SEGMENT",
        help="check this archived segment (decisions-…jsonl.gz) instead of the live log, or this archive "
        "folder as a whole (with --decision-log: against the checkpoints the log stores)",
    )
    format_flag(verify)
    verify.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import read_checkpoint_file  # noqa: PLC0415
    from trtguard.cli._audit_log import read_log  # noqa: PLC0415
    from trtguard.cli._key_files import load_public_key  # noqa: PLC0415
    from verifier.base import InputError  # noqa: PLC0415

    out = out or sys.stdout
    if args.anchor is not None and args.key is None:
        raise InputError("--anchor needs --key: a checkpoint counts only with its signature checked")
    key = load_public_key(args.key) if args.key is not None else None
    anchor = read_checkpoint_file(args.anchor) if args.anchor is not None else None
    if anchor is not None and key is not None and not anchor.verify(key):
        raise InputError(
            "the anchor's signature does not verify with --key",
            location=str(args.anchor),
            hint="pass the public key of the key that sealed the log",
        )
    if args.archive is not None:
        if key is None:
            raise InputError(
                "--archive needs --key: an archived segment counts only with its checkpoint signed"
            )
        if args.archive.is_dir():
            return _verify_archive_folder(args, key, out)
        return _verify_archive(args, key, anchor, out)

    async def work(store: DecisionStore) -> int:
        report = await store.verify()
        problems = _against_checkpoints(args, report, key, anchor) + _carried_problems(args, report)
        _print(args.format, store.description, report, problems, anchor, out, base_signed=key is not None)
        if report.base_seq and key is None and args.format == "text":
            print(
                f"note: the checkpoint at seq {report.base_seq} the log starts from was taken as stored; "
                "pass --key to check that the operator signed it",
                file=out,
            )
        return 0 if report.ok and not problems else 1

    return read_log(args, work)


def _against_checkpoints(
    args: argparse.Namespace,
    report: ChainReport,
    key: PublicKey | None,
    anchor: Checkpoint | None,
) -> list[str]:
    """What does not hold between the live log and its stored checkpoints, the key and the anchor."""
    from decisionlog import Ledger  # noqa: PLC0415
    from trtguard.cli._audit_log import log_url  # noqa: PLC0415

    if not report.ok or (key is None and anchor is None):
        return []
    problems: list[str] = []
    with Ledger.open(log_url(args), read_only=True) as ledger:
        sealed: dict[int, Checkpoint] = {}
        for segment in ledger.segments():
            if segment.checkpoint.last_seq in sealed:
                # Rows are only ever added: a second checkpoint over the same records is a forgery or a fork.
                problems.append(f"two stored checkpoints end at seq {segment.checkpoint.last_seq}")
            sealed[segment.checkpoint.last_seq] = segment.checkpoint
        if report.base_seq:
            base = sealed.get(report.base_seq)
            if base is None or key is None or not base.verify(key):
                problems.append(
                    f"the checkpoint at seq {report.base_seq} the log was pruned up to is not signed by --key"
                )
        if anchor is None:
            return problems
        if anchor.last_seq > report.head_seq:
            return [
                *problems,
                f"the log ends at seq {report.head_seq}, before the anchor's seq {anchor.last_seq}: records "
                "were removed from its end, or the log was reset",
            ]
        if anchor.last_seq > report.base_seq:
            rows = list(ledger.rows(anchor.last_seq - 1, anchor.last_seq))
            if not rows or rows[0].hash != anchor.head_hash:
                problems.append(f"the record at seq {anchor.last_seq} is not the anchor's head")
            return problems
        # Pruned past the anchor: from the anchor itself to the base the log starts from, every stored
        # checkpoint must be signed by the key and link to the one before it; rows anyone with INSERT rights
        # could add prove nothing unsigned.
        previous = anchor
        for seq in sorted(s for s in sealed if anchor.last_seq < s <= report.base_seq):
            checkpoint = sealed[seq]
            if key is None or not checkpoint.verify(key):
                problems.append(f"the checkpoint at seq {seq} is not signed by --key")
                return problems
            if checkpoint.first_seq > previous.last_seq + 1:
                problems.append(
                    f"the checkpoints of seq {previous.last_seq + 1}…{checkpoint.first_seq - 1} are missing "
                    f"between seq {previous.last_seq} and the checkpoint of seq {checkpoint.first_seq}…{seq}"
                )
                return problems
            unlinked = (
                checkpoint.prev_hash != previous.head_hash or checkpoint.first_seq != previous.last_seq + 1
            )
            # Carried hashes link between checkpoints of one format (a format-3 one after a format-2 one
            # starts from the state rebuilt by API group, which the earlier one does not name).
            if (
                not unlinked
                and checkpoint.version == previous.version
                and checkpoint.prev_carried_hash is not None
                and previous.carried_hash is not None
            ):
                unlinked = checkpoint.prev_carried_hash != previous.carried_hash
            if unlinked:
                problems.append(f"the checkpoint at seq {seq} does not link to the one before it")
                return problems
            previous = checkpoint
        base = sealed.get(report.base_seq)
        if previous.last_seq != report.base_seq or base is None or base.head_hash != previous.head_hash:
            problems.append(
                f"the stored checkpoints do not lead from the anchor's seq {anchor.last_seq} to the "
                f"checkpoint at seq {report.base_seq} the log starts from"
            )
    return problems


def _carried_problems(args: argparse.Namespace, report: ChainReport) -> list[str]:
    """What does not hold of the carried state between the stored checkpoints, their rows and the records."""
    from decisionlog import Ledger, carried_problems  # noqa: PLC0415
    from trtguard.cli._audit_log import log_url  # noqa: PLC0415

    if not report.ok:
        return []
    with Ledger.open(log_url(args), read_only=True) as ledger:
        return carried_problems(ledger, report.base_seq)


def _print(
    fmt: str,
    where: str,
    report: ChainReport,
    problems: list[str],
    anchor: Checkpoint | None,
    out: TextIO,
    *,
    base_signed: bool = True,
) -> None:
    if fmt == "json":
        data = {
            **chain_json(report),
            "ok": report.ok and not problems,
            "base_seq": report.base_seq,
            # Without --key the checkpoint a pruned log starts from is taken as stored (the text says so).
            "base_signature_checked": bool(report.base_seq) and base_signed,
            "anchor": None
            if anchor is None
            else {"last_seq": anchor.last_seq, "head_hash": anchor.head_hash},
            "problems": problems,
        }
        print(json.dumps(data), file=out)
        return
    print(f"{where}: {report.summary()}", file=out)
    if anchor is not None and report.ok and not problems:
        print(f"agrees with the signed checkpoint {anchor.summary()}", file=out)
    for problem in problems:
        print(f"NOT VERIFIED: {problem}", file=out)


def _verify_archive_folder(args: argparse.Namespace, key: PublicKey, out: TextIO) -> int:
    """``--archive FOLDER``: the archive as a whole, against the live log's checkpoints when it is named."""
    import os  # noqa: PLC0415

    from decisionlog import Ledger, verify_archive  # noqa: PLC0415
    from trtguard.cli._audit_log import log_url, read_log  # noqa: PLC0415

    if args.decision_log is None and not os.environ.get("TRTGUARD_DECISION_LOG"):
        records, problems = verify_archive(args.archive, key=key)
        base = None
    else:

        async def live(store: DecisionStore) -> ChainReport:
            return await store.verify()

        report = read_log(args, live)
        base = report.base_seq
        with Ledger.open(log_url(args), read_only=True) as ledger:
            stored = ledger.segments()
        records, problems = verify_archive(args.archive, key=key, stored=stored, through_seq=base)
        if not report.ok:  # the seq it starts after is then in doubt too
            problems.append(f"the live log does not verify: {report.summary()}")
    if args.format == "json":
        data = {"ok": not problems, "records": records, "through_seq": base, "problems": problems}
        print(json.dumps(data), file=out)
    else:
        through = f" through seq {base}, where the live log starts" if base else ""
        status = "NOT VERIFIED" if problems else "archive verified"
        print(f"{args.archive}: {status}: {records} records in its segments{through}", file=out)
        for problem in problems:
            print(f"NOT VERIFIED: {problem}", file=out)
    return 1 if problems else 0


def _verify_archive(args: argparse.Namespace, key: PublicKey, anchor: Checkpoint | None, out: TextIO) -> int:
    from decisionlog import verify_segment  # noqa: PLC0415

    report, check = verify_segment(args.archive, key=key)
    problems = []
    if check.signature_ok is False:
        problems.append("the segment's checkpoint is not signed by --key")
    if check.carried_ok is False:
        problems.append(f"change control's carried state: {check.carried_problem}")
    if anchor is not None and anchor.statement() != check.checkpoint.statement():
        problems.append("the segment's checkpoint is not the anchor")
    _print(args.format, str(args.archive), report, problems, anchor, out)
    return 0 if report.ok and not problems else 1
