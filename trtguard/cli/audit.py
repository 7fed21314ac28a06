"""``trtguard audit``: read and check the decision log.

``tail`` and ``query`` print records, ``verify`` recomputes the hash chain (exit 1 and the first broken record
when it does not hold), ``history NAMESPACE/WORKLOAD`` lists every admitted change of a workload's engines
and images with the evidence its records hold. ``tail``, ``query`` and ``history`` recompute the chain too
and mark what it does not vouch for (:mod:`trtguard.audit.chain`): exit 1, a warning, and UNVERIFIED on
each such record. These open the log read-only. ``seal``, ``archive``, ``prune`` and ``rotate`` manage
sealed segments (:mod:`trtguard.cli.audit_segments`), ``backup`` copies the log; ``verify`` is in
:mod:`trtguard.cli.audit_verify`.
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
from trtguard.cli.audit_lines import print_record, say, stamp
from verifier.errors import InputError
from webhook.settings import DEFAULT_DECISION_LOG

if TYPE_CHECKING:
    from trtguard.audit.chain import ChainCheck
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
        description="Read and verify the webhook's hash-chained decision log (read-only); seal, archive, "
        "prune and back it up (seal, archive, prune, rotate, backup).",
    )
    commands = audit.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)

    tail = add_subcommand(commands, "tail", help="the latest decisions")
    _log_flag(tail)
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
        "the newest). The last deploy of a workload: --namespace NS --name NAME --allowed --no-dry-run "
        "--last 1.",
    )
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

    from trtguard.cli import audit_segments, audit_verify  # noqa: PLC0415 - only with `audit`

    audit_verify.register(commands, _log_flag, _format_flag)
    audit_segments.register(commands, _log_flag)

    history = add_subcommand(
        commands,
        "history",
        help="every admitted change of a workload's engines and images, with who asked and who approved",
        description="Every real (not dry-run) admission of NAMESPACE/WORKLOAD that changed an engine or an "
        "image, from the decision log alone: the requester, the policy revision, and what each change's "
        "record holds (audit ID, TensorRT version and precisions, change kinds against which baseline, the "
        "approvals counted, the signatures counted). With --attestations or --registry-config the build "
        "manifests attached now are also compared field by field.",
    )
    history.add_argument("workload", metavar="NAMESPACE/WORKLOAD", help="e.g. prod/resnet50")
    _log_flag(history)
    add_evidence_arguments(history, "build manifests")
    history.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="limit for fetching manifests (30)"
    )
    _format_flag(history)
    _verify_flag(history)
    history.set_defaults(handler=_history)


def _log_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--decision-log",
        metavar="URL",
        help=f"sqlite:///path or postgresql://… (default: $TRTGUARD_DECISION_LOG or {DEFAULT_DECISION_LOG})",
    )


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
    from trtguard.audit.chain import check_chain, follows  # noqa: PLC0415
    from webhook.decisionlog import RecordQuery  # noqa: PLC0415

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
                    _warn(f"record seq {stored.seq} does not link to the record before it; marked UNVERIFIED")
                print_record(stored, args.format, out, None if args.no_verify else intact)
                last = stored
            out.flush()  # a pipe (| jq) sees each decision when it is recorded, not once a buffer is full

    return _run(args, work)


def _print_checked(records: Sequence[StoredRecord], chain: ChainCheck, fmt: str, out: TextIO) -> int:
    """Print ``records`` marked as the chain vouches for them; 1 (and a warning) for any it does not."""
    unverified = 0
    for stored in records:
        intact = chain.intact(stored)
        unverified += intact is False
        print_record(stored, fmt, out, intact)
    warning = chain.warning(unverified)
    if warning is not None:
        _warn(warning)
    broken = chain.report is not None and not chain.report.ok
    return 1 if unverified or broken else 0


def _warn(text: str) -> None:
    print(f"trtguard: WARNING: {text}", file=sys.stderr)


def _query(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from webhook.decisionlog import RecordQuery  # noqa: PLC0415

    out = out or sys.stdout
    if args.last is not None and (args.limit is not None or args.last < 0):
        raise InputError(
            "--last N is --newest-first --limit N: give one of --last and --limit, N at least 0",
            location="--last",
        )
    query = RecordQuery(
        namespace=args.namespace,
        name=args.name,
        kind=args.kind,
        uid=args.uid,
        allowed=True if args.allowed else False if args.denied else None,
        dry_run=True if args.dry_run else False if args.no_dry_run else None,
        since=_time(args.since, "--since"),
        until=_time(args.until, "--until"),
        limit=args.last if args.last is not None else args.limit,
        newest_first=args.newest_first or args.last is not None,
    )

    async def work(store: DecisionStore) -> int:
        from trtguard.audit.chain import check_chain  # noqa: PLC0415

        found = await store.query(query)
        return _print_checked(found, await check_chain(store, verify=not args.no_verify), args.format, out)

    return _run(args, work)


def _history(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from trtguard.audit import history  # noqa: PLC0415
    from trtguard.audit.chain import check_chain  # noqa: PLC0415

    out = out or sys.stdout
    namespace, slash, name = str(args.workload).partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise InputError(
            f"expected NAMESPACE/WORKLOAD, got {args.workload!r}",
            hint="for example: trtguard audit history prod/resnet50",
        )

    async def work(store: DecisionStore) -> int:
        records = await history.workload_records(store, namespace, name)
        entries = history.replay(records)
        # Admissions the API server never received (answered deny): not changes, but an auditor sees them.
        undelivered = history.not_delivered_json(records)
        chain = await check_chain(store, verify=not args.no_verify)
        verified = {entry.seq: chain.intact(entry.stored) for entry in entries}
        comparisons = await _compare(entries, args)
        if args.format == "json":
            document = {
                "workload": args.workload,
                "log": store.description,
                "chain": _chain_json(chain),
                "entries": history.history_json(entries, comparisons, verified),
                "not_delivered": undelivered,
            }
            print(json.dumps(document, ensure_ascii=False), file=out)
        else:
            _print_history(args.workload, store.description, entries, comparisons, verified, out)
            _print_undelivered(undelivered, out)
        unverified = sum(1 for intact in verified.values() if intact is False)
        warning = chain.warning(unverified)
        if warning is not None:
            _warn(warning)
        broken = chain.report is not None and not chain.report.ok
        return 1 if unverified or broken else 0

    return _run(args, work)


def _print_undelivered(undelivered: Sequence[dict[str, Any]], out: TextIO) -> None:
    if not undelivered:
        return
    say(
        out,
        f"\n{len(undelivered)} allow(s) not delivered: the webhook answered deny (AnswerNotDelivered), "
        "so they changed nothing and are not listed above:",
    )
    for item in undelivered:
        who = f" by {item['user']}" if item["user"] else ""
        say(out, f"  #{item['seq']}  {item['time']}  {item['operation']}{who}  uid {item['uid']}")


def _chain_json(chain: ChainCheck) -> dict[str, Any] | None:
    report = chain.report
    if report is None:
        return None
    brk = report.first_break
    return {
        "ok": report.ok,
        "records": report.records,
        "head_seq": report.head_seq,
        "head_hash": report.head_hash,
        "first_break": {"seq": brk.seq, "uid": brk.uid, "problem": brk.problem} if brk else None,
    }


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
            (entry.seq, change.slot): await compare_manifests(change, evidence, deadline)
            for entry in entries
            for change in entry.changes
            if change.artifact == "engine"
        }
    finally:
        if client is not None:
            await client.aclose()


def _print_history(
    workload: str,
    source: str,
    entries: Sequence[HistoryEntry],
    comparisons: dict[tuple[int, str], ManifestComparison],
    verified: dict[int, bool | None],
    out: TextIO,
) -> None:
    from trtguard.audit.history import signer_names  # noqa: PLC0415

    say(out, f"{workload}: {len(entries)} admitted change(s), from {source}")
    if not comparisons and any(c.artifact == "engine" and c.old for e in entries for c in e.changes):
        say(out, "  (give --attestations DIR or --registry-config FILE to compare build manifests)")
    for entry in entries:
        who = f" by {entry.user}" if entry.user else ""
        groups = f" (groups: {', '.join(entry.groups)})" if entry.groups else ""
        revision = (entry.policy_revision or "-")[:19]
        mark = "  UNVERIFIED" if verified.get(entry.seq) is False else ""
        say(
            out,
            f"\n#{entry.seq}  {stamp(entry.time)}  {entry.operation} {entry.kind}{who}{groups}  "
            f"policies {revision}…{mark}",
        )
        if entry.format < 2:
            say(out, "    (a record written before evidence was recorded: references only)")
        for change in entry.changes:
            was = f"  (was {change.old.rsplit('@', 1)[-1][:19]}…)" if change.old else "  (new)"
            say(out, f"    {change.artifact} {change.slot!r}: {change.new}{was}")
            recorded = change.recorded
            if change.artifact == "image":
                for signature in _items(recorded, "signatures"):
                    signed = ", ".join(signer_names(signature.get("signers")))
                    say(
                        out, f"      signed by {signed} ({signature.get('format')} {signature.get('digest')})"
                    )
                for attestation in _items(recorded, "attestations"):
                    signed = ", ".join(signer_names(attestation.get("signers")))
                    say(out, f"      attested {attestation.get('predicate_type')} by {signed}")
                continue
            for built in _items(recorded, "build_manifests"):
                say(
                    out,
                    f"      audit ID {built.get('audit_id')}; TensorRT {built.get('tensorrt_version')}; "
                    f"precisions {', '.join(map(str, built.get('precisions') or []))}; build manifest "
                    f"{built.get('digest')} signed by {', '.join(signer_names(built.get('signers')))}",
                )
            for control in _items(recorded, "change_control"):
                _print_change_control(control, out)
            comparison = comparisons.get((entry.seq, change.slot))
            if comparison is not None:
                _print_comparison(change.old, comparison, out)
    if comparisons:
        say(out, "\n(build manifests compared as attached now; the records name the ones counted)")


def _print_change_control(control: dict[str, Any], out: TextIO) -> None:
    from trtguard.audit.history import signer_names  # noqa: PLC0415

    baselines = _items(control, "baselines")
    several = len(baselines) > 1
    compared = [
        f"{f'[{n}] ' if several else ''}{_baseline(b)}" for n, b in enumerate(baselines, start=1)
    ] or ["no earlier engine (a first build)"]
    say(out, f"      compared with ({control.get('policy')}): {'; '.join(compared)}")
    gated = set(control.get("gated") or [])
    kinds = []
    for change in _items(control, "changes"):
        kind = f"{change.get('kind')}{' (gated)' if change.get('kind') in gated else ''}"
        against = [i + 1 for i in change.get("against") or [] if isinstance(i, int)]
        kinds.append(f"{kind} {against}" if several else kind)
    say(out, f"      change kinds: {', '.join(kinds) or 'none'}")
    approvals = _items(control, "approvals")
    if approvals:
        names = [
            f"{a.get('approver')} ({', '.join(signer_names(a.get('signers')))}) for "
            f"{', '.join(a.get('changes') or [])}"
            for a in approvals
        ]
        say(out, f"      approved by: {'; '.join(names)}")
    elif gated:
        say(out, "      no approval counted")


def _baseline(baseline: dict[str, Any]) -> str:
    kind = str(baseline.get("kind", "")).replace("-", " ")
    text = f"{kind} {baseline.get('engine') or baseline.get('manifest_digest')}"
    admitted = baseline.get("admitted_by")
    if isinstance(admitted, dict):
        text += f" (admitted by #{admitted.get('seq')})"
    return text


def _print_comparison(old: str | None, comparison: ManifestComparison, out: TextIO) -> None:
    if comparison.diff is None:
        if old is not None:
            say(out, f"      build manifests not compared: {comparison.problem}")
        return
    if not comparison.diff:
        say(out, "      build manifests identical")
    for classified in comparison.diff.changes:
        say(out, f"      {classified.kind.value}: {classified.summary}")
    for field in comparison.diff.fields:
        old_value, new_value = json.dumps(field.old), json.dumps(field.new)
        say(out, f"        {field.path}: {old_value} -> {new_value}")


def _items(data: object, key: str) -> list[dict[str, Any]]:
    value = data.get(key) if isinstance(data, dict) else None
    return (
        [item for item in value if isinstance(item, dict) and "omitted" not in item]
        if isinstance(value, list)
        else []
    )


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
