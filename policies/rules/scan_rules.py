"""The built-in checks over a verified SBOM or scan: ``vulnerabilities`` and ``components`` (docs/scans.md).

``vulnerabilities``: no affected finding (VEX decides) above ``maxSeverity`` but those an active allow-list
entry names, by any id or alias in any case. A finding no rating gives a severity to cannot be judged
against the threshold: "cannot tell" (the rule's ``unknown``, else the policy's ``onIndeterminate``), unless
it is allow-listed. An expired entry no longer matches, and the decision's notes say so.

``components``: each ``required`` name is listed and no ``banned`` one, by the name the package has in its
ecosystem (:attr:`verifier.scans.model.Component.package`). A name is written as the ecosystem writes it
(``PyYAML`` or ``pyyaml``: PEP 503 for PyPI; ``org.apache.logging.log4j:log4j-core`` for Maven) or as a purl
(``pkg:pypi/pyyaml``, which also names the ecosystem). A component the document gives without a purl is
matched by its written name under PEP 503 (``Typing_Extensions`` is ``typing-extensions``): pip-audit's
CycloneDX output has no purls, and a ban must not be escaped by spelling.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from policies.allow_lists import AllowEntry
from policies.loader import CompiledAttestation
from policies.rules.evaluation import Evaluation
from policies.rules.findings import Findings
from policies.schema import ComponentRule
from policies.verified import VerifiedPredicate
from verifier.base import ImageReference
from verifier.scans.model import SEVERITY_ORDER, Component, canonical_id, component_from

__all__ = ["components", "vulnerabilities"]

_PEP503: Final = re.compile(r"[-_.]+")
#: Findings named in one message at most (the rest are counted).
_SHOWN: Final = 8


def vulnerabilities(
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
    active: dict[str, AllowEntry] = {}
    for entry in compiled.allowed:
        if entry.active(now):
            active.setdefault(entry.id, entry)
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


def components(found: Findings, rule_id: str, rule: ComponentRule, document: VerifiedPredicate) -> None:
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
