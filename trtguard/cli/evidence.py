"""``trtguard evidence export``, ``verify`` and ``report``: signed evidence packages for auditors.

``export`` reads the decision log read-only; ``verify`` and ``report`` (an HTML page of a verified package,
docs/evidence-report.md) need nothing but the package and the exporter's public key. What a package
proves, and what no package can, is described in :mod:`trtguard.audit.package`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from trtguard.cli._args import add_evidence_arguments, wants_evidence
from trtguard.cli._audit_log import add_decision_log_argument, log_url
from trtguard.cli._commands import Subparsers, add_command_group, add_subcommand
from trtguard.cli._key_files import load_public_key, load_signing_key
from trtguard.cli._keys import add_password_arguments
from trtguard.cli._output import check_output
from verifier.base import InputError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from decisionlog import DecisionStore
    from trtguard.audit.package import EvidencePackageReport, ExportSummary, Selection
    from verifier.evidence import EvidenceSource

_WIDTH = 110
_CHAIN_HELP = (
    "how much of the hash chain to include: 'segment' (default) every record from the first selected "
    "decision to the log head; 'full' every record from the first; 'selected' only the selected records "
    "(keeps other workloads' decisions out, but shows no links between them)"
)
_LIMITS = (
    "A package cannot show records removed from the end of the log before the export, nor a log rewritten "
    "as a whole: compare the exported head with one recorded earlier (`trtguard audit verify --format "
    "json`), or pass it to verify as --anchor SEQ:HASH."
)


def register(subparsers: Subparsers) -> None:
    """Add ``evidence export``, ``evidence verify`` and ``evidence report``."""
    commands = add_command_group(
        subparsers,
        "evidence",
        description="Signed evidence packages: decisions with their hash-chain proof, engine attestations "
        "and the policies in force, in one tar.gz an auditor checks offline.",
    )

    export = add_subcommand(
        commands,
        "export",
        help="write the evidence package for an audit ID, an engine or a workload",
        description="Select decisions from the decision log and write them, with the hash-chain records that "
        "prove them, the engines' build manifests, approvals, verification attestations and signatures, and "
        "the policy files in force, into one tar.gz whose index is signed with --key. Selection: --audit-id "
        "(decisions naming an engine whose build manifest carries the ID), --engine (real admissions of "
        "that engine), --workload (every decision about one workload: NAMESPACE/KIND/NAME, or NAMESPACE/NAME "
        "when the log knows one workload of that name).",
        epilog=_LIMITS,
    )
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--audit-id", metavar="ID", help="engines whose build manifest carries this audit ID")
    which.add_argument("--engine", metavar="DIGEST", help="an engine digest, sha256:<hex>")
    which.add_argument(
        "--workload",
        metavar="NAMESPACE/KIND/NAME",
        help="e.g. prod/Deployment/resnet50, prod/Job.batch.volcano.sh/train, or prod/resnet50",
    )
    add_decision_log_argument(export)
    export.add_argument(
        "--policies", nargs="+", type=Path, required=True, metavar="PATH", help="the policy files in force"
    )
    add_evidence_arguments(export, "the engines' attestations")
    export.add_argument("--key", type=Path, required=True, metavar="KEY", help="private key to sign with")
    add_password_arguments(export)
    export.add_argument(
        "--chain", choices=("segment", "full", "selected"), default="segment", help=_CHAIN_HELP
    )
    export.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="limit for fetching evidence (60)"
    )
    _output_arguments(export, "the .tar.gz to write")
    export.set_defaults(handler=_export)

    verify = add_subcommand(
        commands,
        "verify",
        help="check an evidence package offline and say what it proves",
        description="Check the index signature, every file's hash and size, the decisions' hash chain and "
        "the selection, the policy revision, and each engine attestation and signature against the keys of "
        "the included TrustedKeys documents. Exit 0 when everything verified, 1 when a check failed, 2 when "
        "the file cannot be used.",
        epilog=_LIMITS,
    )
    _package_arguments(verify, "FILE")
    verify.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or JSON")
    verify.set_defaults(handler=_verify)

    report = add_subcommand(
        commands,
        "report",
        help="verify an evidence package and write one self-contained HTML page an auditor reads",
        description="Verify the package as `evidence verify` does and write an HTML page that starts with "
        "the outcome: for a package that verified, what it covers, the timeline of admitted engine and image "
        "changes, each engine's build record and GPU verification, the denials, the policy snapshot and the "
        "hash-chain proof; for one that failed, the failed checks in red and nothing else of it. The page "
        "loads and runs nothing. Exit 0 when the package verified, 1 when a check failed (the page is "
        "written and says so), 2 when a file cannot be used.",
    )
    _package_arguments(report, "PACKAGE")
    _output_arguments(report, "the .html to write")
    report.set_defaults(handler=_report)


def _package_arguments(parser: argparse.ArgumentParser, metavar: str) -> None:
    """The package to check (``metavar`` in the help), the exporter's key and ``--anchor``: what ``verify``
    and ``report`` read."""
    parser.add_argument("archive", type=Path, metavar=metavar, help="the package (.tar.gz)")
    parser.add_argument("--key", type=Path, required=True, metavar="PUB", help="the exporter's public key")
    parser.add_argument(
        "--anchor",
        action="append",
        default=[],
        metavar="SEQ:HASH",
        help="a chain head recorded independently, to check the package's chain against (repeatable)",
    )


def _output_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``-o/--output FILE`` (``what``: its help) and ``--force``."""
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help=what)
    parser.add_argument("--force", action="store_true", help="replace an existing output file")


def _selection(args: argparse.Namespace) -> Selection:
    from trtguard.audit.package import Selection  # noqa: PLC0415 - keep `trtguard --help` light

    if args.audit_id is not None:
        return Selection.audit_id(args.audit_id)
    if args.engine is not None:
        return Selection.engine(args.engine)
    return Selection.workload(args.workload)


def _export(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from decisionlog import open_store  # noqa: PLC0415
    from trtguard.audit.package import ChainScope, export_evidence_package  # noqa: PLC0415
    from verifier.base import Deadline  # noqa: PLC0415

    out = out or sys.stdout
    if args.timeout <= 0:
        raise InputError("--timeout must be positive", location="--timeout")
    selection = _selection(args)
    check_output(args.output, "the package")  # before the key's password is asked for
    key = load_signing_key(args.key, args)
    url = log_url(args)

    async def main() -> tuple[ExportSummary, Selection]:
        store = open_store(url, read_only=True)
        await store.open()
        close: Callable[[], Awaitable[None]] = _nothing
        try:
            chosen = await _one_workload(store, selection)
            evidence, close = await _source(args)
            return await export_evidence_package(
                store,
                chosen,
                policies=args.policies,
                evidence=evidence,
                key=key,
                output=args.output,
                chain=ChainScope(args.chain),
                deadline=Deadline.after(args.timeout),
                overwrite=args.force,
            ), chosen
        finally:
            try:
                await close()
            finally:
                await store.close()

    summary, selection = asyncio.run(main())
    _print_summary(summary, selection, out)
    for problem in summary.problems:
        print(f"trtguard: warning: {problem}", file=sys.stderr)
    return 0


async def _one_workload(store: DecisionStore, selection: Selection) -> Selection:
    """A ``NAMESPACE/NAME`` selection as the one workload of that name the log knows
    (``NAMESPACE/KIND/NAME``), an error when it knows several: the package is about one workload."""
    from trtguard.audit.package import Selection  # noqa: PLC0415
    from trtguard.audit.workloads import resolve_workload  # noqa: PLC0415

    if selection.kind != "workload" or selection.identity is not None:
        return selection
    found = await resolve_workload(store, selection.value, where="--workload")
    return selection if found is None else Selection("workload", str(found))


async def _source(args: argparse.Namespace) -> tuple[EvidenceSource | None, Callable[[], Awaitable[None]]]:
    from verifier import evidence_source  # noqa: PLC0415

    if not wants_evidence(args):
        return None, _nothing
    evidence, client = await asyncio.to_thread(
        evidence_source,
        attestations=args.attestations,
        registry_config=args.registry_config,
        registry=args.registry,
    )
    return evidence, (client.aclose if client is not None else _nothing)


async def _nothing() -> None:
    return None


def _print_summary(summary: ExportSummary, selection: Selection, out: TextIO) -> None:
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(summary.attestations.items()))
    print(f"wrote {summary.output} ({_size(summary.size)}, {summary.files} files)", file=out)
    print(
        f"  sha256: {summary.sha256} (keep it: `evidence verify` covers the files, not these bytes)", file=out
    )
    print(f"  decisions: {summary.decisions} selected: {selection.rule()}", file=out)
    print(
        f"  chain: {summary.chain}, {summary.chain_records} record(s) seq {summary.first_seq}.."
        f"{summary.last_seq} (log head at export: seq {summary.head_seq})",
        file=out,
    )
    print(
        f"  engines: {summary.engines} ({kinds or 'no attestations'}; {summary.signatures} signatures)",
        file=out,
    )
    print(f"  images: {summary.images} ({summary.image_signatures} signatures)", file=out)
    in_force = (
        "in force for every selected decision"
        if summary.policy_in_force
        else "NOT the revision every selected decision names (the package says which)"
    )
    print(f"  policies: revision {summary.policy_revision}, {in_force}", file=out)
    if summary.problems:
        print(f"  {len(summary.problems)} problem(s) noted in the package (see the warnings)", file=out)


def _verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from trtguard.audit.package import Anchor, verify_evidence_package  # noqa: PLC0415

    out = out or sys.stdout
    key = load_public_key(args.key)
    anchors = [Anchor.parse(text) for text in args.anchor]
    report = verify_evidence_package(args.archive, key, anchors=anchors)
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False), file=out)
    else:
        _print_report(report, out)
    return 0 if report.ok else 1


def _report(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from trtguard.audit.package import Anchor  # noqa: PLC0415

    out = out or sys.stdout
    check_output(args.output, "the report")  # before the package is read and verified
    key = load_public_key(args.key)
    anchors = [Anchor.parse(text) for text in args.anchor]
    try:
        # Jinja2 and matplotlib come with the `report` extra; the webhook's installation needs neither.
        from trtguard.audit.report import write_report  # noqa: PLC0415
    except ImportError as error:
        raise InputError(
            f"the report needs a package that is not installed ({error.name})",
            location="trtguard evidence report",
            hint="install trtguard with its report extra: pip install 'trtguard[report]'",
        ) from None
    view = write_report(args.archive, key, args.output, anchors=anchors, overwrite=args.force)
    verdict = "VERIFIED" if view.verified else f"FAILED ({len(view.verification.failures)} check(s))"
    print(f"wrote {args.output}: package {verdict}", file=out)
    return 0 if view.verified else 1


def _print_report(report: EvidencePackageReport, out: TextIO) -> None:
    print(f"evidence package {report.archive}", file=out)
    if report.selection is not None:
        print(f"  selection: {report.selection}", file=out)
        print(f"  exported:  {report.exported_at}", file=out)
    print(f"  key id:    {report.key_id}", file=out)
    if report.archive_sha256 is not None:
        print(
            f"  sha256:    {report.archive_sha256} (the archive file; the signature covers its files)",
            file=out,
        )
    print(file=out)
    for finding in report.findings:
        label = f"{finding.status.upper():<5} {finding.topic:<10} "
        print(_wrap(finding.message, label, " " * len(label)), file=out)
    for title, items in (("Proves:", report.proves), ("Does not prove:", report.does_not_prove)):
        if items:
            print(f"\n{title}", file=out)
            for item in items:
                print(_wrap(item, "  - ", "    "), file=out)
    failures = report.failures
    if failures:
        print(f"\nFAILED: {len(failures)} check(s) failed; first: {failures[0].message}", file=out)
    else:
        print("\nVERIFIED: every check passed", file=out)


def _wrap(text: str, first: str, rest: str) -> str:
    return textwrap.fill(text, _WIDTH, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def _size(count: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
