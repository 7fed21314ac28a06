"""Whether an evidence package's selection is right and complete: the rule applied again to every record."""

from __future__ import annotations

from decisionlog import original_id
from trtguard.audit.package.contents import ChainScope, EvidencePackagePredicate
from trtguard.audit.package.selection import Selection
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings, listed


def check_selection(
    predicate: EvidencePackagePredicate,
    lines: list[RecordLine],
    audit_engines: frozenset[str],
    findings: Findings,
) -> None:
    """Every selected record matches the rule and every other record does not.

    ``audit_engines`` are the engines whose build manifest, verified in the package, carries the audit ID.
    """
    if not lines:
        return
    selection = Selection(predicate.selection.by, predicate.selection.value)
    chosen = set(predicate.selection.records)
    _not_delivered(lines, chosen, findings)
    wrong = [
        line.seq for line in lines if line.seq in chosen and not selection.matches(line.record, audit_engines)
    ]
    missed = [
        line.seq for line in lines if line.seq not in chosen and selection.matches(line.record, audit_engines)
    ]
    if wrong:
        findings.fail(
            "selection",
            f"decisions listed as selected do not match the rule: seq {listed(map(str, wrong))}",
        )
    if missed:
        findings.fail(
            "selection", f"decisions that match the rule were left out: seq {listed(map(str, missed))}"
        )
    if wrong or missed:
        return
    if predicate.log.chain is ChainScope.SELECTED:
        findings.note("selection", "completeness cannot be checked: only the selected records are included")
        return
    findings.ok(
        "selection",
        f"complete: of the {len(lines)} records seq {lines[0].seq}..{lines[-1].seq}, exactly the "
        f"{len(chosen)} selected match the rule: {selection.rule()}",
    )


def _not_delivered(lines: list[RecordLine], chosen: set[int], findings: Findings) -> None:
    """Note the selected allows that an undelivered record in the package names: the API server got a deny.

    Matched by the undelivered record's ``uid`` and the ``record_id`` derived from the allow's, not by its
    message (decisionlog._undelivered).
    """
    named = {
        (line.record.uid, original): line.seq
        for line in lines
        if (original := original_id(line.record)) is not None
    }
    found = [
        f"{line.seq} (AnswerNotDelivered at seq {named[key]})"
        for line in lines
        if line.seq in chosen
        and line.record.allowed
        and (key := (line.record.uid, line.record.record_id)) in named
    ]
    if found:
        findings.note(
            "selection",
            f"selected allows whose answer was not delivered (the webhook answered deny, so they admitted "
            f"nothing): seq {listed(found)}",
        )
