"""``trtguard check``: dry-run the policies over rendered manifests, offline or against a registry.

With ``--decision-log URL`` change control reads the webhook's decision log (read-only) for what each workload
last admitted, as the webhook does; without it every workload a policy with ``changeControl`` selects gets a
note that history was not consulted (``policies.evaluator.HISTORY_NOT_CONSULTED``). With it, a resource that
names no namespace is an input error (exit 2) unless ``--namespace`` says where it is applied: its history is
by namespace, and a guess would read another workload's.

Resources are judged as the admission chain judges them: the mutating webhook's pins first (each tag a
``pinDigest`` rule verified, listed as ``pinned:``), then every policy over the pinned object, as the
validating webhook sees it (policies/README.md, "Pinning by digest"). ``--fix`` prints the manifests with
those pins; a resource it does not pin (denied, not judged, unreadable) is printed as it was, and said so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policies.check import (
    CheckReport,
    Outcome,
    Resource,
    check,
    check_in_processes,
    fixed,
    input_files,
    read_resources,
)
from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.report import FORMATS, render, yaml_stream
from policies.requesters import Requester
from policies.results import Action
from trtguard.cli._args import (
    add_clock_argument,
    add_evidence_arguments,
    add_requester_arguments,
    clock,
    impersonation,
)
from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli._output import check_output, write_output
from verifier.base import InputError, visible
from verifier.evidence_choice import evidence_source

if TYPE_CHECKING:
    from policies.evaluation import AdmissionHistory


def register(subparsers: Subparsers) -> None:
    """Add ``check``."""
    parser = add_command(
        subparsers,
        "check",
        description=(
            "Evaluate the workloads in FILE|DIR|- (built-in kinds, the shipped operator kinds and the "
            "policies' WorkloadKinds) against the policies: offline with --attestations, or against the "
            "registries with --registry."
        ),
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE|DIR|-", help="YAML/JSON manifests; - reads stdin")
    parser.add_argument(
        "--policies",
        type=Path,
        action="append",
        required=True,
        metavar="PATH",
        help="policy file or directory (repeatable)",
    )
    add_evidence_arguments(parser, "digests, signatures and attestations")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the report here, not stdout")
    parser.add_argument(
        "--namespace",
        metavar="NS",
        default=None,
        help="the namespace the resources are applied to, as with kubectl apply: resources that name none "
        "are judged there, and one that names another is an input error (default: each resource in the "
        "namespace it names, 'default' for those that name none)",
    )
    parser.add_argument(
        "--unknown-kinds",
        choices=("warn", "fail", "judge"),
        default="warn",
        help="resources of kinds trtguard does not know that name images: list them, unchecked (warn); also "
        "fail the run with exit status 1 (fail); or judge the images found in them, as the webhook does when "
        "such a kind is sent to it (judge) (default: warn)",
    )
    add_requester_arguments(
        parser,
        "who applies the resources (a username, or system:serviceaccount:NS:NAME), for policies about the "
        "requester; without it those rules cannot be checked (see --unverifiable)",
    )
    parser.add_argument(
        "--decision-log",
        metavar="URL",
        help="the webhook's decision log (a SQLite file, sqlite:///path or postgresql://…), read-only: "
        "change control compares each engine with the one its workload last admitted, as the webhook does "
        "(without it, a note says that history was not consulted); a resource that names no namespace then "
        "needs --namespace (exit 2 otherwise)",
    )
    parser.add_argument(
        "--unverifiable",
        choices=("deny", "warn"),
        default=None,
        help="action for rules whose evidence cannot be fetched here (offline, a registry down, no --as; "
        "default: each policy's onError); evidence that was fetched but cannot tell (an unrated finding, an "
        "empty SBOM) keeps its policy's onIndeterminate",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="print the manifests (YAML, one document per resource, in their own key order; comments and "
        "List wrappers are not kept) with every tag a pinDigest rule verified pinned to that digest "
        "(name:tag@sha256:…), the same patch /mutate answers; a resource not pinned is printed as it was, "
        "and stderr says why; the report goes to stderr (or --output)",
    )
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N",
        help="processes that judge the resources, offline (--attestations) and without --decision-log; the "
        "report is the same for any N (default: 1, this process only; more pay off on idle CPUs only: "
        "each process judges with its own caches, and its decisions are copied back)",
    )
    add_clock_argument(
        parser, judged="certificate validity, signature expiry, maxAge, scan ages and approvals' expiry"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        return _checked(args)
    finally:
        gc.unfreeze()  # called in a process that goes on (a test), what was read may be collected again


def _checked(args: argparse.Namespace) -> int:
    impersonated = impersonation(args)
    requester = Requester.impersonated(*impersonated) if impersonated else None
    if args.output is not None:
        check_output(args.output, "the report")  # before any evidence is fetched
    evidence, client = evidence_source(
        attestations=args.attestations, registry_config=args.registry_config, registry=args.registry
    )
    policy_set = load_policy_set(args.policies)
    report = CheckReport(policy_revision=policy_set.revision, fail_unknown_kinds=args.unknown_kinds == "fail")
    with _uncollected():
        resources = list(
            read_resources(_inputs(args, report.problems), sys.stdin.buffer.read, report.problems)
        )
    unverifiable = {None: None, "deny": Action.DENY, "warn": Action.WARN}[args.unverifiable]

    log = _decision_log_url(args.decision_log)
    if log is not None and args.namespace is None:
        report.problems.extend(_unplaced(resources))

    options: dict[str, Any] = {
        "namespace": args.namespace,
        "unverifiable": unverifiable,
        "unknown_kinds": "judge" if args.unknown_kinds == "judge" else "report",
        "requester": requester,
        "pin": True,  # as admitted: the mutating webhook first
    }

    async def run() -> list[Outcome]:
        try:
            async with _history(log) as history:
                evaluator = PolicyEvaluator(policy_set, evidence, history=history, clock=clock(args))
                return await check(evaluator, resources, **options)
        finally:
            if client is not None:
                await client.aclose()

    if log is None and client is None:
        # Nothing to open or close: the resources may be judged in several processes.
        evaluator = PolicyEvaluator(policy_set, evidence, clock=clock(args))
        report.outcomes = check_in_processes(evaluator, resources, processes=args.jobs, **options)
    else:
        report.outcomes = asyncio.run(run())
    gc.freeze()  # the outcomes too live until the end: the report's allocations need not rescan them
    with _uncollected():  # what the report is made of holds no cycles (10,000 policy reports: half the time)
        text = render(report, args.format, now=clock(args)())
    if args.output is not None:
        write_output(args.output, text.encode(), "the report")
    else:
        (sys.stderr if args.fix else sys.stdout).write(text)
    if args.output is not None or args.format != "table":
        # The report holds them too, but a person at the terminal should not need it to see why exit 2.
        for problem in report.problems:
            print(f"trtguard: input error: {problem.diagnostics()}", file=sys.stderr)
    if args.fix:
        with _uncollected():
            text, untouched = _fixed_manifests(report)
        sys.stdout.write(text)
        for line in untouched:
            print(f"trtguard: --fix: {visible(line)}", file=sys.stderr)
    return report.exit_code


def _jobs(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of processes, 1 or more: {value!r}")
    return int(value)


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """Reading (or writing) without the cycle collector, then what was made set aside from it
    (:func:`gc.freeze`).

    What is read lives until the run ends and holds no cycles, yet the collector would rescan it over and
    over while it grows and while each resource is judged (10,000 resources: about a fifth of the run).
    Reading makes little cyclic garbage (a refused recursive alias), and the collector runs again after.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _inputs(args: argparse.Namespace, problems: list[InputError]) -> list[str]:
    """The input files, without the report ``-o`` writes: a report written into a folder it scans is not
    read back as a manifest on the next run."""
    files = input_files(args.inputs, problems)
    if args.output is None:
        return files
    output = args.output.resolve()
    return [item for item in files if item == "-" or Path(item).resolve() != output]


def _fixed_manifests(report: CheckReport) -> tuple[str, list[str]]:
    """Every resource read, pinned where its decision allows it (comments and List wrappers are not kept),
    and a line for each one printed as it was for another reason than having nothing to pin (denied, not
    judged, not checked) and for each document that could not be read (it is left out)."""
    documents, untouched = [], []
    for outcome in report.outcomes:
        document, why = fixed(outcome)
        documents.append(document)
        if why is not None:
            untouched.append(f"{outcome.resource.title} ({outcome.resource.source}:{outcome.resource.line}) "
                             f"{why}: printed as it was")  # fmt: skip
    for problem in report.problems:  # nothing was read of it that could be printed again
        untouched.append(f"{problem.location or 'an input'} could not be read, so it is not in the output")
    return yaml_stream(documents), untouched


def _unplaced(resources: list[Resource]) -> list[InputError]:
    """An input error for each resource that names no namespace, when the history is asked for: its history
    is by namespace, which only ``--namespace`` can tell (a guess, such as ``default``, would read another
    workload's and judge change control against it, or none, and allow what the webhook denies)."""
    return [
        InputError(
            f"{resource.title} names no namespace, so --decision-log cannot read the engines last admitted "
            "for it",
            location=f"{resource.source}:{resource.line}",
            hint="pass --namespace NS (the namespace it is applied to, as kubectl apply -n NS), or name it "
            "in metadata.namespace",
        )
        for resource in resources
        if resource.namespace is None
    ]


def _decision_log_url(value: str | None) -> str | None:
    """``--decision-log`` as a store URL: a plain path names a SQLite file, which must exist (check never
    creates one)."""
    if value is None:
        return None
    url = value if "://" in value else f"sqlite:///{Path(value).resolve()}"
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///").partition("?")[0])
        if not path.is_file():
            raise InputError(
                "the decision log file does not exist",
                location=str(path),
                hint="pass the --decision-log that `trtguard serve` writes to (check never creates one)",
            )
    return url


@contextlib.asynccontextmanager
async def _history(url: str | None) -> AsyncIterator[AdmissionHistory | None]:
    """The decision log at ``url`` as change control's history, opened read-only (None: no history).

    Read-only: no file, table or lock is created, the writer's lock is never taken (SQLite ``mode=ro``;
    PostgreSQL sessions with ``default_transaction_read_only``). A log that cannot be read, or is not a
    decision log, is an input error (exit 2), as is a PostgreSQL server that cannot be reached.
    """
    if url is None:
        yield None
        return
    from decisionlog import DecisionLogError, RecordQuery, open_store  # noqa: PLC0415
    from webhook import DecisionLogHistory  # noqa: PLC0415 - only when asked for

    try:
        store = open_store(url, read_only=True)
        await store.open()
    except DecisionLogError as error:
        raise InputError(error.message, location="--decision-log", hint=error.hint) from None
    try:
        await store.query(RecordQuery(limit=1))  # a log that cannot answer fails here, not per engine
    except DecisionLogError as error:
        await store.close()
        raise InputError(
            f"cannot read the decision log: {error.message}",
            location=store.description,
            hint=error.hint or "pass the URL `trtguard serve --decision-log` writes to",
        ) from None
    try:
        yield DecisionLogHistory(store)
    finally:
        await store.close()
