"""Scan rules over what a scan's content says (issue 27, third attack), judged through the evaluator: a
document about another image is refused and named, a vendor advisory in an allow-list admits only itself,
a filtered scan cannot tell, a vector-only rating counts, and an inventory nested in ``metadata.component``
is read."""

from __future__ import annotations

from typing import Any

from policies.results import Action
from tests.policies.conftest import RUNTIME, Material
from tests.policies.rules.test_attestations import CDX, VULN, about_runtime, attest, data, judge, wrapped
from tests.policies.rules.test_scan_rules import BASE, found, policy, vulns

OTHER = "sha256:" + "ab" * 32


def trivy() -> dict[str, Any]:
    return about_runtime(data("610-cosign-vuln-trivy-spec-example.json"))


def test_a_scan_about_another_image_is_refused_and_named(material: Material) -> None:
    # signed for this image by a trusted scanner key, but the report is of another image
    predicate = trivy()
    predicate["scanner"]["result"]["Metadata"]["RepoDigests"] = [f"registry.example.com/other@{OTHER}"]
    predicate["scanner"]["result"]["ArtifactName"] = f"registry.example.com/other@{OTHER}"
    del predicate["scanner"]["result"]["Results"][0]["Vulnerabilities"]
    attest(material, VULN, predicate)
    decision = judge(material, policy(vulns("critical")))
    assert not decision.allowed
    (violation,) = decision.violations
    assert f"content is about {OTHER}" in violation.message
    assert "scan.json" in violation.message


def test_the_report_of_this_image_is_judged(material: Material) -> None:
    attest(material, VULN, trivy())
    decision = judge(material, policy(vulns("critical")))
    assert decision.allowed, [v.one_line() for v in decision.violations]


def test_an_allow_list_entry_naming_a_vendor_advisory_admits_nothing(material: Material) -> None:
    # ALPINE-13661 covers several CVEs: allowing it (meant for one MEDIUM) must not admit the CRITICAL
    predicate = trivy()
    finding = predicate["scanner"]["result"]["Results"][0]["Vulnerabilities"][0]
    finding.update(Severity="CRITICAL", VendorIDs=["ALPINE-13661"])
    attest(material, VULN, predicate)
    entry = vulns("none", "allow: [{id: ALPINE-13661, reason: triaged}]")
    assert found(judge(material, policy(entry))) == {(f"{BASE}[{VULN}].vulnerabilities", Action.DENY, False)}


def test_a_scan_run_with_ignore_unfixed_cannot_tell(material: Material) -> None:
    predicate = trivy()
    predicate["invocation"]["parameters"] = ["--ignore-unfixed", "--format=json"]
    del predicate["scanner"]["result"]["Results"][0]["Vulnerabilities"]
    attest(material, VULN, predicate)
    decision = judge(material, policy(vulns("critical")))
    assert not decision.allowed
    assert all(v.indeterminate for v in decision.violations)
    assert any("--ignore-unfixed" in v.message for v in decision.violations)


def test_a_trivy_vector_without_a_score_counts(material: Material) -> None:
    predicate = trivy()
    finding = predicate["scanner"]["result"]["Results"][0]["Vulnerabilities"][0]
    finding.update(
        Severity="LOW",
        VendorSeverity={"alpine": 1},
        CVSS={"nvd": {"V3Vector": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}},
    )
    attest(material, VULN, predicate)
    assert found(judge(material, policy(vulns("high")))) == {
        (f"{BASE}[{VULN}].vulnerabilities", Action.DENY, False)
    }


def test_a_ban_sees_components_nested_in_metadata_component(material: Material) -> None:
    nested = {"name": "log4j-core", "group": "org.apache.logging.log4j", "version": "2.14.1"}
    sbom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "metadata": {
            "timestamp": "2026-12-01T00:00:00Z",
            "component": {"bom-ref": "app", "type": "application", "name": "app", "components": [nested]},
        },
        "components": [{"name": "pyyaml", "version": "6.0", "purl": "pkg:pypi/pyyaml@6.0"}],
    }
    attest(material, CDX, sbom)
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      document: sbom
      components: {{banned: ["org.apache.logging.log4j:log4j-core"]}}
    """
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{BASE}[{CDX}].components.banned", Action.DENY, False)}
    assert decision.violations[0].image == RUNTIME


def test_a_presence_rule_on_a_scan_type_refuses_a_document_from_the_future(material: Material) -> None:
    # only predicateType and keys: the scan is still judged as a document, and one from the future is refused
    attest(material, VULN, wrapped(trivy()["scanner"]["result"], finished="2027-06-01T00:00:00Z"))
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
    """
    decision = judge(material, policy(entry))
    assert not decision.allowed
    assert any("future" in v.message or "ahead" in v.message for v in decision.violations)
    attest(material, VULN, wrapped(trivy()["scanner"]["result"]), file="today.json")
    assert not judge(material, policy(entry)).allowed  # the future one is refused whatever else is there
