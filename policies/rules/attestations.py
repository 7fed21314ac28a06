"""Image attestations that read what the document says (``images[].attestations[]``, docs/scans.md).

The attestation must be signed by the rule's signers and, for SBOMs and scans (:mod:`verifier.scans`), the
newest one by the time it records is judged, among the documents of the kind the rule judges
(``document``: an SBOM is no scan). A document dated in the future (beyond
:data:`~policies.rules.evaluation.CLOCK_SKEW`) is refused whatever the rule says: it would be the newest
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
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from policies.cel import MISSING_KEY_HINT, CelEvaluationError, prepare_activation
from policies.loader import CompiledAttestation, CompiledExpression
from policies.rules.evaluation import CLOCK_SKEW, Evaluation
from policies.rules.findings import Findings, Refusal
from policies.schema import AttestationRule, ComponentRule
from policies.verified import VerifiedPredicate
from verifier.base import ImageReference
from verifier.scans import SEVERITY_ORDER, Component, canonical_id, component_from, is_scan_predicate_type

__all__ = ["check"]

_READS_SCAN: Final = re.compile(r"\bscan\b")
_READS_PREDICATE: Final = re.compile(r"\bpredicate\b")


async def check(
    run: Evaluation, found: Findings, rule_id: str, compiled: CompiledAttestation, pinned: ImageReference
) -> list[VerifiedPredicate]:
    """The attestation ``compiled`` asks of the pinned image: signed, of the document it judges, fresh
    enough, meeting its built-in checks and conditions.

    Returns the signed documents that were judged (none when none verified), for the decision record.
    """
    rule = compiled.rule
    scans = is_scan_predicate_type(rule.predicate_type)
    documents = await found.check(
        rule_id,
        run.image_predicates(pinned, rule, scans=scans),
        refused=Refusal("attach the attestation to the image digest (`trtguard attest --push`)"),
    )
    if documents is None:
        return []
    for why in documents.refused:
        run.note(f"image {pinned}: a {rule.predicate_type} attestation did not count: {why}")
    if documents.unreadable:
        newest = ", nor which one is the newest" if scans else ""
        found.add(
            rule_id,
            f"cannot tell what the {rule.predicate_type} attestations say{newest}: one signed by "
            f"[{', '.join(rule.keys)}] cannot be read ({'; '.join(documents.unreadable)})",
            "remove the unreadable attestation from the image (or attest the document again)",
            indeterminate=True,
        )
    kind = rule.judges()
    readable = list(documents.readable)
    if kind == "scan":
        # An SBOM is no scan: a fresh SBOM must not pass for a fresh scan (docs/scans.md).
        readable = [d for d in readable if d.scan is not None and d.scan.is_scan]
        if documents.readable and not readable:
            found.add(
                f"{rule_id}.document",
                f"cannot tell whether the image was scanned: none of the {len(documents.readable)} signed "
                f"{rule.predicate_type} document(s) is a vulnerability scan (a CycloneDX document without a "
                "'vulnerabilities' list is an SBOM)",
                "attest the scan in cosign's vulnerability predicate (`--type "
                "https://cosign.sigstore.dev/attestation/vuln/v1`), or have the scanner write the list",
                indeterminate=True,
            )
    if not readable:
        return []
    judged = _judged(run, pinned, rule, readable) if scans else readable
    if scans and any(_from_the_future(run.clock(), found, rule_id, rule, d) for d in judged):
        return judged
    if compiled.max_age is not None:
        _max_age(run.clock(), found, f"{rule_id}.maxAge", rule, compiled.max_age, judged[0])
    if kind is not None:
        told = [_tells(found, rule_id, rule, kind, d) for d in judged]  # every one says what it cannot tell
        if not all(told):
            return judged
    for document in judged:
        if document.scan is not None and rule.vulnerabilities is not None:
            _vulnerabilities(run, found, f"{rule_id}.vulnerabilities", compiled, document, pinned)
        if document.scan is not None and rule.components is not None:
            _components(found, f"{rule_id}.components", rule.components, document)
        if not await _conditions(run, found, rule_id, compiled.conditions, document):
            break  # one failing document is enough to say what is wrong
    return judged


def _tells(
    found: Findings, rule_id: str, rule: AttestationRule, kind: str, document: VerifiedPredicate
) -> bool:
    """Whether ``document`` can tell what a rule over its ``kind`` reads: an SBOM that lists components, a
    scan that audited what it lists. Otherwise the rule cannot tell (``onIndeterminate``)."""
    scan = document.scan
    if scan is None:
        return True
    if kind == "sbom" and not scan.components:
        what = "the SBOM lists no component (an empty BOM says nothing about the image)"
        fix = "generate the SBOM from the image itself (not offline, not from an empty environment)"
        unknown = rule.components.unknown if rule.components else None
    elif kind == "scan" and scan.vulnerabilities is None:
        what = "; ".join(scan.unknowns) or "the scan records no findings list"
        fix = "scan again so that every package is audited, and attest the result (docs/scans.md)"
        unknown = rule.vulnerabilities.unknown if rule.vulnerabilities else None
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


def _judged(
    run: Evaluation, pinned: ImageReference, rule: AttestationRule, verified: Sequence[VerifiedPredicate]
) -> list[VerifiedPredicate]:
    """The documents that describe the image now: the newest by the time it records.

    An undated document is never the newest: beside dated ones it is left out (and noted), and when none
    records a time every one is judged (which of them describes the image cannot be told).
    """
    dated = [(d.scan.scanned_at, d) for d in verified if d.scan is not None and d.scan.scanned_at is not None]
    if not dated:
        return list(verified)
    for document in verified:
        if document.scan is None or document.scan.scanned_at is None:
            run.note(
                f"image {pinned}: the {rule.predicate_type} attestation {document.origin} records no time, "
                "so the newest dated one was judged instead"
            )
    return [max(dated, key=lambda pair: pair[0])[1]]


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
) -> bool:
    """Whether every condition holds for ``document``; violations are recorded for those that do not."""
    if not conditions:
        return True
    sources = " ".join(c.program.source for c in conditions)
    values: dict[str, Any] = {
        "predicate": document.predicate if _READS_PREDICATE.search(sources) else {},
        "now": _time(run.clock().astimezone(UTC)),
    }
    if document.scan is not None:
        values["scan"] = document.scan.to_json() if _READS_SCAN.search(sources) else {}
    unknowns = "; ".join(document.scan.unknowns) if document.scan is not None else ""
    try:
        activation = prepare_activation(values)
    except CelEvaluationError as error:
        found.add(
            f"{rule_id}.conditions",
            f"the attestation ({document.origin}) is too large to judge: {error.message}",
            error.hint or "attest a smaller document",
            error=True,
        )
        return False
    outcomes = await run.cel.evaluate_bools(
        [c.program for c in conditions], activation, seconds=run.deadline.remaining()
    )
    held = True
    for condition, outcome in zip(conditions, outcomes, strict=True):
        if outcome is True:
            continue
        held = False
        condition_id = f"{rule_id}.conditions.{condition.name}"
        if outcome is False:
            found.add(
                condition_id, condition.message, "fix what the attestation reports, then attest it again"
            )
        elif outcome.hint == MISSING_KEY_HINT and unknowns:
            found.add(
                condition_id,
                f"{condition.message} (cannot tell: {unknowns})",
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
    return held


def _time(moment: datetime | None) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else "?"


_PEP503: Final = re.compile(r"[-_.]+")
#: Findings named in one message at most (the rest are counted).
_SHOWN: Final = 8


def _vulnerabilities(
    run: Evaluation,
    found: Findings,
    rule_id: str,
    compiled: CompiledAttestation,
    document: VerifiedPredicate,
    pinned: ImageReference,
) -> None:
    """``vulnerabilities``: the scan's affected findings are within ``maxSeverity`` or allow-listed."""
    rule = compiled.rule.vulnerabilities
    scan = document.scan
    if rule is None or scan is None or scan.vulnerabilities is None:
        return  # a scan that cannot tell is said once, by the rule's document check
    now = run.clock()
    active = {entry.id for entry in compiled.allowed if entry.active(now)}
    limit = SEVERITY_ORDER.index(rule.max_severity)
    above: list[str] = []
    unrated: list[str] = []
    for finding in scan.vulnerabilities:
        if not finding.affected:
            continue
        ids = finding.ids
        if any(i in active for i in ids):
            continue
        expired = [e for e in compiled.allowed if e.id in ids and not e.active(now)]
        for entry in expired:
            run.note(
                f"image {pinned}: the allow-list entry {entry.id} ({entry.source}) expired at "
                f"{entry.expires.isoformat() if entry.expires else '?'} and no longer admits it"
            )
        where = f" in {', '.join(finding.components)}" if finding.components else ""
        name = canonical_id(finding.id)
        aliases = [i for i in ids if i != name]
        shown = f"{name} ({', '.join(aliases)})" if aliases else name
        if not finding.severities:
            unrated.append(f"{shown}{where}")
        elif SEVERITY_ORDER.index(finding.severities[0]) > limit:
            above.append(f"{shown}: {finding.severities[0]}{where}")
    if above:
        found.add(
            rule_id,
            f"{len(above)} affected finding(s) above {rule.max_severity} that no allow-list entry admits: "
            f"{_listed(above)}",
            "upgrade the affected components and scan again, or allow-list the finding by id with a reason "
            "and an expiry (`vulnerabilities.allow`, or the `allowFrom` file)",
        )
    if unrated:
        found.add(
            rule_id,
            f"cannot tell whether {len(unrated)} affected finding(s) are above {rule.max_severity}: no "
            f"rating gives a severity for {_listed(unrated)}",
            "attest a scan that rates its findings (or a pip-audit JSON report enriched with severities), "
            "or allow-list the finding by id with a reason",
            indeterminate=True,
            unknown=rule.unknown,
        )


def _components(found: Findings, rule_id: str, rule: ComponentRule, document: VerifiedPredicate) -> None:
    """``components``: every ``required`` name is listed, and no ``banned`` one."""
    scan = document.scan
    if scan is None or not scan.components:
        return  # an empty SBOM is said once, by the rule's document check
    listed = scan.components
    missing = [name for name in rule.required if not any(_matches(name, c) for c in listed)]
    if missing:
        found.add(
            f"{rule_id}.required",
            f"the SBOM ({document.origin}) does not list {', '.join(missing)}",
            "build the image with the required components, then generate and attest its SBOM again",
        )
    banned = [
        f"{name} (listed as {c.raw_name}{f' {c.version}' if c.version else ''})"
        for name in rule.banned
        for c in listed
        if _matches(name, c)
    ]
    if banned:
        found.add(
            f"{rule_id}.banned",
            f"the SBOM ({document.origin}) lists banned component(s): {_listed(list(dict.fromkeys(banned)))}",
            "remove the banned components from the image, then generate and attest its SBOM again",
        )


def _matches(name: str, component: Component) -> bool:
    """Whether the policy's ``name`` (a name in its ecosystem's spelling, or a purl) is ``component``."""
    if name.startswith("pkg:"):
        wanted = component_from(name, None, name)
        if wanted.ecosystem is None:  # not a purl after all: compare as a name
            return _same_name(name, component)
        if component.ecosystem is not None:
            return component.ecosystem == wanted.ecosystem and component.package == wanted.package
        # Without a purl the component's ecosystem is unknown: its written name must be the package's.
        return _loose(component.package) == _loose(wanted.package)
    return _same_name(name, component)


def _same_name(name: str, component: Component) -> bool:
    if component.ecosystem is None or component.ecosystem == "pypi":
        return _loose(component.package) == _loose(name)
    return component.package == name.lower()


def _loose(name: str) -> str:
    """PEP 503: ``Typing_Extensions`` and ``typing.extensions`` are ``typing-extensions``."""
    return _PEP503.sub("-", name).lower()


def _listed(items: Iterable[str]) -> str:
    shown = list(items)
    more = len(shown) - _SHOWN
    return "; ".join(shown[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")
