"""``trtguard audit seal|archive|prune|rotate|backup``: the decision log's life over months.

``seal`` signs checkpoints over the records since the last one (segments of ``--segment-records``), each with
change control's carried state (each workload's last admissions, which pruning must not forget);
``archive`` writes each sealed segment to a folder and checks it; ``prune`` deletes archived segments from the
live store (the only deletion the store's triggers permit); ``rotate`` does the three in order, for a CronJob
or by hand. ``backup`` copies a SQLite log consistently (its WAL included) and checks the copy. These write to
the log; they run beside a serving webhook (they take the write lock only briefly). See
docs/decision-log-storage.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from trtguard.cli._commands import Subparsers, add_subcommand
from trtguard.cli._output import check_output

if TYPE_CHECKING:
    from decisionlog import Checkpoint, Ledger, SealedSegment
    from verifier.crypto import PrivateKey

#: Records per sealed segment unless told otherwise: about 200 MB of JSON at 2 KB a record.
SEGMENT_RECORDS = 100_000

_Flags = Callable[[argparse.ArgumentParser], None]


def register(commands: Subparsers, log_flag: _Flags) -> None:
    """Add the sub-commands that seal, archive, prune and back up the log."""
    from trtguard.cli._keys import add_password_arguments  # noqa: PLC0415

    seal = add_subcommand(
        commands, "seal", help="sign checkpoints over the records since the last one (sealed segments)"
    )
    log_flag(seal)
    _key_flags(seal, add_password_arguments)
    seal.add_argument(
        "--only-full",
        action="store_true",
        help="seal only full segments (default: the records left at the head form a last, shorter one)",
    )
    seal.add_argument(
        "--archive",
        type=Path,
        metavar="FOLDER",
        help="the folder of archived segments: read once, when the log was pruned by a trtguard that did not "
        "carry change control's last admissions forward by API group, kind, namespace and name "
        "(docs/decision-log-storage.md, upgrading)",
    )
    seal.add_argument(
        "--anchor-out",
        type=Path,
        metavar="FILE",
        help="also write the newest checkpoint to FILE: keep it outside the log for `audit verify --anchor`",
    )
    seal.set_defaults(handler=_seal)

    def keys(parser: argparse.ArgumentParser) -> None:
        _key_flags(parser, add_password_arguments)

    # The log's life: each one's flags, in this order, after --decision-log.
    life: tuple[tuple[str, str, tuple[_Flags, ...], Callable[..., int]], ...] = (
        ("archive", "write sealed segments not yet archived to a folder", (_archive_flag,), _archive),
        (
            "prune",
            "delete archived sealed segments from the live log, oldest first",
            (_archive_flag, _retention_flags),
            _prune,
        ),
        (
            "rotate",
            "seal full segments, archive them, then prune what retention allows",
            (keys, _archive_flag, _retention_flags),
            _rotate,
        ),
    )
    for name, summary, flags, handler in life:
        step = add_subcommand(commands, name, help=summary)
        log_flag(step)
        for flag in flags:
            flag(step)
        step.set_defaults(handler=handler)

    backup = add_subcommand(
        commands,
        "backup",
        help="copy a SQLite decision log consistently (WAL included) and check the copy",
        description="Copy the log with SQLite's online backup: the copy holds every committed record, also "
        "those still in the -wal file (a plain file copy loses them and still verifies). Runs beside a "
        "serving webhook. PostgreSQL: use pg_dump.",
    )
    log_flag(backup)
    backup.add_argument(
        "--to", type=Path, required=True, metavar="FILE", help="the new copy (must not exist)"
    )
    backup.set_defaults(handler=_backup)


def _key_flags(parser: argparse.ArgumentParser, add_password_arguments: Callable[[Any], None]) -> None:
    parser.add_argument(
        "--key", type=Path, required=True, metavar="PRIVATE_KEY", help="the operator's checkpoint key"
    )
    add_password_arguments(parser)
    parser.add_argument(
        "--segment-records",
        type=_positive,
        default=SEGMENT_RECORDS,
        metavar="N",
        help=f"records per sealed segment (default {SEGMENT_RECORDS:,})",
    )


def _archive_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--archive", type=Path, required=True, metavar="FOLDER", help="the folder of archived segments"
    )


def _retention_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-records",
        type=_non_negative,
        default=0,
        metavar="N",
        help="keep at least the N newest records live (default 0)",
    )
    parser.add_argument(
        "--keep-days",
        type=_non_negative,
        metavar="DAYS",
        help="keep live every record decided in the last DAYS days (default: no age limit)",
    )


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _ledger(args: argparse.Namespace, work: Callable[[Ledger], int]) -> int:
    from decisionlog import Ledger  # noqa: PLC0415
    from trtguard.cli._audit_log import log_url  # noqa: PLC0415

    with Ledger.open(log_url(args)) as ledger:
        return work(ledger)


def _signing_key(args: argparse.Namespace) -> PrivateKey:
    from trtguard.cli._key_files import load_signing_key  # noqa: PLC0415

    key: PrivateKey = load_signing_key(args.key, args)
    return key


def _print_sealed(sealed: list[Checkpoint], out: TextIO) -> None:
    for checkpoint in sealed:
        print(f"sealed {checkpoint.summary()}", file=out)
    if not sealed:
        print("nothing to seal", file=out)


def _seal(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import write_checkpoint_file  # noqa: PLC0415

    out = out or sys.stdout
    key = _signing_key(args)

    def work(ledger: Ledger) -> int:
        sealed = ledger.seal(
            key, segment_records=args.segment_records, partial=not args.only_full, archive=args.archive
        )
        _print_sealed(sealed, out)
        if args.anchor_out is not None and sealed:
            write_checkpoint_file(sealed[-1], args.anchor_out)
            print(f"anchor written to {args.anchor_out}", file=out)
        return 0

    return _ledger(args, work)


def _archive(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import archive_segments  # noqa: PLC0415

    out = out or sys.stdout

    def work(ledger: Ledger) -> int:
        _print_archived(archive_segments(ledger, args.archive), args.archive, out)
        return 0

    return _ledger(args, work)


def _print_archived(done: list[SealedSegment], folder: Path, out: TextIO) -> None:
    for segment in done:
        checkpoint = segment.checkpoint
        print(f"archived seq {checkpoint.first_seq}…{checkpoint.last_seq} to {folder}", file=out)


def _keep_since(args: argparse.Namespace) -> datetime | None:
    return None if args.keep_days is None else datetime.now(UTC) - timedelta(days=args.keep_days)


def _print_pruned(pruned: list[SealedSegment], out: TextIO) -> None:
    for segment in pruned:
        checkpoint = segment.checkpoint
        print(
            f"pruned seq {checkpoint.first_seq}…{checkpoint.last_seq} ({checkpoint.count} records, archived "
            f"as {segment.archive})",
            file=out,
        )
    if not pruned:
        print("nothing to prune", file=out)


def _prune(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout

    def work(ledger: Ledger) -> int:
        pruned = ledger.prune(args.archive, keep_records=args.keep_records, keep_since=_keep_since(args))
        _print_pruned(pruned, out)
        return 0

    return _ledger(args, work)


def _rotate(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import archive_segments  # noqa: PLC0415

    out = out or sys.stdout
    key = _signing_key(args)

    def work(ledger: Ledger) -> int:
        sealed = ledger.seal(key, segment_records=args.segment_records, partial=False, archive=args.archive)
        _print_sealed(sealed, out)
        _print_archived(archive_segments(ledger, args.archive), args.archive, out)
        pruned = ledger.prune(args.archive, keep_records=args.keep_records, keep_since=_keep_since(args))
        _print_pruned(pruned, out)
        return 0

    return _ledger(args, work)


def _backup(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import (  # noqa: PLC0415
        SQLiteStore,
        backup_sqlite,
    )
    from trtguard.cli._audit_log import log_url  # noqa: PLC0415

    out = out or sys.stdout
    check_output(args.to, "the backup")  # a missing folder is a usage error, named as such
    backup_sqlite(log_url(args), args.to)
    # The copy is checked as a log of its own: what a restore would start from.
    report = asyncio.run(SQLiteStore(args.to, read_only=True).verify())
    print(f"{args.to}: {report.summary()}", file=out)
    return 0 if report.ok else 1
