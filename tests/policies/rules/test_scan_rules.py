"""policies.rules.scan_rules: the built-in ``vulnerabilities`` and ``components`` checks, ``document``,
``anyOf`` and ``onIndeterminate``, on real scanner output (tests/data 602-609) signed about the image
digest."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime

import pytest

from policies.loader import PolicyLoadError
from policies.results import Action, Decision
from tests.policies.conftest import Material
from tests.policies.rules.test_attestations import (
    CDX,
    DIGEST,
    VULN,
    about_runtime,
    attest,
    clean_scan,
    data,
    judge,
    wrapped,
)
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE

SPDX = "https://spdx.dev/Document"
BASE = "images.runtime.attestations"

POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: scanned}
spec:
  match: {namespaces: [prod]}
  onIndeterminate: INDETERMINATE
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      attestations:
"""


def policy(entries: str, on_indeterminate: str = "Deny") -> str:
    body = textwrap.indent(textwrap.dedent(entries).strip(), " " * 8)
    return POLICY.replace("INDETERMINATE", on_indeterminate) + body + "\n"


def vulns(max_severity: str = "high", extra: str = "", predicate_type: str = VULN) -> str:
    return f"""
    - predicateType: {predicate_type}
      keys: [platform/scanner]
      vulnerabilities:
        maxSeverity: {max_severity}
    {textwrap.indent(textwrap.dedent(extra).strip(), " " * 4) if extra else ""}
    """


def found(decision: Decision) -> set[tuple[str, Action, bool]]:
    return {(v.rule, v.action, v.indeterminate) for v in decision.violations}


def test_a_finding_above_max_severity_is_denied_whichever_rating_says_so(material: Material) -> None:
    # PYSEC-2021-142: the owner's medium first, the advisory's CRITICAL second
    attest(material, VULN, wrapped(data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")))
    decision = judge(material, policy(vulns("high")))
    assert found(decision) == {(f"{BASE}[{VULN}].vulnerabilities", Action.DENY, False)}
    message = decision.violations[0].message
    assert "PYSEC-2021-142 (GHSA-8q59-q68h-6hv4, CVE-2020-14343): critical in pyyaml" in message
    # the not-affected PYSEC-2020-96 (critical) is not named; MODERATE is within `medium`
    assert "PYSEC-2020-96" not in message
    assert judge(material, policy(vulns("critical"))).allowed
    assert not judge(material, policy(vulns("low"))).allowed


@pytest.mark.parametrize(
    "spelling", ["CVE-2020-14343", "cve-2020-14343", "GHSA-8Q59-Q68H-6HV4", "pysec-2021-142"]
)
def test_an_allow_list_entry_matches_any_alias_in_any_case(material: Material, spelling: str) -> None:
    attest(material, VULN, wrapped(data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")))
    allow = f"allow: [{{id: {spelling}, reason: 'not reachable: we never load untrusted YAML'}}]"
    entry = vulns("high").replace("maxSeverity: high", f"maxSeverity: high\n        {allow}")
    assert judge(material, policy(entry)).allowed


def test_an_expired_entry_stops_matching(material: Material) -> None:
    attest(material, VULN, wrapped(data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")))
    entry = vulns("high").replace(
        "maxSeverity: high",
        "maxSeverity: high\n        allow: [{id: CVE-2020-14343, reason: r, expires: DATE}]",
    )
    assert judge(material, policy(entry.replace("DATE", "2026-12-03"))).allowed  # NOW is 2026-12-02
    decision = judge(material, policy(entry.replace("DATE", "2026-12-01T23:59:59Z")))
    assert not decision.allowed
    assert any("CVE-2020-14343" in n and "expired" in n for n in decision.notes)


def test_allow_from_a_file_holds_any_number_of_entries(material: Material) -> None:
    attest(material, VULN, wrapped(data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")))
    entries = "".join(f"- {{id: CVE-2099-{n:05d}, reason: filler}}\n" for n in range(1000))
    (material.root / "exceptions.allow.yaml").write_text(
        entries + "- {id: GHSA-8q59-q68h-6hv4, reason: not reachable, expires: 2027-01-01}\n"
    )
    entry = vulns("high").replace(
        "maxSeverity: high", "maxSeverity: high\n        allowFrom: exceptions.allow.yaml"
    )
    assert judge(material, policy(entry)).allowed


def test_allow_from_refuses_a_malformed_file_at_load(material: Material) -> None:
    (material.root / "bad.allow.yaml").write_text("- {id: CVE-2020-14343}\n- {id: 'not an id', reason: x}\n")
    entry = vulns("high").replace("maxSeverity: high", "maxSeverity: high\n        allowFrom: bad.allow.yaml")
    with pytest.raises(PolicyLoadError) as raised:
        judge(material, policy(entry))
    problems = "\n".join(raised.value.problems)
    assert "bad.allow.yaml:1: [0].reason" in problems and "bad.allow.yaml:2: [1].id" in problems
    plain = entry.replace("bad.allow.yaml", "exceptions.yaml")
    with pytest.raises(PolicyLoadError, match=r"name the allow-list file \*\.allow\.yaml"):
        judge(material, policy(plain))


def test_an_unrated_finding_cannot_tell_apart_from_on_error(material: Material) -> None:
    # real pip-audit CycloneDX output: two PyYAML findings, no severities
    attest(material, CDX, data("603-pip-audit-pyyaml-5.3.cdx.json"))
    entry = vulns("high", predicate_type=CDX)
    decision = judge(material, policy(entry, on_indeterminate="Warn"))
    assert found(decision) == {(f"{BASE}[{CDX}].vulnerabilities", Action.WARN, True)}
    assert (
        decision.allowed and "no rating gives a severity for PYSEC-2020-96" in decision.violations[0].message
    )
    # the rule's own `unknown` wins over the policy's onIndeterminate
    strict = entry.replace("maxSeverity: high", "maxSeverity: high\n        unknown: Deny")
    assert not judge(material, policy(strict, on_indeterminate="Warn")).allowed
    # allow-listed by id, an unrated finding is decided
    listed = entry.replace(
        "maxSeverity: high",
        "maxSeverity: high\n        allow: [{id: PYSEC-2020-96, reason: a}, {id: PYSEC-2021-142, reason: b}]",
    )
    assert judge(material, policy(listed)).allowed


def test_a_scan_that_skipped_packages_cannot_tell(material: Material) -> None:
    attest(material, VULN, wrapped(data("604-pip-audit-offline-skipped.json")))
    decision = judge(material, policy(vulns("critical")))
    assert found(decision) == {(f"{BASE}[{VULN}].document", Action.DENY, True)}
    assert "pip-audit skipped 2 package(s)" in decision.violations[0].message


def test_an_sbom_does_not_pass_for_a_scan(material: Material) -> None:
    # a fresh CycloneDX SBOM (cyclonedx-py) beside no scan: `document: scan` does not count it
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"))
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      document: scan
      maxAge: 7d
    """
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{BASE}[{CDX}].document", Action.DENY, True)}
    assert "none of the 1 signed" in decision.violations[0].message
    # and an SBOM rule on the same document passes, its age measured from when it was made
    assert judge(material, policy(entry.replace("document: scan", "document: sbom"))).allowed
    old = judge(
        material,
        policy(entry.replace("document: scan", "document: sbom")),
        now=datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert "the SBOM is 30 days" in old.violations[0].message


def test_an_empty_sbom_cannot_tell(material: Material) -> None:
    attest(material, CDX, data("602-pip-audit-offline-skipped.cdx.json"))
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      document: sbom
    """
    assert found(judge(material, policy(entry))) == {(f"{BASE}[{CDX}].document", Action.DENY, True)}


@pytest.mark.parametrize("written", ["pyyaml", "PyYAML", "PYYAML", "pkg:pypi/PyYAML", "pkg:pypi/pyyaml@5.3"])
def test_components_are_matched_by_their_name_in_the_ecosystem(material: Material, written: str) -> None:
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"))  # PyYAML, with a purl
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      components: {{banned: ["{written}"]}}
    """
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{BASE}[{CDX}].components.banned", Action.DENY, False)}
    assert "listed as PyYAML 5.3" in decision.violations[0].message
    required = entry.replace("banned", "required")
    assert judge(material, policy(required)).allowed


def test_a_ban_is_not_escaped_by_spelling_without_a_purl(material: Material) -> None:
    # pip-audit's CycloneDX output has no purls: the written name counts, under PEP 503
    bom = data("606-pip-audit-clean.cdx.json")
    bom["components"][0]["name"] = "Typing_Extensions"
    attest(material, CDX, bom)
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      components: {{banned: [typing-extensions]}}
    """
    assert not judge(material, policy(entry)).allowed


def test_maven_components_are_group_colon_artifact(material: Material) -> None:
    example = data("608-spdx-2.3-spec-example.spdx.json")  # lists pkg:maven/org.apache.jena/apache-jena
    attest(material, SPDX, example)
    entry = f"""
    - predicateType: {SPDX}
      keys: [platform/scanner]
      components: {{required: ["org.apache.jena:apache-jena"], banned: [apache-jena, "pkg:npm/apache-jena"]}}
    """
    assert judge(material, policy(entry)).allowed  # a bare artifact name is no Maven package
    missing = entry.replace("org.apache.jena:apache-jena", "org.apache.logging.log4j:log4j-core")
    assert found(judge(material, policy(missing))) == {
        (f"{BASE}[{SPDX}].components.required", Action.DENY, False)
    }


#: Either a cosign vulnerability scan or a CycloneDX scan, each with no finding above high.
ANY_OF_SCANS = f"""
- anyOf:
    - predicateType: {VULN}
      keys: [platform/scanner]
      vulnerabilities: {{maxSeverity: high}}
    - predicateType: {CDX}
      keys: [platform/scanner]
      document: scan
      vulnerabilities: {{maxSeverity: high}}
"""


def test_any_of_admits_either_format(material: Material) -> None:
    entry = ANY_OF_SCANS
    attest(material, CDX, clean_scan(), "cdx.json")  # only the CycloneDX scan
    decision = judge(material, policy(entry))
    assert decision.allowed, decision.violations
    assert [a.predicate_type for a in decision.images[0].attestations] == [CDX]
    (material.attestations / "cdx.json").unlink()
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json")), "vuln.json")  # only cosign's
    assert judge(material, policy(entry)).allowed


def test_any_of_with_none_holding_says_why_each_failed(material: Material) -> None:
    entry = ANY_OF_SCANS
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"))  # a CRITICAL finding
    decision = judge(material, policy(entry))
    assert found(decision) == {
        (f"{BASE}[{VULN}]", Action.DENY, False),  # none attached
        (f"{BASE}[{CDX}].vulnerabilities", Action.DENY, False),
    }


def test_any_of_is_never_passed_by_an_alternative_that_cannot_tell(material: Material) -> None:
    entry = ANY_OF_SCANS
    attest(material, VULN, wrapped(data("604-pip-audit-offline-skipped.json")))
    decision = judge(material, policy(entry))
    assert not decision.allowed
    assert (f"{BASE}[{VULN}].document", Action.DENY, True) in found(decision)


def test_any_of_is_never_passed_on_evidence_older_than_a_finding_of_another_alternative(
    material: Material,
) -> None:
    # attack 27 case A: a newer cosign scan with a CRITICAL finding beside an older CycloneDX scan with only
    # HIGH ones: the CycloneDX alternative held, and overruled the newer finding
    entry = ANY_OF_SCANS
    scan = data("613-trivy-pom-scan.cdx.json")  # CVE-2020-9548 CRITICAL
    old = {**scan, "metadata": {**scan["metadata"], "timestamp": "2026-10-01T12:00:00Z"}}
    old["vulnerabilities"] = [v for v in scan["vulnerabilities"] if v["id"] != "CVE-2020-9548"]
    attest(material, CDX, old, "old-cdx.json")
    attest(material, VULN, wrapped(scan, "2026-12-01T12:00:00Z"), "new-vuln.json")
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{BASE}[{VULN}].vulnerabilities", Action.DENY, False)}
    assert "CVE-2020-9548" in decision.violations[0].message
    assert any("does not overrule" in note for note in decision.notes)
    # the other way round, the newer clean-enough scan decides
    newer = {**old, "metadata": {**old["metadata"], "timestamp": "2026-12-01T13:00:00Z"}}
    attest(material, CDX, newer, "old-cdx.json")
    assert judge(material, policy(entry)).allowed


def test_cel_conditions_read_the_evaluation_clock(material: Material) -> None:
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json")))
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
      conditions:
        - name: before-2027
          cel: "timestamp(now) < timestamp('2027-01-01T00:00:00Z')"
          message: the exception period is over
    """
    assert judge(material, policy(entry)).allowed
    assert not judge(material, policy(entry), now=datetime(2027, 1, 2, tzinfo=UTC)).allowed


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            f"{{predicateType: {SPDX}, keys: [platform/scanner], vulnerabilities: {{maxSeverity: high}}}}",
            "SPDX 2",
        ),
        (
            f"{{predicateType: {VULN}, keys: [platform/scanner], document: sbom}}",
            "`document: sbom` cannot hold",
        ),
        (
            f"{{predicateType: {CDX}, keys: [platform/scanner], document: sbom, "
            "vulnerabilities: {maxSeverity: high}}",
            "set `document: scan`",
        ),
        (
            "{predicateType: https://slsa.dev/provenance/v1, keys: [platform/scanner], "
            "components: {banned: [x]}}",
            "no SBOM or scan",
        ),
        (f"{{predicateType: {CDX}, keys: [platform/scanner], components: {{}}}}", "`required` or `banned`"),
    ],
)
def test_rules_that_cannot_hold_are_refused_at_load(material: Material, entry: str, message: str) -> None:
    with pytest.raises(PolicyLoadError, match=message):
        judge(material, policy(f"- {entry}"))


def test_an_sbom4python_spdx_sbom_is_judged_by_package_names(material: Material) -> None:
    # real sbom4python output (tests/data/611): requests and its dependencies, with PyPI purls
    attest(material, SPDX, data("611-sbom4python-requests.spdx.json"))
    entry = f"""
    - predicateType: {SPDX}
      keys: [platform/scanner]
      maxAge: 30d
      components: {{required: [Charset_Normalizer, "pkg:pypi/urllib3"], banned: [PyYAML]}}
    """
    made = datetime(2026, 12, 2, 7, 2, tzinfo=UTC)  # its creationInfo.created
    assert judge(material, policy(entry), now=made).allowed  # SPDX is an SBOM: maxAge needs no `document`
    banned = entry.replace("banned: [PyYAML]", "banned: [IDNA]")
    denied = judge(material, policy(banned), now=made)
    assert found(denied) == {(f"{BASE}[{SPDX}].components.banned", Action.DENY, False)}
    old = judge(material, policy(entry), now=datetime(2027, 2, 1, tzinfo=UTC))
    assert "the SBOM is 60 days" in old.violations[0].message
    # seven hours after the suite's clock: dated in the future, so refused
    assert "in the future" in judge(material, policy(entry)).violations[0].message


def test_a_newer_scan_or_vex_document_never_hides_the_sbom(material: Material) -> None:
    # attack finding F2: the SBOM (cyclonedx-py, 607) lists PyYAML; a newer scan and a newer VEX document of
    # the same type list only part of the image: a components rule reads the newest SBOM all the same
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"), "a-sbom.json")  # 2026-12-01
    scan = clean_scan()  # 2026-11-28 ...
    scan["metadata"]["timestamp"] = "2026-12-01T20:00:00Z"  # ... made newer than the SBOM
    scan["components"] = [c for c in scan["components"] if c["name"] != "PyYAML"]
    attest(material, CDX, scan, "b-scan.json")
    cleared = [
        v
        for v in scan["vulnerabilities"]
        if v.get("analysis", {}).get("state") in ("not_affected", "resolved")
    ]
    vex = {**scan, "vulnerabilities": cleared}
    vex["metadata"] = {**scan["metadata"], "timestamp": "2026-12-01T21:00:00Z"}
    attest(material, CDX, vex, "c-vex.json")
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      components: {{banned: [pyyaml]}}
    """
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{BASE}[{CDX}].components.banned", Action.DENY, False)}
    assert "a-sbom.json" in decision.violations[0].message
    # and the newest scan is what a vulnerabilities rule reads, never the newer VEX document
    scans = vulns("medium", predicate_type=CDX)
    assert judge(material, policy(scans)).allowed  # b-scan: nothing above medium
    (material.attestations / "b-scan.json").unlink()
    only_vex = judge(material, policy(scans))
    assert found(only_vex) == {(f"{BASE}[{CDX}].document", Action.DENY, True)}
    assert "says it is a vulnerability scan" in only_vex.violations[0].message


def test_a_newer_scan_whose_findings_are_all_analysed_as_affected_is_judged(material: Material) -> None:
    # attack 27 case B: the newer scan's every finding analysed `exploitable` made it a VEX document, and
    # the older scan (HIGH only) was judged instead
    scan = data("613-trivy-pom-scan.cdx.json")
    old = {**scan, "metadata": {**scan["metadata"], "timestamp": "2026-10-01T12:00:00Z"}}
    old["vulnerabilities"] = [v for v in scan["vulnerabilities"] if v["id"] != "CVE-2020-9548"]
    attest(material, CDX, old, "old.json")
    new = {**scan, "metadata": {**scan["metadata"], "timestamp": "2026-12-01T12:00:00Z"}}
    new["vulnerabilities"] = [{**v, "analysis": {"state": "exploitable"}} for v in scan["vulnerabilities"]]
    attest(material, CDX, new, "new.json")
    decision = judge(material, policy(vulns("high", predicate_type=CDX)))
    assert found(decision) == {(f"{BASE}[{CDX}].vulnerabilities", Action.DENY, False)}
    assert "CVE-2020-9548" in decision.violations[0].message


def test_a_newest_document_too_large_or_too_deep_to_check_cannot_tell(material: Material) -> None:
    # attack 27 cases J and K: the newest SBOM nested 2000 deep, and the newest scan over the 16 MiB limit,
    # were skipped with a log line before their signatures were checked, and the older document judged
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"), "old-sbom.json")
    head = {"_type": "https://in-toto.io/Statement/v1", "subject": [{"digest": {"sha256": DIGEST}}]}
    statement = json.dumps({**head, "predicateType": CDX})[:-1].encode() + b', "predicate": '
    statement += b'{"components": [' * 2000 + b"{}" + b"]}" * 2000 + b"}"
    key = material.key("scanner")
    (material.attestations / "deep.json").write_bytes(sign_envelope(PAYLOAD_TYPE, statement, key).to_json())
    bans = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      components: {{banned: [urllib3]}}
    """
    decision = judge(material, policy(bans))
    assert found(decision) == {(f"{BASE}[{CDX}]", Action.DENY, True)}
    assert "deep.json: the in-toto statement is nested too deeply" in decision.violations[0].message
    (material.attestations / "deep.json").unlink()
    assert judge(material, policy(bans)).allowed  # the old SBOM alone lists no urllib3
    attest(material, VULN, wrapped(clean_scan(), "2026-11-01T00:00:00Z"), "old-scan.json")
    big = wrapped(data("613-trivy-pom-scan.cdx.json"), "2026-12-01T12:00:00Z")
    big["padding"] = "x" * (16 * 1024 * 1024)
    attest(material, VULN, big, "big-scan.json")
    decision = judge(material, policy(vulns("critical")))
    assert found(decision) == {(f"{BASE}[{VULN}]", Action.DENY, True)}
    message = decision.violations[0].message
    assert (
        "big-scan.json: the evidence file is larger than 16 MiB" in message
        and f"claims type {VULN}" in message
    )


@pytest.mark.parametrize(
    ("vector", "expected"),
    [
        ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", (Action.DENY, False)),  # 9.8: critical
        ("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N", (Action.DENY, True)),
        ("AV:N/AC:L/Au:N/C:C/I:C/A:C", (Action.DENY, True)),  # v2
        ("CVSS:3.1/AV:N/AC:L", (Action.DENY, True)),  # incomplete
    ],
)
def test_a_rating_with_a_vector_and_no_score_counts(
    material: Material, vector: str, expected: tuple[Action, bool]
) -> None:
    # attack 27 case G: NVD's rating given as a vector only (9.8) beside Red Hat's "low" read as low
    scan = data("613-trivy-pom-scan.cdx.json")
    [finding] = [v for v in scan["vulnerabilities"] if v["id"] == "CVE-2020-9548"]
    finding["ratings"] = [
        {"source": {"name": "redhat"}, "severity": "low"},
        {"source": {"name": "nvd"}, "vector": vector},
    ]
    attest(material, CDX, {**scan, "vulnerabilities": [finding]})
    decision = judge(material, policy(vulns("medium", predicate_type=CDX)))
    assert found(decision) == {(f"{BASE}[{CDX}].vulnerabilities", *expected)}
    assert "CVE-2020-9548" in decision.violations[0].message


def test_an_sbom_rule_with_only_scans_attached_cannot_tell(material: Material) -> None:
    attest(material, CDX, clean_scan())
    entry = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      components: {{banned: [urllib3]}}
    """
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{BASE}[{CDX}].document", Action.DENY, True)}
    assert "is an SBOM" in decision.violations[0].message
    # `document: scan` reads the components the scan lists (urllib3, nested in 609)
    banned = judge(material, policy(entry.replace("components:", "document: scan\n      components:")))
    assert found(banned) == {(f"{BASE}[{CDX}].components.banned", Action.DENY, False)}


def test_a_trivy_sbom_is_no_scan(material: Material) -> None:
    # attack finding F1: real `trivy rootfs --format cyclonedx` output (no vulnerability scanning) carries
    # "vulnerabilities": []; it was counted as a clean scan
    attest(material, CDX, data("612-trivy-conda-sbom.cdx.json"))
    entry = vulns("critical", predicate_type=CDX)
    decision = judge(material, policy(entry), now=datetime(2021, 8, 26, tzinfo=UTC))
    assert found(decision) == {(f"{BASE}[{CDX}].document", Action.DENY, True)}
    # nor inside an anyOf, nor under `document: scan` with maxAge
    fresh = f"""
    - predicateType: {CDX}
      keys: [platform/scanner]
      document: scan
      maxAge: 7d
    """
    assert not judge(material, policy(fresh), now=datetime(2021, 8, 26, tzinfo=UTC)).allowed


@pytest.mark.parametrize("order", ["clean-first", "critical-first"])
def test_two_documents_of_one_time_are_both_judged(material: Material, order: str) -> None:
    # attack finding F4: the same timestamp on a clean scan and one with a CRITICAL finding: which was judged
    # depended on the order they were found in; both are, and the stricter wins
    critical = data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    clean = clean_scan()
    clean["metadata"]["timestamp"] = critical["metadata"]["timestamp"]
    first, second = (clean, critical) if order == "clean-first" else (critical, clean)
    attest(material, CDX, first, "a.json")
    attest(material, CDX, second, "b.json")
    decision = judge(material, policy(vulns("high", predicate_type=CDX)))
    assert found(decision) == {(f"{BASE}[{CDX}].vulnerabilities", Action.DENY, False)}
    assert "PYSEC-2021-142" in decision.violations[0].message


@pytest.mark.parametrize(
    ("rule_type", "document_type"),
    [
        (CDX, "https://cyclonedx.org/bom/v1.5"),
        ("https://cyclonedx.org/bom/v1.4", CDX),
        ("https://cyclonedx.org/bom/v1.4", "https://cyclonedx.org/bom/v1.6"),
        (VULN, "cosign.sigstore.dev/attestation/vuln/v1"),
    ],
)
def test_a_rule_judges_every_member_of_its_predicate_type_family(
    material: Material, rule_type: str, document_type: str
) -> None:
    # attack finding F5: a document attested under another version of the type was "no attestation"; worse,
    # a newer one with findings was missed beside an older clean one of the rule's own version
    clean = clean_scan() if rule_type != VULN else wrapped(data("605-pip-audit-pyyaml-5.3.json"))
    critical = data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    if rule_type == VULN:
        critical = wrapped(critical, "2026-12-01T20:00:00Z")
        clean = wrapped(clean_scan(), "2026-12-01T10:00:00Z")
    else:
        critical["metadata"]["timestamp"] = "2026-12-01T20:00:00Z"
    attest(material, rule_type, clean, "old-clean.json")
    attest(material, document_type, critical, "new-critical.json")
    decision = judge(material, policy(vulns("high", predicate_type=rule_type)))
    assert found(decision) == {(f"{BASE}[{rule_type}].vulnerabilities", Action.DENY, False)}
    (material.attestations / "old-clean.json").unlink()
    assert found(judge(material, policy(vulns("high", predicate_type=rule_type)))) == {
        (f"{BASE}[{rule_type}].vulnerabilities", Action.DENY, False)
    }


def test_a_member_of_the_family_that_does_not_read_cannot_tell(material: Material) -> None:
    # SPDX 3 under https://spdx.dev/Document/v3.0: in the family, so never silently left out
    attest(material, SPDX, data("611-sbom4python-requests.spdx.json"), "old.json")
    attest(material, "https://spdx.dev/Document/v3.0", {"spdxVersion": "SPDX-3.0"}, "new.json")
    entry = f"""
    - predicateType: {SPDX}
      keys: [platform/scanner]
      components: {{banned: [pyyaml]}}
    """
    decision = judge(material, policy(entry), now=datetime(2026, 12, 3, tzinfo=UTC))
    assert found(decision) == {(f"{BASE}[{SPDX}]", Action.DENY, True)}
    assert "new.json" in decision.violations[0].message


def test_a_scan_without_components_cannot_pass_a_components_rule(material: Material) -> None:
    # a Trivy report without --list-all-pkgs (610) lists no package: a ban would hold vacuously
    trivy = about_runtime(data("610-cosign-vuln-trivy-spec-example.json"))["scanner"]["result"]
    attest(material, VULN, wrapped(trivy))
    entry = f"""
    - predicateType: {VULN}
      keys: [platform/scanner]
      components: {{banned: [busybox]}}
    """
    decision = judge(material, policy(entry))
    assert found(decision) == {(f"{BASE}[{VULN}].document", Action.DENY, True)}
    assert "lists no component" in decision.violations[0].message
