"""Image attestations that read what the document says (``images[].attestations[]``, docs/scans.md).

The attestation must be signed by the rule's signers and, for SBOMs and scans (:mod:`verifier.scans`, any
member of the predicate type's family), the newest one by the time it records is judged, among the
documents of the role the rule judges (``document``: an SBOM is no scan, a VEX document neither); documents
that tie for the newest are all judged (each must hold, so the stricter wins), and a rule that judges no
one role judges the newest of each; an undated document is judged beside them (it may be newer). A
document dated in the future (beyond
:data:`~policies.evaluation._state.CLOCK_SKEW`) is refused whatever the rule says: it would be the newest
until that time came and hide every document attested before it. ``maxAge`` measures a scan from the older
of its run and its vulnerability database, an SBOM from its making. For other predicate types every
signed attestation must meet the conditions.

The built-in checks: ``vulnerabilities`` (no affected finding, VEX deciding, above ``maxSeverity`` but
those an active allow-list entry names by any id or alias in any case; an expired entry stops matching and
the notes say so) and ``components`` (``required`` listed, ``banned`` not, by the name the package has in
its ecosystem: PEP 503 for PyPI, ``group:artifact`` for Maven, a purl naming the ecosystem too; a component
without a purl by its written name under PEP 503, so that a ban is not escaped by spelling). Conditions
are CEL over ``predicate`` (the signed predicate as it is), ``scan`` (the document read into one shape)
and ``now`` (the evaluation clock, RFC 3339 UTC).

What a document cannot tell (a severity no rating gives, a scan that skipped packages or audited nothing,
an empty SBOM, a signed document that does not read) is "cannot tell": a violation under the rule's
``unknown`` or the policy's ``onIndeterminate``, naming what could not be told, never a pass, and apart
from ``onError`` (evidence that could not be fetched). A condition that reads such an absent field fails
on the missing key, which is the same. Other condition failures (a type error) are violations under
``action``; a condition stopped by a time or memory bound is one under ``onError``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from policies.cel import MISSING_KEY_HINT, CelEvaluationError, prepare_activation
from policies.evaluation import CLOCK_SKEW, Evaluation
from policies.loader import CompiledAttestation, CompiledExpression
from policies.rules._components import component_findings
from policies.rules._findings import Findings, Refusal
from policies.rules._vulnerabilities import vulnerability_findings
from policies.schema import AttestationRule
from policies.verified import Documents, VerifiedPredicate
from verifier.base import ImageReference, TrtguardError
from verifier.scans import is_scan_predicate_type

__all__ = ["AttestationsJudged", "check"]

_READS_SCAN: Final = re.compile(r"\bscan\b")
_READS_PREDICATE: Final = re.compile(r"\bpredicate\b")


@dataclass(frozen=True, slots=True)
class AttestationsJudged:
    """What one attestation rule judged: the signed documents, and whether some signed by its keys could
    not be read (their time and findings unknown)."""

    documents: tuple[VerifiedPredicate, ...] = ()
    unreadable: bool = False
    scans: bool = False
    """Whether the rule reads SBOMs or scans (whose documents record the time they were made)."""

    @property
    def newest(self) -> datetime | None:
        """The newest time among the documents judged; None when any could be newer than that (an undated
        or unreadable one), or none was judged."""
        times = [d.scan.scanned_at if d.scan is not None else None for d in self.documents]
        if self.unreadable or not times or None in times:
            return None
        return max(t for t in times if t is not None)

    def outweighs(self, other: AttestationsJudged) -> bool:
        """Whether this rule's evidence (it found violations in it) is not shown to be older than what
        ``other`` judged (and passed): then ``other`` passing does not overrule it in an ``anyOf``
        (docs/scans.md, "anyOf")."""
        if not (self.scans and other.scans and (self.documents or self.unreadable)):
            return False
        mine, theirs = self.newest, other.newest
        return mine is None or theirs is None or theirs <= mine


async def check(
    run: Evaluation, found: Findings, rule_id: str, compiled: CompiledAttestation, pinned: ImageReference
) -> AttestationsJudged:
    """The attestation ``compiled`` asks of the pinned image: signed, of the document it judges, fresh
    enough, meeting its built-in checks and conditions.

    Returns the signed documents that were judged (none when none verified), for the decision record and
    for ``anyOf`` to weigh alternatives by the age of their evidence.
    """
    rule = compiled.rule
    scans = is_scan_predicate_type(rule.predicate_type)
    documents = await found.check(
        rule_id,
        run.image_predicates(pinned, rule, scans=scans),
        refused=Refusal("attach the attestation to the image digest (`trtguard attest --push`)"),
    )
    if documents is None:
        return AttestationsJudged(scans=scans)
    judged = await _judge(run, found, rule_id, compiled, pinned, documents)
    return AttestationsJudged(tuple(judged), unreadable=bool(documents.unreadable), scans=scans)


async def _judge(
    run: Evaluation,
    found: Findings,
    rule_id: str,
    compiled: CompiledAttestation,
    pinned: ImageReference,
    documents: Documents[VerifiedPredicate],
) -> list[VerifiedPredicate]:
    """The checks of :func:`check` over the documents that verified; returns those judged."""
    rule = compiled.rule
    scans = is_scan_predicate_type(rule.predicate_type)
    for why in documents.refused:
        run.note(f"image {pinned}: a {rule.predicate_type} attestation did not count: {why}")
    if documents.unreadable:
        newest = ", nor which one is the newest" if scans else ""
        found.add(
            rule_id,
            f"cannot tell what the {rule.predicate_type} attestations say{newest}: one signed by "
            f"[{', '.join(rule.keys)}], or one too large or too deep to check, cannot be read "
            f"({'; '.join(documents.unreadable)})",
            "remove the unreadable attestation from the image (or attest the document again, smaller: "
            "at most 16 MiB)",
            indeterminate=True,
        )
    kind = rule.judges()
    readable = list(documents.readable)
    if scans and kind is not None:
        # Only documents of the role the rule needs count: a fresh SBOM must not pass for a fresh scan, nor
        # a newer scan or VEX document hide the SBOM a components rule reads (docs/scans.md).
        readable = [d for d in readable if d.scan is not None and d.scan.role == kind]
        if documents.readable and not readable:
            _none_of_the_role(found, rule_id, rule, kind, len(documents.readable))
    if not readable:
        return []
    judged = _judged(run, pinned, rule, readable) if scans else readable
    if scans and [d for d in judged if _from_the_future(run.clock(), found, rule_id, rule, d)]:
        return judged  # each such document is named; the rule refuses them
    # Every judged document is judged in full and none decides for the others (docs/scans.md, "Ties"): one
    # that cannot tell says so, and the checks and conditions of each that can tell still run, in any order.
    mark = len(found.violations)
    if compiled.max_age is not None:
        _max_ages(run.clock(), found, f"{rule_id}.maxAge", rule, compiled.max_age, judged)
    told = [d for d in judged if kind is None or _tells(found, rule_id, rule, kind, d)]
    for document in told:
        if document.scan is not None and rule.vulnerabilities is not None:
            _vulnerabilities(run, found, f"{rule_id}.vulnerabilities", compiled, document, pinned)
        if document.scan is not None and rule.components is not None:
            await _components(run, found, f"{rule_id}.components", rule, document)
        await _conditions(run, found, rule_id, compiled.conditions, document)
    # documents that fail alike (a tie of two stale scans, one condition) say so once
    found.violations[mark:] = list(dict.fromkeys(found.violations[mark:]))
    return judged


def _vulnerabilities(
    run: Evaluation,
    found: Findings,
    rule_id: str,
    compiled: CompiledAttestation,
    document: VerifiedPredicate,
    pinned: ImageReference,
) -> None:
    """``vulnerabilities``: the scan's affected findings are within ``maxSeverity`` or allow-listed."""
    rule, scan = compiled.rule.vulnerabilities, document.scan
    if rule is None or scan is None:
        return
    said, notes = vulnerability_findings(scan, rule.max_severity, compiled.allowed.match, run.clock())
    for note in notes:
        run.note(f"image {pinned}: {note}")
    for finding in said:
        unknown = rule.unknown if finding.indeterminate else None
        found.add(rule_id, finding.message, finding.fix, indeterminate=finding.indeterminate, unknown=unknown)


async def _components(
    run: Evaluation, found: Findings, rule_id: str, rule: AttestationRule, document: VerifiedPredicate
) -> None:
    """The built-in ``components`` check of ``document``, charged to the evaluation's CPU budget (in its
    thread past a thousand components); past the budget, ``onError`` for this check alone, so that what
    the other checks found still stands."""
    components, scan = rule.components, document.scan
    if components is None or scan is None:
        return
    listed = scan.components
    try:
        findings = await run.computed(
            ("components", rule_id, tuple(components.required), tuple(components.banned), document.digest),
            lambda: component_findings(
                rule_id,
                required=components.required,
                banned=components.banned,
                listed=listed,
                origin=document.origin,
                step=run.budget.step,
            ),
            list(listed),
        )
    except TrtguardError as error:  # the budget spent (BudgetExceeded)
        found.unavailable(rule_id, error)
        return
    for finding in findings:
        found.add(
            finding.rule,
            finding.message,
            finding.fix,
            indeterminate=finding.indeterminate,
            unknown=components.unknown if finding.indeterminate else None,
        )


def _none_of_the_role(found: Findings, rule_id: str, rule: AttestationRule, kind: str, count: int) -> None:
    """Documents were signed, but none is of the role the rule judges: "cannot tell"."""
    if kind == "scan":
        what = (
            "whether the image was scanned: none of the {count} signed {type} document(s) says it is a "
            "vulnerability scan (a CycloneDX document that reports no finding is an SBOM, whether its "
            "'vulnerabilities' list is empty or absent; one whose every finding a VEX analysis clears is a "
            "VEX document)"
        )
        fix = (
            "attest the scan in cosign's vulnerability predicate (`--type "
            "https://cosign.sigstore.dev/attestation/vuln/v1`), which says it is a scan"
        )
    else:
        what = (
            "what the image contains: none of the {count} signed {type} document(s) is an SBOM (a document "
            "that reports findings is a scan or a VEX document, never read as the image's inventory)"
        )
        fix = "attest the SBOM itself (or say `document: scan` to read the components a scan lists)"
    found.add(
        f"{rule_id}.document",
        "cannot tell " + what.format(count=count, type=rule.predicate_type),
        fix,
        indeterminate=True,
        unknown=rule.components.unknown if kind == "sbom" and rule.components else None,
    )


def _tells(
    found: Findings, rule_id: str, rule: AttestationRule, kind: str, document: VerifiedPredicate
) -> bool:
    """Whether ``document`` can tell what a rule over its ``kind`` reads: components that a components rule
    reads (of an SBOM, or of a scan), a scan that audited what it lists. Otherwise the rule cannot tell
    (``onIndeterminate``)."""
    scan = document.scan
    if scan is None:
        return True
    if kind == "scan" and scan.vulnerabilities is None:
        what = "; ".join(scan.unknowns) or "the scan records no findings list"
        fix = "scan again so that every package is audited, and attest the result (docs/scans.md)"
        unknown = rule.vulnerabilities.unknown if rule.vulnerabilities else None
    elif (kind == "sbom" or rule.components is not None) and not scan.components:
        # a components rule never passes on a document that lists nothing (a Trivy report without
        # --list-all-pkgs, an empty BOM): its bans would hold vacuously
        what = f"the {'SBOM' if kind == 'sbom' else 'scan'} lists no component" + (
            " (an empty BOM says nothing about the image)" if kind == "sbom" else " to check the rule against"
        )
        fix = "generate the document from the image itself, listing every package (docs/scans.md)"
        unknown = rule.components.unknown if rule.components else None
    else:
        return True
    found.add(
        f"{rule_id}.document",
        f"cannot tell: {what} ({document.origin})",
        fix,
        indeterminate=True,
        unknown=unknown,
    )
    return False


#: The order in which a rule that judges no one role judges the newest document of each.
_ROLES: Final = ("sbom", "scan", "vex")


def _judged(
    run: Evaluation, pinned: ImageReference, rule: AttestationRule, verified: Sequence[VerifiedPredicate]
) -> list[VerifiedPredicate]:
    """The documents that describe the image now: the newest of each role among ``verified`` (all of one
    role when the rule judges one), every one that ties for the newest."""
    by_role = {role: [d for d in verified if d.scan is not None and d.scan.role == role] for role in _ROLES}
    return [d for role in _ROLES for d in _newest(run, pinned, rule, by_role[role])]


def _newest(
    run: Evaluation, pinned: ImageReference, rule: AttestationRule, verified: Sequence[VerifiedPredicate]
) -> list[VerifiedPredicate]:
    """The newest of ``verified`` by the time each records; all of those that tie, in a fixed order (their
    statement digests), so that which of two documents of one time is judged never depends on the order
    they were found in: both are, and each must hold.

    An undated document may be newer than any dated one, so it is judged too (after the newest dated ones,
    noted), never left out: a scan whose time was not recorded (Go's zero time) must not be hidden by an
    older dated one.
    """
    undated = sorted(
        (d for d in verified if d.scan is None or d.scan.scanned_at is None), key=lambda d: d.digest
    )
    dated = [d for d in verified if d.scan is not None and d.scan.scanned_at is not None]
    if not dated:
        return undated
    for document in undated:
        run.note(
            f"image {pinned}: the {rule.predicate_type} attestation {document.origin} records no time, so it "
            "is judged beside the newest dated one (it may be newer)"
        )
    newest = max(d.scan.scanned_at for d in dated if d.scan is not None and d.scan.scanned_at is not None)
    ties = sorted(
        (d for d in dated if d.scan is not None and d.scan.scanned_at == newest), key=lambda d: d.digest
    )
    return ties + undated


def _from_the_future(
    now: datetime, found: Findings, rule_id: str, rule: AttestationRule, document: VerifiedPredicate
) -> bool:
    """Whether ``document`` is dated ahead of ``now`` (beyond the clock skew): then it is refused."""
    scan = document.scan
    if scan is None:
        return False
    for label, moment in (
        ("made", scan.scanned_at),
        ("made with a vulnerability database built", scan.database_at),
    ):
        if moment is not None and moment - now > CLOCK_SKEW:
            found.add(
                rule_id,
                f"the newest {rule.predicate_type} attestation ({document.origin}) says it was {label} in "
                f"the future ({_time(moment)}), so it cannot be judged, and it would hide every document "
                "attested before it",
                "remove that attestation from the image, record times from a synchronised clock and attest "
                "the document again",
            )
            return True
    return False


def _max_ages(
    now: datetime,
    found: Findings,
    rule_id: str,
    rule: AttestationRule,
    max_age: timedelta,
    judged: Sequence[VerifiedPredicate],
) -> None:
    """``maxAge`` over the judged documents: every dated one is measured, so that of documents that tie the
    stalest decides, whichever is listed first; with none dated, the age cannot be told. An undated scan
    is as old as its vulnerability database at least: one older than ``maxAge`` is stale."""
    dated = [d for d in judged if d.scan is not None and d.scan.scanned_at is not None]
    measured = {id(d) for d in dated or judged[:1]}
    for document in judged:
        if id(document) in measured or _stale_database(now, rule, max_age, document) is not None:
            _max_age(now, found, rule_id, rule, max_age, document)


def _stale_database(
    now: datetime, rule: AttestationRule, max_age: timedelta, document: VerifiedPredicate
) -> datetime | None:
    """When the vulnerability database of ``document``, a scan that records no time of its own, was built,
    if that alone makes it older than ``max_age``."""
    scan = document.scan
    if scan is None or scan.scanned_at is not None or rule.judges() == "sbom":
        return None
    database = scan.database_at
    return database if database is not None and now - database > max_age else None


def _max_age(
    now: datetime,
    found: Findings,
    rule_id: str,
    rule: AttestationRule,
    max_age: timedelta,
    document: VerifiedPredicate,
) -> None:
    """``maxAge``: a scan is as old as the older of its run and its database; an SBOM as its making."""
    scan = document.scan
    sbom = rule.judges() == "sbom"
    since = (scan.scanned_at if sbom else scan.freshness) if scan is not None else None
    since = since or _stale_database(now, rule, max_age, document)
    if scan is None or since is None:
        why = "; ".join(u for u in (scan.unknowns if scan else ()) if "time" in u) or "it records no time"
        found.add(
            rule_id,
            f"the age of the {rule.predicate_type} attestation cannot be told: {why}",
            "have the tool record when it ran (an RFC 3339 time with a zone)",
            indeterminate=True,
        )
        return
    age = now - since
    if age <= max_age:
        return
    if sbom:
        found.add(
            rule_id,
            f"the SBOM is {age.days} days {age.seconds // 3600} h old (made {_time(scan.scanned_at)}), "
            f"more than the {rule.max_age} allowed",
            "generate the SBOM again and attest it",
        )
        return
    database = f", with a vulnerability database from {_time(scan.database_at)}" if scan.database_at else ""
    found.add(
        rule_id,
        f"the scan is {age.days} days {age.seconds // 3600} h old (scanned {_time(scan.scanned_at)}"
        f"{database}), more than the {rule.max_age} allowed",
        "scan the image again (with an up-to-date vulnerability database) and attest the result",
    )


async def _conditions(
    run: Evaluation,
    found: Findings,
    rule_id: str,
    conditions: Sequence[CompiledExpression],
    document: VerifiedPredicate,
) -> None:
    """Whether every condition holds for ``document``: a violation for each that does not."""
    if not conditions:
        return
    sources = " ".join(c.program.source for c in conditions)
    values: dict[str, Any] = {
        "predicate": document.predicate if _READS_PREDICATE.search(sources) else {},
        "now": _time(run.clock().astimezone(UTC)),
    }
    if document.scan is not None:
        values["scan"] = document.scan.to_json() if _READS_SCAN.search(sources) else {}
    scan = document.scan
    reads_scan = scan is not None and _READS_SCAN.search(sources) is not None
    unknowns = "; ".join((*scan.unknowns, *(why for _, why in scan.absent))) if scan is not None else ""
    try:
        activation = prepare_activation(values)
    except CelEvaluationError as error:
        found.add(
            f"{rule_id}.conditions",
            f"the attestation ({document.origin}) is too large to judge: {error.message}",
            error.hint or "attest a smaller document",
            error=True,
        )
        return
    outcomes = await run.cel.evaluate_bools(
        [c.program for c in conditions], activation, seconds=run.deadline.remaining()
    )
    for condition, outcome in zip(conditions, outcomes, strict=True):
        if outcome is True:
            continue
        condition_id = f"{rule_id}.conditions.{condition.name}"
        if outcome is False:
            found.add(
                condition_id, condition.message, "fix what the attestation reports, then attest it again"
            )
        elif outcome.hint == MISSING_KEY_HINT and (unknowns or reads_scan):
            # a field the scan shape leaves out is one the document cannot tell (docs/scans.md): never an
            # onError, which `--unverifiable warn` relaxes
            named = [why for key, why in scan.absent if f'"{key}"' in outcome.message] if scan else []
            why = "; ".join(named) or unknowns or "the document does not record what it reads"
            found.add(
                condition_id,
                f"{condition.message} (cannot tell: {why}; {outcome.message})",
                "attest a document that says what the condition reads (see docs/scans.md)",
                indeterminate=True,
            )
        else:
            found.add(
                condition_id,
                f"{condition.message} (the condition could not be evaluated: {outcome.message})",
                outcome.hint or "fix the condition",
                error=outcome.resource or outcome.hint == MISSING_KEY_HINT,
            )


def _time(moment: datetime | None) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else "?"
