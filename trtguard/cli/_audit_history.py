"""``trtguard audit history NAMESPACE/KIND/NAME``: every admitted change of a workload's engines and images.

The workload is its API group, kind, namespace and name (:mod:`trtguard.audit.workloads`):
``NAMESPACE/NAME`` names it while the log knows one workload of that name, and says which when it knows more.
A workload the log never saw is exit 1, with the names closest to it; so is one it only ever denied, with the
count of denials and the newest one's reason (an empty history with exit 0 would read as "nothing happened").
``--last N`` and ``--since TIME`` show the newest changes only (replayed from the whole history, so each
still names what it replaced); each change says when, who deployed it, what changed (references and the
recorded audit ID, TensorRT version and precisions, old → new), its change kinds, approvers and audit ID:
the 3 a.m. answer from the log alone.

Replayed from the decision log alone (:mod:`trtguard.audit._history`) and checked against the recomputed
chain; after rotation it starts from what rotation carried forward (the workload's last admissions through
the records pruned) and says where the earlier changes are.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from trtguard.cli._args import add_evidence_arguments, wants_evidence
from trtguard.cli._audit_lines import say, stamp
from trtguard.cli._commands import Subparsers, add_subcommand
from verifier.base import InputError, visible

if TYPE_CHECKING:
    from decisionlog import Carried, DecisionStore, StoredRecord
    from trtguard.audit import HistoryEntry, ManifestComparison

Flag = Callable[[argparse.ArgumentParser], None]


def register(commands: Subparsers, log_flag: Flag, format_flag: Flag, verify_flag: Flag) -> None:
    """Add ``audit history`` (the flags add ``audit``'s shared options)."""
    history = add_subcommand(
        commands,
        "history",
        help="every admitted change of a workload's engines and images, with who asked and who approved",
        description="Every real (not dry-run) admission of the workload NAMESPACE/KIND/NAME (KIND as "
        "policies name kinds: Job.batch.volcano.sh, or a built-in kind bare: Deployment) that changed an "
        "engine or an "
        "image, from the decision log alone: the requester, the policy revision, and what each change's "
        "record holds (audit ID, TensorRT version and precisions, change kinds against which baseline, the "
        "approvals counted, the signatures counted). With --attestations or --registry-config the build "
        "manifests attached now are also compared field by field.",
    )
    history.add_argument(
        "workload",
        metavar="NAMESPACE/KIND/NAME",
        help="e.g. prod/Deployment/resnet50 or prod/Job.batch.volcano.sh/train; NAMESPACE/NAME when the log "
        "knows one workload of that name",
    )
    log_flag(history)
    history.add_argument(
        "--last", type=int, metavar="N", help="only the N newest changes (--last 1: what was deployed last)"
    )
    history.add_argument(
        "--since", metavar="TIME", help="only changes since this RFC 3339 time, or an age such as 12h or 7d"
    )
    add_evidence_arguments(history, "build manifests")
    history.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="limit for fetching manifests (30)"
    )
    format_flag(history)
    verify_flag(history)
    history.set_defaults(handler=_history)


def _history(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import Carried  # noqa: PLC0415
    from trtguard.audit import (  # noqa: PLC0415
        check_chain,
        history_json,
        last_carried,
        not_delivered_json,
        replay,
        workload_carried,
        workload_records,
    )
    from trtguard.audit.workloads import closest_workloads, resolve_workload  # noqa: PLC0415
    from trtguard.cli._audit_log import chain_json, chain_status, parse_time, read_log  # noqa: PLC0415

    out = out or sys.stdout
    text = str(args.workload)
    if text.count("/") not in (1, 2):
        raise InputError(
            f"expected NAMESPACE/KIND/NAME or NAMESPACE/NAME, got {text!r}",
            hint="for example: trtguard audit history prod/Deployment/resnet50",
        )
    if args.last is not None and args.last < 1:
        raise InputError("--last must be 1 or more", location="--last")
    since = parse_time(args.since, "--since")

    async def work(store: DecisionStore) -> int:
        workload = await resolve_workload(store, text, where="NAMESPACE/KIND/NAME")
        records = [] if workload is None else await workload_records(store, workload)
        carried = Carried(0, True) if workload is None else await workload_carried(store, workload)
        shown = text if workload is None else str(workload)
        if not records and not carried.workloads:
            close = await closest_workloads(store, shown)
            print(
                f"trtguard: the decision log never saw {shown}"
                + (f"; closest: {', '.join(close)}" if close else "; it knows no workload of a similar name"),
                file=sys.stderr,
            )
            return 1
        replayed = replay(records, carried=last_carried(carried))
        if not replayed and not carried.workloads and _only_denied(records):
            # Not an empty history: the workload was asked for and refused, which the 3 a.m. reader must see.
            print(_denied_line(shown, records), file=sys.stderr)
            return 1
        entries = [entry for entry in replayed if since is None or entry.record.time >= since]
        entries = entries[-args.last :] if args.last is not None else entries
        # Admissions the API server never received (answered deny): not changes, but an auditor sees them.
        undelivered = not_delivered_json(records)
        chain = await check_chain(store, verify=not args.no_verify)
        verified = {entry.seq: chain.intact(entry.stored) for entry in entries}
        comparisons = await _compare(entries, args)
        if args.format == "json":
            document = {
                "workload": shown,
                "changes_in_log": len(replayed),
                "log": store.description,
                "chain": None if chain.report is None else chain_json(chain.report),
                "entries": history_json(entries, comparisons, verified),
                "not_delivered": undelivered,
                # After rotation: the records up to this seq were pruned; what ran then is carried forward.
                "pruned_through": carried.base_seq,
                "carried": [workload.to_json() for workload in carried.workloads],
            }
            print(json.dumps(document, ensure_ascii=False), file=out)
        else:
            _print_carried(carried, out)
            _print_history(shown, store.description, entries, len(replayed), comparisons, verified, out)
            _print_undelivered(undelivered, out)
        return chain_status(chain, sum(1 for intact in verified.values() if intact is False))

    return read_log(args, work)


def _only_denied(records: Sequence[StoredRecord]) -> bool:
    """Whether ``records`` hold denials and no admission (an allow not delivered admitted nothing)."""
    from trtguard.audit import not_delivered  # noqa: PLC0415

    dropped = {stored.seq for stored in not_delivered(records)}
    admitted = [stored for stored in records if stored.record.allowed and stored.seq not in dropped]
    return not admitted and any(not stored.record.allowed for stored in records)


def _denied_line(workload: str, records: Sequence[StoredRecord]) -> str:
    """The workload was only ever denied: how often, and the newest denial with its reason."""
    from decisionlog import original_id  # noqa: PLC0415

    denials = [s for s in records if not s.record.allowed and original_id(s.record) is None]
    newest = max(
        denials or [s for s in records if not s.record.allowed], key=lambda s: (s.record.time, s.seq)
    )
    record = newest.record
    who = f" by {record.user}" if record.user else ""
    reason = f"{record.reason}: {record.message}" if record.message else record.reason
    return visible(
        f"trtguard: {workload} was never admitted: the decision log holds {len(denials)} denial(s) of it "
        f"and no admitted change; the newest, #{newest.seq} at {stamp(record.time)} "
        f"({record.operation}{who}): {reason}"
    )


def _print_carried(carried: Carried, out: TextIO) -> None:
    """After rotation: where the live records start, and the last admissions carried forward."""
    if not carried.base_seq:
        return
    say(
        out,
        f"records up to seq {carried.base_seq} were pruned (their archived segments hold the earlier "
        "changes)" + ("" if carried.stored else "; what was admitted before them is NOT known"),
    )
    for workload in carried.workloads:
        for admission in workload.admissions:
            engines = ", ".join(str(e.get("reference")) for e in admission.engines)
            say(
                out,
                f"  carried forward: {workload.identity.kind_name} last admitted #{admission.seq} at "
                f"{admission.time}: "
                f"{engines}",
            )


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


async def _compare(
    entries: Sequence[HistoryEntry], args: argparse.Namespace
) -> dict[tuple[int, str], ManifestComparison]:
    if not wants_evidence(args):
        return {}
    from trtguard.audit import compare_manifests  # noqa: PLC0415
    from verifier import evidence_source  # noqa: PLC0415
    from verifier.base import Deadline  # noqa: PLC0415

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
    total: int,
    comparisons: dict[tuple[int, str], ManifestComparison],
    verified: dict[int, bool | None],
    out: TextIO,
) -> None:
    from trtguard.audit import recorded_objects, signer_names  # noqa: PLC0415

    shown = f"the last {len(entries)} of {total}" if len(entries) < total else str(total)
    say(out, f"{workload}: {shown} admitted change(s), from {source}")
    if not comparisons and any(c.artifact == "engine" and c.old for e in entries for c in e.changes):
        say(out, "  (give --attestations DIR or --registry-config FILE to compare build manifests)")
    for entry in entries:
        record = entry.record
        who = f" by {record.user}" if record.user else " by an unknown requester"
        groups = f" (groups: {', '.join(record.groups)})" if record.groups else ""
        revision = (record.policy_revision or "-")[:19]
        mark = "  UNVERIFIED" if verified.get(entry.seq) is False else ""
        say(
            out,
            f"\n#{entry.seq}  {stamp(record.time)}  {record.operation} {record.kind}{who}{groups}  "
            f"policies {revision}…  record {record.record_id}{mark}",
        )
        if record.format < 2:
            say(out, "    (a record written before evidence was recorded: references only)")
        for change in entry.changes:
            say(out, f"    {change.artifact} {change.slot!r}: {change.new}{'' if change.old else '  (new)'}")
            if change.old:
                say(out, f"      was {change.old}")
            values = [f"{label} {old or '(not recorded)'} → {new}" for label, old, new in change.values]
            if values and change.old:
                say(out, f"      changed: {'; '.join(values)}")
            recorded = change.recorded
            if change.artifact == "image":
                for signature in recorded_objects(recorded, "signatures"):
                    signed = ", ".join(signer_names(signature.get("signers")))
                    say(
                        out, f"      signed by {signed} ({signature.get('format')} {signature.get('digest')})"
                    )
                for attestation in recorded_objects(recorded, "attestations"):
                    signed = ", ".join(signer_names(attestation.get("signers")))
                    say(out, f"      attested {attestation.get('predicate_type')} by {signed}")
                continue
            for built in recorded_objects(recorded, "build_manifests"):
                say(
                    out,
                    f"      audit ID {built.get('audit_id')}; TensorRT {built.get('tensorrt_version')}; "
                    f"precisions {', '.join(map(str, built.get('precisions') or []))}; build manifest "
                    f"{built.get('digest')} signed by {', '.join(signer_names(built.get('signers')))}",
                )
            for control in recorded_objects(recorded, "change_control"):
                _print_change_control(control, out)
            comparison = comparisons.get((entry.seq, change.slot))
            if comparison is not None:
                _print_comparison(change.old, comparison, out)
    if comparisons:
        say(out, "\n(build manifests compared as attached now; the records name the ones counted)")


def _print_change_control(control: dict[str, Any], out: TextIO) -> None:
    from trtguard.audit import recorded_objects, signer_names  # noqa: PLC0415

    baselines = recorded_objects(control, "baselines")
    several = len(baselines) > 1
    compared = [
        f"{f'[{n}] ' if several else ''}{_baseline(b)}" for n, b in enumerate(baselines, start=1)
    ] or ["no earlier engine (a first build)"]
    say(out, f"      compared with ({control.get('policy')}): {'; '.join(compared)}")
    gated = set(control.get("gated") or [])
    kinds = []
    for change in recorded_objects(control, "changes"):
        kind = f"{change.get('kind')}{' (gated)' if change.get('kind') in gated else ''}"
        against = [i + 1 for i in change.get("against") or [] if isinstance(i, int)]
        kinds.append(f"{kind} {against}" if several else kind)
    say(out, f"      change kinds: {', '.join(kinds) or 'none'}")
    approvals = recorded_objects(control, "approvals")
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
