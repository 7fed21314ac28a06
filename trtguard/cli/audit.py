"""``trtguard audit``: read and check the decision log.

``tail`` and ``query`` print records, ``verify`` recomputes the hash chain (exit 1 and the first broken record
when it does not hold), ``history NAMESPACE/WORKLOAD`` lists the engines a workload was admitted with over
time and what changed in their build manifests. The log is opened read-only: nothing here writes to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from trtguard.cli._args import add_evidence_arguments, wants_evidence
from trtguard.cli._commands import Subparsers, add_command, add_subcommand
from verifier.errors import InputError
from webhook.settings import DEFAULT_DECISION_LOG

if TYPE_CHECKING:
    from trtguard.audit.history import HistoryEntry, ManifestComparison
    from webhook.decisionlog import DecisionStore, StoredRecord

_T = TypeVar("_T")
_RELATIVE = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
#: Seconds between polls of ``tail --follow``.
FOLLOW_INTERVAL = 1.0


def register(subparsers: Subparsers) -> None:
    """Add ``audit`` and its sub-commands."""
    audit = add_command(
        subparsers,
        "audit",
        description="Read the webhook's hash-chained decision log (read-only).",
    )
    commands = audit.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)

    tail = add_subcommand(commands, "tail", help="the latest decisions")
    _log_flag(tail)
    tail.add_argument("-n", "--lines", type=int, default=20, metavar="N", help="how many (default 20)")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new decisions until Ctrl-C")
    _format_flag(tail)
    tail.set_defaults(handler=_tail)

    query = add_subcommand(commands, "query", help="decisions matching filters")
    _log_flag(query)
    query.add_argument("--namespace", help="only this namespace")
    query.add_argument("--name", help="only objects of this name")
    query.add_argument("--kind", help="only this kind, e.g. Deployment")
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
    _format_flag(query)
    query.set_defaults(handler=_query)

    verify = add_subcommand(commands, "verify", help="recompute the hash chain; exit 1 if it is broken")
    _log_flag(verify)
    _format_flag(verify)
    verify.set_defaults(handler=_verify)

    history = add_subcommand(
        commands,
        "history",
        help="engines admitted for a workload over time, with build-manifest differences",
        description="The engines NAMESPACE/WORKLOAD was admitted with (real admissions, not dry runs), and "
        "what changed between consecutive build manifests (give --attestations or --registry-config).",
    )
    history.add_argument("workload", metavar="NAMESPACE/WORKLOAD", help="e.g. prod/resnet50")
    _log_flag(history)
    add_evidence_arguments(history, "build manifests")
    history.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="limit for fetching manifests (30)"
    )
    _format_flag(history)
    history.set_defaults(handler=_history)


def _log_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--decision-log",
        metavar="URL",
        help=f"sqlite:///path or postgresql://… (default: $TRTGUARD_DECISION_LOG or {DEFAULT_DECISION_LOG})",
    )


def _format_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or JSON Lines"
    )


def _url(args: argparse.Namespace) -> str:
    value: str = args.decision_log or os.environ.get("TRTGUARD_DECISION_LOG") or DEFAULT_DECISION_LOG
    return value


def _run(args: argparse.Namespace, work: Callable[[DecisionStore], Awaitable[_T]]) -> _T:
    from webhook.decisionlog import open_store  # noqa: PLC0415 - keep `trtguard --help` light

    async def main() -> _T:
        store = open_store(_url(args), read_only=True)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _tail(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from webhook.decisionlog import RecordQuery  # noqa: PLC0415

    out = out or sys.stdout
    if args.lines < 0:
        raise InputError("--lines must be 0 or more", location="--lines")

    async def work(store: DecisionStore) -> int:
        latest = await store.query(RecordQuery(newest_first=True, limit=args.lines))
        for stored in reversed(latest):
            _print(stored, args.format, out)
        if not args.follow:
            return 0
        # Follow from the newest record, also when none was printed (-n 0).
        newest = latest[:1] or await store.query(RecordQuery(newest_first=True, limit=1))
        last = newest[0].seq if newest else 0
        while True:
            await asyncio.sleep(FOLLOW_INTERVAL)
            for stored in await store.query(RecordQuery(after_seq=last)):
                _print(stored, args.format, out)
                last = stored.seq
            out.flush()  # a pipe (| jq) sees each decision when it is recorded, not once a buffer is full

    return _run(args, work)


def _query(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from webhook.decisionlog import RecordQuery  # noqa: PLC0415

    out = out or sys.stdout
    query = RecordQuery(
        namespace=args.namespace,
        name=args.name,
        kind=args.kind,
        uid=args.uid,
        allowed=True if args.allowed else False if args.denied else None,
        dry_run=True if args.dry_run else False if args.no_dry_run else None,
        since=_time(args.since, "--since"),
        until=_time(args.until, "--until"),
        limit=args.limit,
    )

    async def work(store: DecisionStore) -> int:
        for stored in await store.query(query):
            _print(stored, args.format, out)
        return 0

    return _run(args, work)


def _verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout

    async def work(store: DecisionStore) -> int:
        report = await store.verify()
        if args.format == "json":
            brk = report.first_break
            data = {
                "ok": report.ok,
                "records": report.records,
                "head_seq": report.head_seq,
                "head_hash": report.head_hash,
                "first_break": {"seq": brk.seq, "uid": brk.uid, "problem": brk.problem} if brk else None,
            }
            print(json.dumps(data), file=out)
        else:
            print(f"{store.description}: {report.summary()}", file=out)
        return 0 if report.ok else 1

    return _run(args, work)


def _history(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from trtguard.audit.history import engine_history  # noqa: PLC0415

    out = out or sys.stdout
    namespace, slash, name = str(args.workload).partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise InputError(
            f"expected NAMESPACE/WORKLOAD, got {args.workload!r}",
            hint="for example: trtguard audit history prod/resnet50",
        )

    async def work(store: DecisionStore) -> int:
        entries = await engine_history(store, namespace, name)
        comparisons = await _compare(entries, args)
        if args.format == "json":
            from trtguard.audit.history import history_json  # noqa: PLC0415

            print(
                json.dumps({"workload": args.workload, "entries": history_json(entries, comparisons)}),
                file=out,
            )
        else:
            _print_history(args.workload, store.description, entries, comparisons, out)
        return 0

    return _run(args, work)


async def _compare(
    entries: Sequence[HistoryEntry], args: argparse.Namespace
) -> dict[tuple[int, str], ManifestComparison]:
    if not wants_evidence(args):
        return {}
    from trtguard.audit.history import compare_manifests  # noqa: PLC0415
    from verifier.deadline import Deadline  # noqa: PLC0415
    from verifier.registry.evidence import evidence_source  # noqa: PLC0415

    deadline = Deadline.after(args.timeout)
    evidence, client = evidence_source(
        attestations=args.attestations, registry_config=args.registry_config, registry=args.registry
    )
    try:
        return {
            (entry.seq, change.repository): await compare_manifests(change, evidence, deadline)
            for entry in entries
            for change in entry.changes
        }
    finally:
        if client is not None:
            await client.aclose()


def _print_history(
    workload: str,
    source: str,
    entries: Sequence[HistoryEntry],
    comparisons: dict[tuple[int, str], ManifestComparison],
    out: TextIO,
) -> None:
    print(f"{workload}: {len(entries)} engine change(s) admitted, from {source}", file=out)
    if not comparisons and entries:
        print("  (give --attestations DIR or --registry-config FILE to compare build manifests)", file=out)
    for entry in entries:
        who = f" by {entry.user}" if entry.user else ""
        revision = (entry.policy_revision or "-")[:19]
        when = _stamp(entry.time)
        print(f"\n#{entry.seq}  {when}  {entry.operation} {entry.kind}{who}  policies {revision}…", file=out)
        for change in entry.changes:
            was = f"  (was {change.old.rsplit('@', 1)[-1][:19]}…)" if change.old else "  (first)"
            print(f"    engine {change.new}{was}", file=out)
            comparison = comparisons.get((entry.seq, change.repository))
            if comparison is None:
                continue
            if comparison.diff is None:
                if change.old is not None:
                    print(f"      build manifests not compared: {comparison.problem}", file=out)
                continue
            if not comparison.diff:
                print("      build manifests identical", file=out)
            for classified in comparison.diff.changes:
                print(f"      {classified.kind.value}: {classified.summary}", file=out)
            for field in comparison.diff.fields:
                old, new = json.dumps(field.old), json.dumps(field.new)
                print(f"        {field.path}: {old} -> {new}", file=out)
    if comparisons:
        print("\n(build manifests as attached now; their signatures were verified at admission)", file=out)


def _print(stored: StoredRecord, fmt: str, out: TextIO) -> None:
    record = stored.record
    if fmt == "json":
        data: dict[str, Any] = {"seq": stored.seq, "hash": stored.hash, "prev_hash": stored.prev_hash}
        data["record"] = record.to_json()
        print(json.dumps(data, ensure_ascii=False), file=out)
        return
    verdict = "ALLOW" if record.allowed else "DENY "
    where = "/".join(part for part in (record.namespace, record.kind, record.name) if part)
    sub = f"/{record.sub_resource}" if record.sub_resource else ""
    dry = " (dry run)" if record.dry_run else ""
    user = f" by {record.user}" if record.user else ""
    line = f"{_stamp(record.time)}  #{stored.seq:<6} {verdict} {record.operation:<7} {where}{sub}{dry}{user}"
    line += f"  [{record.reason}, {record.latency_us / 1000:.1f} ms, uid {record.uid}]"
    print(line, file=out)
    if record.message:
        print(f"    {record.message}", file=out)
    for warning in record.warnings:
        print(f"    warning: {warning}", file=out)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(text: str | None, flag: str) -> datetime | None:
    if text is None:
        return None
    if match := _RELATIVE.fullmatch(text.strip()):
        return datetime.now(UTC) - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"{text!r} is neither an RFC 3339 time nor an age",
            location=flag,
            hint="e.g. 2026-11-29T12:00:00Z or 6h",
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
