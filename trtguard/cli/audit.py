"""``trtguard audit``: read and check the decision log.

``tail`` and ``query`` print records, ``verify`` recomputes the hash chain (exit 1 and the first broken record
when it does not hold), ``history NAMESPACE/WORKLOAD`` lists every admitted change of a workload's engines
and images with the evidence its records hold. ``tail``, ``query`` and ``history`` recompute the chain too
and mark what it does not vouch for (:mod:`trtguard.audit._chain`): exit 1, a warning, and UNVERIFIED on
each such record. These open the log read-only. ``seal``, ``archive``, ``prune`` and ``rotate`` manage
sealed segments (:mod:`trtguard.cli._audit_segments`), ``backup`` copies the log; ``verify`` is in
:mod:`trtguard.cli._audit_verify`, ``history`` in :mod:`trtguard.cli._audit_history`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from trtguard.cli._audit_lines import print_record
from trtguard.cli._audit_log import add_decision_log_argument, chain_status, parse_time, read_log, warn
from trtguard.cli._commands import Subparsers, add_command_group, add_subcommand
from verifier.base import InputError

if TYPE_CHECKING:
    from decisionlog import DecisionStore, StoredRecord
    from trtguard.audit import ChainCheck

#: Seconds between polls of ``tail --follow``.
FOLLOW_INTERVAL = 1.0


def register(subparsers: Subparsers) -> None:
    """Add ``audit`` and its sub-commands."""
    commands = add_command_group(
        subparsers,
        "audit",
        description="Read and verify the webhook's hash-chained decision log (read-only); seal, archive, "
        "prune and back it up (seal, archive, prune, rotate, backup).",
    )

    tail = add_subcommand(commands, "tail", help="the latest decisions")
    add_decision_log_argument(tail)
    tail.add_argument("-n", "--lines", type=int, default=20, metavar="N", help="how many (default 20)")
    tail.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep printing new decisions until Ctrl-C (each checked to link to the one before)",
    )
    _format_flag(tail)
    _verify_flag(tail)
    tail.set_defaults(handler=_tail)

    query = add_subcommand(
        commands,
        "query",
        help="decisions matching filters",
        description="Decisions matching every filter given, oldest first (--newest-first or --last N for "
        "the newest). The last deploy of a workload: --namespace NS --name NAME --kind KIND --allowed "
        "--no-dry-run --last 1.",
    )
    add_decision_log_argument(query)
    query.add_argument("--namespace", help="only this namespace")
    query.add_argument("--name", help="only objects of this name")
    query.add_argument(
        "--kind",
        help="only this kind, named as policies name kinds: Kind.group (Job.batch.volcano.sh) or a built-in "
        "kind bare (Job is batch/v1's)",
    )
    query.add_argument("--uid", help="the decision for one AdmissionReview uid")
    verdict = query.add_mutually_exclusive_group()
    verdict.add_argument("--denied", action="store_true", help="only denials")
    verdict.add_argument("--allowed", action="store_true", help="only admissions")
    dry = query.add_mutually_exclusive_group()
    dry.add_argument("--dry-run", action="store_true", help="only dry runs")
    dry.add_argument("--no-dry-run", action="store_true", help="no dry runs")
    query.add_argument("--since", metavar="TIME", help="RFC 3339 time, or an age such as 30m, 12h, 7d")
    query.add_argument("--until", metavar="TIME", help="RFC 3339 time, or an age such as 30m, 12h, 7d")
    query.add_argument("--limit", type=int, metavar="N", help="at most N records")
    query.add_argument("--newest-first", action="store_true", help="print the newest records first")
    query.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="the N newest matching records, newest first (--newest-first --limit N)",
    )
    _format_flag(query)
    _verify_flag(query)
    query.set_defaults(handler=_query)

    from trtguard.cli import _audit_history as audit_history  # noqa: PLC0415 - only with `audit`
    from trtguard.cli import _audit_segments as audit_segments  # noqa: PLC0415
    from trtguard.cli import _audit_verify as audit_verify  # noqa: PLC0415

    audit_verify.register(commands, add_decision_log_argument, _format_flag)
    audit_segments.register(commands, add_decision_log_argument)

    audit_history.register(commands, add_decision_log_argument, _format_flag, _verify_flag)


def _verify_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="do not recompute the hash chain (the check reads the whole log, about 4 s per 50,000 records; "
        "printed records are then unchecked, and the command says so)",
    )


def _format_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or JSON Lines"
    )


def _tail(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import RecordQuery  # noqa: PLC0415
    from trtguard.audit import check_chain, follows  # noqa: PLC0415

    out = out or sys.stdout
    if args.lines < 0:
        raise InputError("--lines must be 0 or more", location="--lines")

    async def work(store: DecisionStore) -> int:
        latest = await store.query(RecordQuery(newest_first=True, limit=args.lines))
        chain = await check_chain(store, verify=not args.no_verify)
        status = _print_checked(list(reversed(latest)), chain, args.format, out)
        if not args.follow:
            return status
        # Follow from the newest record, also when none was printed (-n 0).
        newest = latest[:1] or await store.query(RecordQuery(newest_first=True, limit=1))
        last = newest[0] if newest else None
        while True:
            await asyncio.sleep(FOLLOW_INTERVAL)
            for stored in await store.query(RecordQuery(after_seq=last.seq if last else 0)):
                # A new record must link to the one before it (the first of the log: to the genesis hash).
                intact = follows(stored, last)
                if not intact and not args.no_verify:
                    warn(
                        f"record seq {stored.seq} does not link to the record before it, or is not stored as "
                        "the canonical JSON its hash covers; marked UNVERIFIED (`trtguard audit verify`: why)"
                    )
                print_record(stored, args.format, out, None if args.no_verify else intact)
                last = stored
            out.flush()  # a pipe (| jq) sees each decision when it is recorded, not once a buffer is full

    return read_log(args, work)


def _print_checked(records: Sequence[StoredRecord], chain: ChainCheck, fmt: str, out: TextIO) -> int:
    """Print ``records`` marked as the chain vouches for them; 1 (and a warning) for any it does not."""
    unverified = 0
    for stored in records:
        intact = chain.intact(stored)
        unverified += intact is False
        print_record(stored, fmt, out, intact)
    return chain_status(chain, unverified)


def _query(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import RecordQuery  # noqa: PLC0415

    out = out or sys.stdout
    if args.last is not None and (args.limit is not None or args.last < 0):
        raise InputError(
            "--last N is --newest-first --limit N: give one of --last and --limit, N at least 0",
            location="--last",
        )
    group, kind = (None, None) if args.kind is None else _kind(args.kind)
    query = RecordQuery(
        namespace=args.namespace,
        name=args.name,
        kind=kind,
        group=group,
        uid=args.uid,
        allowed=True if args.allowed else False if args.denied else None,
        dry_run=True if args.dry_run else False if args.no_dry_run else None,
        since=parse_time(args.since, "--since"),
        until=parse_time(args.until, "--until"),
        limit=args.last if args.last is not None else args.limit,
        newest_first=args.newest_first or args.last is not None,
    )

    async def work(store: DecisionStore) -> int:
        from trtguard.audit import check_chain  # noqa: PLC0415

        found = await store.query(query)
        return _print_checked(found, await check_chain(store, verify=not args.no_verify), args.format, out)

    return read_log(args, work)


def _kind(text: str) -> tuple[str, str]:
    """``(group, kind)`` of ``--kind``; an :class:`InputError` that names the flag."""
    from policies.identity import parse_kind  # noqa: PLC0415

    try:
        return parse_kind(text)
    except InputError as error:
        error.location = "--kind"
        raise
