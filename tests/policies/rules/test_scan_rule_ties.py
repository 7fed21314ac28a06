"""policies.rules._attestations: every judged document is judged in full, whatever order ties and undated
documents come in (attack 27, round 3: F1 a document that cannot tell stopped the checks of the others, F4
``maxAge`` measured only the first tie, F6 the conditions stopped at the first failing document).

Each order is tried: the documents judged are handed to the checks in every permutation (``_judged``
wrapped), so that no test depends on which statement digest happens to sort first."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.results import Action, Decision
from policies.rules import _attestations as attestations
from policies.verified import VerifiedPredicate
from tests.policies.conftest import Material, pod
from tests.policies.rules.test_attestations import CDX, NOW, VULN, about_runtime, attest, data, judge
from tests.policies.rules.test_scan_rules import BASE, found, policy
from verifier.evidence_folder import LocalEvidence

SCAN = f"{BASE}[{VULN}]"
SBOM = f"{BASE}[{CDX}]"
FINISHED = "2026-12-01T16:00:00Z"


def trivy(finished: str | None = FINISHED, db: str | None = None) -> dict[str, Any]:
    """cosign's predicate over Trivy's report (610) with one finding, raised to CRITICAL."""
    result = about_runtime(data("610-cosign-vuln-trivy-spec-example.json"))["scanner"]["result"]
    result["Results"][0]["Vulnerabilities"] = result["Results"][0]["Vulnerabilities"][:1]
    result["Results"][0]["Vulnerabilities"][0]["Severity"] = "CRITICAL"
    return cosign(result, "pkg:github/aquasecurity/trivy@0.50.0", finished, db)


def cosign(
    result: dict[str, Any], uri: str, finished: str | None = FINISHED, db: str | None = None
) -> dict[str, Any]:
    scanner: dict[str, Any] = {"uri": uri, "result": result}
    if db is not None:
        scanner["db"] = {"version": db}
    return {"scanner": scanner, "metadata": {"scanFinishedOn": finished or "0001-01-01T00:00:00Z"}}


def pip_audit(name: str, finished: str | None = FINISHED, db: str | None = None) -> dict[str, Any]:
    return cosign(data(name), "pkg:pypi/pip-audit@2.10.1", finished, db)


def in_every_order(
    monkeypatch: pytest.MonkeyPatch, material: Material, text: str
) -> list[tuple[tuple[str, ...], Decision]]:
    """The decision on ``text`` with the judged documents handed on in each of their orders."""
    real = attestations._judged
    order: list[int] = []

    def reordered(*args: Any) -> list[VerifiedPredicate]:
        judged: Sequence[VerifiedPredicate] = real(*args)
        return [judged[i] for i in order] if len(order) == len(judged) else list(judged)

    monkeypatch.setattr(attestations, "_judged", reordered)
    count = len(list(material.attestations.iterdir()))
    decisions = []
    for permutation in itertools.permutations(range(count)):
        order[:] = permutation
        decisions.append((tuple(map(str, permutation)), judge(material, text)))
    return decisions


def same_everywhere(decisions: list[tuple[tuple[str, ...], Decision]]) -> set[tuple[str, Action, bool]]:
    first = found(decisions[0][1])
    for order, decision in decisions:
        assert found(decision) == first, f"order {order} decides otherwise"
    return first


@pytest.mark.parametrize("beside", ["undated", "tied"])
def test_a_scan_that_cannot_tell_never_hides_the_finding_of_another(
    monkeypatch: pytest.MonkeyPatch, material: Material, beside: str
) -> None:
    # F1: with `unknown: Warn`, a pip-audit report that skipped packages (604) beside the newest scan ended
    # the rule before the newest scan's CRITICAL finding was judged: admitted with a warning
    attest(material, VULN, trivy(), "critical.json")
    finished = None if beside == "undated" else FINISHED
    attest(material, VULN, pip_audit("604-pip-audit-offline-skipped.json", finished), "skipped.json")
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
      vulnerabilities: {{maxSeverity: high, unknown: Warn}}
    """
    assert same_everywhere(in_every_order(monkeypatch, material, policy(entry))) == {
        (f"{SCAN}.vulnerabilities", Action.DENY, False),
        (f"{SCAN}.document", Action.WARN, True),
    }


def test_an_empty_sbom_beside_the_newest_never_hides_a_banned_component(
    monkeypatch: pytest.MonkeyPatch, material: Material
) -> None:
    # F1, SBOM: an undated empty BOM (602) beside cyclonedx-py's SBOM listing PyYAML (607)
    sbom = data("607-cyclonedx-py-requirements.cdx.json")
    sbom["metadata"]["timestamp"] = FINISHED
    empty = data("602-pip-audit-offline-skipped.cdx.json")
    empty["metadata"].pop("timestamp", None)
    attest(material, CDX, sbom, "sbom.json")
    attest(material, CDX, empty, "empty.json")
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      components: {{banned: [pyyaml], unknown: Warn}}
    """
    assert same_everywhere(in_every_order(monkeypatch, material, policy(entry))) == {
        (f"{SBOM}.components.banned", Action.DENY, False),
        (f"{SBOM}.document", Action.WARN, True),
    }


def test_max_age_measures_every_tied_scan_in_every_order(
    monkeypatch: pytest.MonkeyPatch, material: Material
) -> None:
    # F4: maxAge measured the first tie only; a tie with a scan whose database is 60 days old passed in
    # the orders that put a fresh one first
    clean = "606-pip-audit-clean.cdx.json"
    attest(material, VULN, pip_audit(clean, db="2026-12-01T12:00:00Z") | {"invocation": {"n": 1}}, "a.json")
    attest(material, VULN, pip_audit(clean, db="2026-12-01T13:00:00Z") | {"invocation": {"n": 2}}, "b.json")
    attest(material, VULN, pip_audit(clean, db="2026-10-02T00:00:00Z"), "stale.json")
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
      maxAge: 7d
    """
    decisions = in_every_order(monkeypatch, material, policy(entry))
    assert len(decisions) == 6
    assert same_everywhere(decisions) == {(f"{SCAN}.maxAge", Action.DENY, False)}
    assert all("2026-10-02" in d.violations[0].message for _, d in decisions)


def test_an_undated_scan_is_at_least_as_old_as_its_database(material: Material) -> None:
    # judged beside a fresh dated scan, its own time unknown: a database two months old makes it stale
    clean = "606-pip-audit-clean.cdx.json"
    attest(material, VULN, pip_audit(clean, db="2026-12-01T12:00:00Z"), "fresh.json")
    attest(
        material,
        VULN,
        pip_audit("605-pip-audit-pyyaml-5.3.json", finished=None, db="2026-10-02T00:00:00Z"),
        "undated.json",
    )
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
      maxAge: 7d
    """
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{SCAN}.maxAge", Action.DENY, False)}
    (material.attestations / "undated.json").unlink()
    assert judge(material, policy(entry)).allowed


def test_every_tied_scan_meets_the_built_in_checks_and_the_conditions_in_every_order(
    monkeypatch: pytest.MonkeyPatch, material: Material
) -> None:
    # F6: the loop stopped at the first document whose conditions failed; under onIndeterminate Warn a clean
    # scan that cannot tell its database's time, judged first, hid the tied scan's CRITICAL finding
    attest(material, VULN, trivy(db="2026-12-01T00:00:00Z"), "critical.json")
    attest(material, VULN, pip_audit("606-pip-audit-clean.cdx.json"), "clean.json")
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
      vulnerabilities: {{maxSeverity: high}}
      conditions:
        - name: db-fresh
          cel: timestamp(scan.database_at) > timestamp(now) - duration('720h')
          message: the vulnerability database is older than 30 days
    """
    assert same_everywhere(in_every_order(monkeypatch, material, policy(entry, on_indeterminate="Warn"))) == {
        (f"{SCAN}.vulnerabilities", Action.DENY, False),
        (f"{SCAN}.conditions.db-fresh", Action.WARN, True),
    }


def test_documents_that_fail_alike_say_so_once(material: Material) -> None:
    # every tied document is judged (F6), and the same violation of each is one violation
    for n in range(3):
        scan = data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
        scan["serialNumber"] = f"urn:uuid:00000000-0000-0000-0000-00000000000{n}"
        attest(material, CDX, scan, f"critical-{n}.json")
    cel = json.dumps("!scan.vulnerabilities.exists(v, v.affected && v.severity == 'critical')")
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      conditions:
        - {{name: no-critical, cel: {cel}, message: a critical finding}}
    """
    decision = judge(material, policy(entry))
    assert [v.rule for v in decision.violations] == [f"{SBOM}.conditions.no-critical"]


def test_every_document_from_the_future_is_named(material: Material) -> None:
    # the family: of tied documents dated in the future, the first stopped the look at the others
    for n, name in enumerate(("a.json", "b.json")):
        future = pip_audit("606-pip-audit-clean.cdx.json", finished="2027-06-01T00:00:00Z")
        attest(material, VULN, future | {"invocation": {"n": n}}, name)
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
      vulnerabilities: {{maxSeverity: high}}
    """
    decision = judge(material, policy(entry))
    assert not decision.allowed
    for name in ("a.json", "b.json"):
        assert any(name in v.message and "in the future" in v.message for v in decision.violations)


def test_a_components_check_past_the_cpu_budget_leaves_the_other_findings_standing(
    material: Material,
) -> None:
    # F7: the check runs in the evaluation's budget; spent, it is an onError for that check alone, never
    # the whole image's verdict in place of the CRITICAL finding beside it
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"))
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      document: scan
      vulnerabilities: {{maxSeverity: high}}
      components: {{banned: [xz-utils]}}
    """
    text = policy(entry).replace("  onIndeterminate: Deny\n", "  onIndeterminate: Deny\n  onError: Warn\n")
    paths = [material.policy(text), material.keys_file("scanner")]
    engine = PolicyEvaluator(
        load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW, cpu_seconds=0.0
    )
    decision = asyncio.run(engine.evaluate(pod()))
    assert found(decision) == {
        (f"{SBOM}.vulnerabilities", Action.DENY, False),
        (f"{SBOM}.components", Action.WARN, False),
    }
    assert not decision.allowed
