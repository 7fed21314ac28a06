"""``trtguard audit-cluster``: every running workload the policies cover, judged as ``check`` judges files.

Exit status: 0 when everything is allowed, 1 when a workload would be denied, 2 when the audit is incomplete
(a kind that could not be listed, a workload that could not be checked, a report that could not be written)
or cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trtguard.cli._args import add_evidence_arguments
from trtguard.cli._commands import Subparsers, add_command, deferred


def register(subparsers: Subparsers) -> None:
    """Add ``audit-cluster``."""
    parser = add_command(
        subparsers,
        "audit-cluster",
        description=(
            "List every workload of every kind the policies cover (built-in kinds, the shipped operator "
            "kinds and the policies' WorkloadKinds) from the cluster's API server, judge each as `trtguard "
            "check` does, print the verdicts and, with --apply, write them as wgpolicyk8s.io PolicyReports."
        ),
    )
    parser.add_argument("--policies", type=Path, action="append", required=True, metavar="PATH")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account inside a Pod",
    )
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: its current one)")
    parser.add_argument("--namespace", metavar="NS", help="audit one namespace (default: every namespace)")
    parser.add_argument("--format", choices=("table", "json", "policy-report"), default="table")
    parser.add_argument(
        "--apply", action="store_true", help="create or update the PolicyReports in the cluster"
    )
    parser.add_argument(
        "--decision-log",
        metavar="URL",
        help="the webhook's decision log, read-only: change control compares each engine with the one its "
        "workload last admitted, as the webhook does",
    )
    parser.add_argument("--request-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="the most one API request may take, from connecting to the last byte of its "
                        "answer (default: 30)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                        help="the most the whole audit may take, listing, retries and judging included; past "
                        "it the audit stops with exit status 2 (default: 900)")  # fmt: skip
    parser.add_argument(
        "--retries",
        type=int,
        default=4,
        metavar="N",
        help="retries of a request answered 429 or 5xx, or not answered (default: 4)",
    )
    parser.add_argument("--page-size", type=int, default=500, metavar="N", help="objects per list page")
    parser.add_argument("--max-pages", type=int, default=10_000, metavar="N",
                        help="pages of one list before it is given up (default: 10000)")  # fmt: skip
    parser.add_argument("--max-response-mib", type=int, default=128, metavar="MIB",
                        help="the largest answer read from the API server (default: 128)")  # fmt: skip
    add_evidence_arguments(parser, "digests, signatures and attestations")
    parser.set_defaults(handler=deferred(__name__, "run"))


def run(args: argparse.Namespace) -> int:
    """Run the audit (the command's handler)."""
    from policies.evaluator import PolicyEvaluator  # noqa: PLC0415 - the command's own weight
    from policies.loader import load_policy_set  # noqa: PLC0415
    from policies.policy_report import policy_reports  # noqa: PLC0415
    from trtguard.cli.check import _decision_log_url, _history  # noqa: PLC0415
    from trtguard.cluster import (  # noqa: PLC0415
        Audit,
        ClusterSettings,
        apply_reports,
        connect,
        judge,
        list_workloads,
        served_kinds,
    )
    from verifier.base import InputError  # noqa: PLC0415
    from verifier.evidence_choice import evidence_source  # noqa: PLC0415

    if min(args.page_size, args.max_pages, args.max_response_mib) < 1 or args.retries < 0:
        raise InputError(
            "--page-size, --max-pages and --max-response-mib must be 1 or more, and --retries 0 or more"
        )
    if not (0 < args.request_timeout < math.inf and 0 < args.timeout < math.inf):
        raise InputError("--request-timeout and --timeout must be numbers of seconds above 0")
    policy_set = load_policy_set(args.policies)
    settings = ClusterSettings(
        kubeconfig=args.kubeconfig,
        context=args.context,
        request_timeout=args.request_timeout,
        timeout=args.timeout,
        retries=args.retries,
        page_size=args.page_size,
        max_pages=args.max_pages,
        max_response_bytes=args.max_response_mib * 1024 * 1024,
    )
    api = connect(settings)
    audit = Audit()
    served_kinds(api, policy_set.kinds, audit)
    objects = [obj for kind in audit.kinds for obj in list_workloads(api, kind, args.namespace, audit)]
    evidence, client = evidence_source(
        attestations=args.attestations, registry_config=args.registry_config, registry=args.registry
    )
    log = _decision_log_url(args.decision_log)

    async def evaluate() -> None:
        try:
            async with asyncio.timeout(api.deadline.remaining()), _history(log) as history:
                evaluator = PolicyEvaluator(policy_set, evidence, history=history)
                audit.verdicts = await judge(evaluator, objects)
        except TimeoutError:
            raise api.out_of_time(f"judging {len(objects)} workloads") from None
        finally:
            if client is not None:
                await client.aclose()

    asyncio.run(evaluate())
    reports = policy_reports(audit.verdicts, now=datetime.now(UTC))
    applied: list[str] = []
    if args.apply:
        namespaces = [args.namespace] if args.namespace else None
        try:
            applied = apply_reports(api, reports, namespaces=namespaces)
        except Exception as error:  # an ApiError, or a bug: the verdicts still print, the run says it failed
            audit.gaps.append(f"writing the PolicyReports: {error}")
    sys.stdout.write(_render(args.format, audit, reports, applied))
    for gap in audit.gaps:
        print(f"trtguard: incomplete: {gap}", file=sys.stderr)
    unchecked = audit.unchecked()
    for line in _unchecked_lines(unchecked):
        print(f"trtguard: incomplete: {line}", file=sys.stderr)
    if audit.gaps or unchecked:
        return 2
    counts = audit.counts()
    return 1 if counts["denied"] or counts["unreadable"] else 0


#: Workloads that could not be checked named on stderr, one a line; the rest are counted (the table and
#: ``--format json`` show every one).
_NAMED_UNCHECKED = 20


def _unchecked_lines(unchecked: list[Any]) -> list[str]:
    """stderr's account of the workloads that could not be checked: each (up to a bound) with its first
    rule that could not be checked."""
    from verifier.base import visible  # noqa: PLC0415

    if not unchecked:
        return []
    lines = [
        f"{len(unchecked)} workload(s) could not be checked; their verdict is the policies' onError, not "
        "what the rules would find"
    ]
    for subject, decision in unchecked[:_NAMED_UNCHECKED]:
        first = next(v for v in decision.violations if v.error)
        lines.append(visible(f"could not check {_title(subject)}: {first.one_line()}"))
    if len(unchecked) > _NAMED_UNCHECKED:
        lines.append(f"and {len(unchecked) - _NAMED_UNCHECKED} more (--format json lists every one)")
    return lines


def _title(subject: Any) -> str:
    """``Deployment team-a/app-0``."""
    return f"{subject.kind} {subject.namespace + '/' if subject.namespace else ''}{subject.name}"


def _render(fmt: str, audit: Any, reports: list[dict[str, Any]], applied: list[str]) -> str:
    import yaml  # noqa: PLC0415

    from trtguard.cluster import outcome  # noqa: PLC0415
    from verifier.base import InputError, visible  # noqa: PLC0415

    if fmt == "policy-report":
        return "".join("---\n" + yaml.safe_dump(r, sort_keys=False, allow_unicode=True) for r in reports)
    counts = audit.counts()
    if fmt == "json":
        items = []
        for subject, verdict in audit.verdicts:
            head = {"apiVersion": subject.api_version, "kind": subject.kind, "namespace": subject.namespace,
                    "name": subject.name, "uid": subject.uid, "outcome": outcome(verdict)}  # fmt: skip
            if isinstance(verdict, InputError):
                items.append({**head, "error": verdict.message, "location": verdict.location})
            else:
                items.append({**head, **verdict.to_json()})
        document = {
            "workloads": items,
            "summary": counts,
            "incomplete": bool(audit.gaps or counts["unchecked"]),
            "kinds": [k.definition.name for k in audit.kinds],
            "not_served": audit.not_served,
            "gaps": audit.gaps,
            "pages": audit.pages,
            "applied": applied,
        }
        return json.dumps(document, indent=1) + "\n"
    lines = []
    for subject, verdict in audit.verdicts:
        title, found = _title(subject), outcome(verdict)
        if isinstance(verdict, InputError):
            lines.append(f"ERROR  {title}: {verdict.message}")
            continue
        if found == "skipped":
            continue
        label = {"allowed": "ALLOW ", "denied": "DENY  ", "unchecked": "UNCHECKED"}[found]
        lines.append(f"{label} {title}")
        # x: a rule refuses it; ?: a rule could not be checked; !: a warning
        lines += [f"  x {v.one_line()}" for v in verdict.denials if not v.error]
        lines += [f"  ? {v.one_line()}" for v in verdict.violations if v.error]
        lines += [f"  ! {w.one_line()}" for w in verdict.warnings if not w.error]
    kinds = ", ".join(k.definition.name for k in audit.kinds)
    lines.append(
        f"{len(audit.verdicts)} workloads ({kinds}; {audit.pages} list pages): {counts['allowed']} allowed, "
        f"{counts['denied']} would be denied, {counts['unchecked']} could not be checked, "
        f"{counts['skipped']} skipped, {counts['unreadable']} unreadable"
    )
    if audit.not_served:
        lines.append(f"not served by this cluster: {', '.join(audit.not_served)}")
    lines += applied
    return "\n".join(map(visible, lines)) + "\n"
