"""The built-in ``vulnerabilities`` check of an attestation rule (docs/scans.md): no affected finding, VEX
deciding, above ``maxSeverity`` but those an active allow-list entry names by any id or alias in any case;
an expired entry stops matching and the notes say so. A finding no rating gives a severity, or one whose
only rating is a CVSS vector trtguard cannot score, is "cannot tell" (the rule's ``unknown``).

Pure work over the scan (:func:`vulnerability_findings`): the rule module records what it returns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from verifier.scans import SEVERITY_ORDER, ScanDocument, canonical_id

__all__ = ["VulnerabilityFinding", "vulnerability_findings"]

#: Findings named in one message at most (the rest are counted).
_SHOWN: Final = 8


class _Entry(Protocol):
    """An allow-list entry, as far as the check reads it (:class:`policies._allow_lists.AllowEntry`)."""

    @property
    def id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def expires(self) -> datetime | None: ...


#: An allow-list's look-up: the active entry naming any of the ids (None: none does), and the expired ones.
Match = Callable[[Sequence[str], datetime], tuple[object | None, Sequence[_Entry]]]


@dataclass(frozen=True, slots=True)
class VulnerabilityFinding:
    """One violation the check found: what it says, how to fix it, and whether it is "cannot tell"."""

    message: str
    fix: str
    indeterminate: bool = False


def vulnerability_findings(
    scan: ScanDocument, max_severity: str, allowed: Match, now: datetime
) -> tuple[list[VulnerabilityFinding], list[str]]:
    """The violations of ``scan``'s affected findings above ``max_severity`` that ``allowed`` does not
    admit at ``now``, and the notes about expired entries (one look-up per id: linear, S1)."""
    if scan.vulnerabilities is None:
        return [], []  # a scan that cannot tell is said once, by the rule's document check
    limit = SEVERITY_ORDER.index(max_severity)
    above: list[str] = []
    unrated: list[str] = []
    undecided: list[str] = []
    notes: list[str] = []
    for finding in scan.vulnerabilities:
        if not finding.affected:
            continue
        ids = finding.ids
        admitted, expired = allowed(ids, now)
        if admitted is not None:
            continue
        notes += [
            f"the allow-list entry {entry.id} ({entry.source}) expired at "
            f"{entry.expires.isoformat() if entry.expires else '?'} and no longer admits it"
            for entry in expired
        ]
        where = f" in {', '.join(finding.components)}" if finding.components else ""
        name = canonical_id(finding.id)
        aliases = [i for i in ids if i != name]
        shown = f"{name} ({', '.join(aliases)})" if aliases else name
        if finding.undecided:
            undecided.append(f"{shown}{where}")
        elif not finding.severities:
            unrated.append(f"{shown}{where}")
        elif SEVERITY_ORDER.index(finding.severities[0]) > limit:
            above.append(f"{shown}: {finding.severities[0]}{where}")
    said: list[VulnerabilityFinding] = []
    if above:
        said.append(
            VulnerabilityFinding(
                f"{len(above)} affected finding(s) above {max_severity} that no allow-list entry admits: "
                f"{_listed(above)}",
                "upgrade the affected components and scan again, or allow-list the finding by id with a "
                "reason and an expiry (`vulnerabilities.allow`, or the `allowFrom` file)",
            )
        )
    if unrated:
        said.append(
            VulnerabilityFinding(
                f"cannot tell whether {len(unrated)} affected finding(s) are above {max_severity}: no "
                f"rating gives a severity for {_listed(unrated)}",
                "attest a scan that rates its findings (or a pip-audit JSON report enriched with "
                "severities), or allow-list the finding by id with a reason",
                indeterminate=True,
            )
        )
    if undecided:
        # a rating gives only a CVSS vector that trtguard cannot score
        said.append(
            VulnerabilityFinding(
                f"cannot tell whether {len(undecided)} affected finding(s) are above {max_severity}: a "
                "rating gives a CVSS vector without a score, which trtguard computes only for CVSS v3 base "
                f"vectors: {_listed(undecided)}",
                "attest a scan whose ratings give their scores (or severities), or allow-list the finding "
                "by id with a reason",
                indeterminate=True,
            )
        )
    return said, notes


def _listed(items: Iterable[str]) -> str:
    shown = list(items)
    more = len(shown) - _SHOWN
    return "; ".join(shown[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")
