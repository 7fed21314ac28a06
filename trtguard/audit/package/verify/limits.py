"""What no check of an evidence package can show, said plainly beside what it proves."""

from __future__ import annotations

from trtguard.audit.package.contents import NO_SOURCE, ChainScope, EvidencePackagePredicate
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings


def add_known_limits(
    predicate: EvidencePackagePredicate, lines: list[RecordLine], findings: Findings
) -> None:
    """Add the limits of every package, and those of this package's chain scope, selection and source."""
    log = predicate.log
    report = log.report
    findings.limits.insert(
        0,
        "Records removed from the end of the log before the export, or a log rewritten as a whole: a "
        "hash chain shows neither by itself. The log head at export was seq "
        f"{report.head_seq}, hash {report.head_hash}; compare it with a head recorded earlier (`trtguard "
        "audit verify --format json`) or pass one as --anchor SEQ:HASH.",
    )
    if log.chain is ChainScope.SEGMENT and lines:
        findings.limits.append(
            f"Anything about the records before seq {lines[0].seq}: the package starts at the first "
            "selected decision (export with --chain full for the whole log)."
        )
    if log.chain is ChainScope.SELECTED:
        findings.limits.append(
            "That the selected decisions are all there are, or that the records between them are intact: "
            "only the selected records are included; for the rest there is only the exporter's signed "
            f"statement that all {report.records} records of the log verified up to seq "
            f"{report.head_seq}."
        )
    if predicate.selection.by == "audit_id":
        findings.limits.append(
            f"That no engine outside the package carries audit ID {predicate.selection.value!r}: the "
            "exporter searched the build manifests its evidence source returned for the log's engines."
        )
    if predicate.evidence_source == NO_SOURCE:
        findings.limits.append(
            "Anything about how the engines were built, approved or verified: the export was given no "
            "evidence source, so the package holds no attestations or signatures."
        )
    else:
        findings.limits += [
            f"That {predicate.evidence_source} held no other attestations or signatures for these "
            "engines than the package includes.",
            "That an engine artifact's digest and the engine file digest its attestations name belong "
            "together: the artifact's OCI manifest is not included (subject digests as the source "
            "reported).",
        ]
    findings.limits += [
        "That the keys in the included TrustedKeys documents are the ones your organisation trusts.",
        "That the webhook judged rightly: the package shows what was decided and under which policies; "
        "it does not evaluate them again.",
    ]
    findings.limits += [f"Noted at export: {problem}" for problem in predicate.problems]
