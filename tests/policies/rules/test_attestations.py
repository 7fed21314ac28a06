"""policies.rules._attestations: image attestations with maxAge and CEL conditions, against real keys and real
scanner output (tests/data 602-610) signed as in-toto statements about the image digest."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import PolicyLoadError, load_policy_set
from policies.results import Action, Decision
from tests.conftest import DATA
from tests.policies.conftest import RUNTIME, Material, pod
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.evidence_folder import LocalEvidence

CDX = "https://cyclonedx.org/bom"
VULN = "https://cosign.sigstore.dev/attestation/vuln/v1"
DIGEST = RUNTIME.split("@sha256:")[1]
NOW = datetime(2026, 12, 2, tzinfo=UTC)
README = Path(__file__).resolve().parents[3] / "policies" / "README.md"
NO_CRITICAL = "!scan.vulnerabilities.exists(v, v.affected && v.severity == 'critical')"

POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: scanned}
spec:
  match: {namespaces: [prod]}
  onError: ONERROR
  onIndeterminate: INDETERMINATE
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      attestations:
        - predicateType: TYPE
          keys: [platform/scanner]
EXTRA"""


def policy(
    predicate_type: str = CDX,
    *,
    max_age: str | None = None,
    conditions: tuple[tuple[str, str], ...] = (("no-critical", NO_CRITICAL),),
    on_error: str = "Deny",
    on_indeterminate: str = "Deny",
    document: str | None = None,
) -> str:
    extra = f"          maxAge: {max_age}\n" if max_age else ""
    extra += f"          document: {document}\n" if document else ""
    if conditions:
        extra += "          conditions:\n"
        for name, cel in conditions:
            extra += (
                f"            - {{name: {name}, cel: {json.dumps(cel)}, message: '{name} does not hold'}}\n"
            )
    text = POLICY.replace("TYPE", predicate_type).replace("ONERROR", on_error).replace("EXTRA", extra)
    return text.replace("INDETERMINATE", on_indeterminate)


def data(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def about_runtime(trivy: dict[str, Any]) -> dict[str, Any]:
    """A Trivy report (610's, of alpine) made the report of the runtime image the tests attest: a document
    whose content names another image than its subject is refused."""
    report = trivy.get("scanner", {}).get("result", trivy)
    report["ArtifactName"] = RUNTIME
    report["Metadata"]["RepoDigests"] = [RUNTIME]
    return trivy


def wrapped(result: dict[str, Any], finished: str = "2026-12-01T16:51:05Z") -> dict[str, Any]:
    return {
        "scanner": {"uri": "pkg:pypi/pip-audit@2.10.1", "result": result},
        "metadata": {"scanFinishedOn": finished},
    }


def clean_scan() -> dict[str, Any]:
    """A CycloneDX scan with no affected finding above medium: 609 without the advisory's CRITICAL rating
    (a CycloneDX document that reports no finding is an SBOM, never a clean scan: docs/scans.md)."""
    scan = data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    scan["vulnerabilities"][0]["ratings"] = scan["vulnerabilities"][0]["ratings"][:1]
    return scan


def judge(material: Material, text: str, *, now: datetime = NOW) -> Decision:
    paths = [material.policy(text), material.keys_file("scanner")]
    engine = PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: now)
    return asyncio.run(engine.evaluate(pod()))


def attest(
    material: Material, predicate_type: str, predicate: dict[str, Any], file: str = "scan.json"
) -> None:
    material.statement(DIGEST, predicate_type, predicate, "scanner", file)


def found(decision: Decision) -> set[tuple[str, Action, bool]]:
    return {(v.rule, v.action, v.error) for v in decision.violations}


RULE = f"images.runtime.attestations[{CDX}]"


def test_a_critical_finding_is_denied_whichever_rating_says_so(material: Material) -> None:
    # the first rating is the owner's medium; the advisory's CRITICAL comes second
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"))
    decision = judge(material, policy())
    assert found(decision) == {(f"{RULE}.conditions.no-critical", Action.DENY, False)}
    assert decision.violations[0].message == "no-critical does not hold"


def test_vex_not_affected_and_an_allow_list_by_alias_admit(material: Material) -> None:
    # PYSEC-2020-96 (critical by score) is not_affected; PYSEC-2021-142 is allowed by its CVE alias
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"))
    allowed = (
        "scan.vulnerabilities.all(v, !v.affected || v.severity != 'critical' "
        "|| v.ids.exists(i, i in ['CVE-2020-14343']))"
    )
    assert judge(material, policy(conditions=(("allow-listed", allowed),))).allowed
    by_id = allowed.replace("CVE-2020-14343", "CVE-2020-1747")  # allow-lists the not-affected one only
    assert not judge(material, policy(conditions=(("allow-listed", by_id),))).allowed


def test_severity_names_are_one_vocabulary(material: Material) -> None:
    # GHSA-9wx4-h78v-vm56 is rated MODERATE
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"))
    medium = "!scan.vulnerabilities.exists(v, v.affected && v.severity == 'medium')"
    assert found(judge(material, policy(conditions=(("no-medium", medium),)))) == {
        (f"{RULE}.conditions.no-medium", Action.DENY, False)
    }


@pytest.mark.parametrize("on_indeterminate", ["Deny", "Warn"])
def test_a_scan_without_severities_cannot_tell_so_on_indeterminate_decides(
    material: Material, on_indeterminate: str
) -> None:
    # real pip-audit output: two PyYAML findings, no severity at all; onError (registry failures) is apart
    attest(material, CDX, data("603-pip-audit-pyyaml-5.3.cdx.json"))
    decision = judge(material, policy(on_error="Warn", on_indeterminate=on_indeterminate))
    [violation] = decision.violations
    assert (violation.rule, violation.action, violation.error, violation.indeterminate) == (
        f"{RULE}.conditions.no-critical",
        Action(on_indeterminate),
        False,
        True,
    )
    assert "cannot tell: no rating gives a severity for PYSEC-2020-96, PYSEC-2021-142" in violation.message
    assert decision.allowed == (on_indeterminate == "Warn")
    assert on_indeterminate != "Warn" or decision.warnings


def test_skipped_packages_cannot_tell(material: Material) -> None:
    # real pip-audit JSON: every package skipped, "No known vulnerabilities found"
    attest(material, VULN, wrapped(data("604-pip-audit-offline-skipped.json")))
    decision = judge(material, policy(VULN))
    [violation] = decision.violations
    assert violation.indeterminate and violation.action is Action.DENY
    assert "pip-audit skipped 2 package(s)" in violation.message


def test_an_empty_bom_cannot_tell(material: Material) -> None:
    attest(material, CDX, data("602-pip-audit-offline-skipped.cdx.json"))
    [violation] = judge(material, policy()).violations
    assert violation.indeterminate and "empty BOM" in violation.message


def test_a_clean_scan_counts_only_where_it_says_it_is_one(material: Material) -> None:
    # real pip-audit output for clean packages has no `vulnerabilities` key: alone it looks like an SBOM
    attest(material, CDX, data("606-pip-audit-clean.cdx.json"))
    [violation] = judge(material, policy()).violations
    assert violation.indeterminate and "reports no finding, so it is an SBOM" in violation.message
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json")), "wrapped.json")
    assert judge(material, policy(VULN)).allowed


def test_max_age_reads_the_time_each_format_records(material: Material) -> None:
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json"), "2026-11-20T00:00:00Z"))
    assert judge(material, policy(VULN, max_age="14d")).allowed
    stale = judge(material, policy(VULN, max_age="7d"))
    assert found(stale) == {(f"images.runtime.attestations[{VULN}].maxAge", Action.DENY, False)}
    assert "scanned 2026-11-20T00:00:00Z" in stale.violations[0].message
    # the CycloneDX document's own time (metadata.timestamp) is 2026-11-28T09:00:00Z
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"), "vex.json")
    assert found(judge(material, policy(max_age="1d", document="scan", conditions=()))) == {
        (f"{RULE}.maxAge", Action.DENY, False)
    }
    assert judge(material, policy(max_age="7d", document="scan", conditions=())).allowed


def test_a_scan_is_as_old_as_its_vulnerability_database(material: Material) -> None:
    predicate = wrapped(data("606-pip-audit-clean.cdx.json"), "2026-12-01T00:00:00Z")
    predicate["scanner"]["db"] = {"version": "2026-09-01T00:00:00Z"}
    attest(material, VULN, predicate)
    stale = judge(material, policy(VULN, max_age="30d"))
    assert "with a vulnerability database from 2026-09-01T00:00:00Z" in stale.violations[0].message


@pytest.mark.parametrize("max_age", [None, "7d"])
def test_a_scan_dated_in_the_future_is_refused_whatever_the_rule_says(
    material: Material, max_age: str | None
) -> None:
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json"), "2027-01-01T00:00:00Z"))
    [violation] = judge(material, policy(VULN, max_age=max_age)).violations
    assert violation.rule == f"images.runtime.attestations[{VULN}]" and not violation.error
    assert "made in the future (2027-01-01T00:00:00Z)" in violation.message


def test_a_scan_dated_in_the_future_does_not_hide_todays_finding(material: Material) -> None:
    # today's scan finds a CRITICAL vulnerability; a clean one dated next month would be "the newest"
    attest(material, VULN, wrapped(data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")), "today.json")
    future = wrapped(data("606-pip-audit-clean.cdx.json"), "2027-01-01T00:00:00Z")
    attest(material, VULN, future, "future.json")
    decision = judge(material, policy(VULN))
    assert not decision.allowed
    assert found(decision) == {(f"images.runtime.attestations[{VULN}]", Action.DENY, False)}
    # an SBOM without maxAge alike: the banned component listed today stays visible
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"), "sbom-today.json")
    clean = data("606-pip-audit-clean.cdx.json") | {"metadata": {"timestamp": "2027-01-01T00:00:00Z"}}
    attest(material, CDX, clean, "sbom-future.json")
    banned = "!scan.components.exists(c, c.package in ['pyyaml'])"
    assert found(judge(material, policy(conditions=(("banned", banned),)))) == {(RULE, Action.DENY, False)}


def test_a_database_dated_in_the_future_is_refused(material: Material) -> None:
    predicate = wrapped(data("606-pip-audit-clean.cdx.json"), "2026-12-01T23:59:00Z")
    predicate["scanner"]["db"] = {"version": "2026-12-03T00:00:00Z"}
    attest(material, VULN, predicate)
    [violation] = judge(material, policy(VULN)).violations
    assert "made with a vulnerability database built in the future" in violation.message


def test_a_few_minutes_of_clock_skew_are_tolerated(material: Material) -> None:
    # NOW is 2026-12-02T00:00Z: CLOCK_SKEW (five minutes) ahead is accepted, a second more is not
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json"), "2026-12-02T00:05:00Z"))
    assert judge(material, policy(VULN)).allowed
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json"), "2026-12-02T00:05:01Z"))
    assert not judge(material, policy(VULN)).allowed


def test_max_age_without_a_time_cannot_tell(material: Material) -> None:
    bom = data("606-pip-audit-clean.cdx.json")
    del bom["metadata"]
    attest(material, CDX, bom)
    [violation] = judge(material, policy(max_age="7d", document="sbom", conditions=())).violations
    assert violation.indeterminate and "metadata.timestamp" in violation.message


def test_the_newest_scan_is_judged(material: Material) -> None:
    attest(material, VULN, wrapped(data("606-pip-audit-clean.cdx.json"), "2026-11-01T00:00:00Z"), "old.json")
    attest(material, VULN, wrapped(data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")), "new.json")
    assert not judge(material, policy(VULN)).allowed


def test_banned_components_match_normalised_names(material: Material) -> None:
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"))  # lists PyYAML
    banned = "!scan.components.exists(c, c.name in ['pyyaml', 'ruamel-yaml'])"
    decision = judge(material, policy(conditions=(("banned", banned),)))
    assert found(decision) == {(f"{RULE}.conditions.banned", Action.DENY, False)}


def test_the_readme_ban_matches_pypi_and_maven_components(material: Material) -> None:
    [readme_ban] = re.findall(r'cel: "(!scan\.components\.exists\(c, c\.package in .*)"', README.read_text())
    assert "org.apache.logging.log4j:log4j-core" in readme_ban
    spdx = "https://spdx.dev/Document"
    rule = policy(spdx, conditions=(("banned", readme_ban),))
    # the SPDX example lists Jena as pkg:maven/org.apache.jena/apache-jena@3.12.0, which is not banned
    example = data("608-spdx-2.3-spec-example.spdx.json")
    attest(material, spdx, example)
    assert judge(material, rule).allowed
    # the same package recorded as log4j-core is (its name is org.apache.logging.log4j/log4j-core)
    text = json.dumps(example).replace(
        "pkg:maven/org.apache.jena/apache-jena@3.12.0", "pkg:maven/org.apache.logging.log4j/log4j-core@2.14.1"
    )
    attest(material, spdx, json.loads(text))
    banned = {(f"images.runtime.attestations[{spdx}].conditions.banned", Action.DENY, False)}
    assert found(judge(material, rule)) == banned
    # and PyPI's PyYAML, in a CycloneDX SBOM
    attest(material, CDX, data("607-cyclonedx-py-requirements.cdx.json"))
    assert found(judge(material, policy(conditions=(("banned", readme_ban),)))) == {
        (f"{RULE}.conditions.banned", Action.DENY, False)
    }


def test_an_spdx_sbom_lists_components(material: Material) -> None:
    attest(material, "https://spdx.dev/Document", data("608-spdx-2.3-spec-example.spdx.json"))
    listed = "scan.components.exists(c, c.name == 'glibc')"
    assert judge(material, policy("https://spdx.dev/Document", conditions=(("glibc", listed),))).allowed


def test_cosign_in_toto_v01_statements_are_read(material: Material) -> None:
    # cosign writes Statement v0.1 (and, before 1.3, the predicate type without its scheme)
    statement = {
        "_type": "https://in-toto.io/Statement/v0.1",
        "subject": [{"name": "nvcr.io/nvidia/tensorrt", "digest": {"sha256": DIGEST}}],
        "predicateType": "cosign.sigstore.dev/attestation/vuln/v1",
        "predicate": about_runtime(data("610-cosign-vuln-trivy-spec-example.json")),
    }
    envelope = sign_envelope(PAYLOAD_TYPE, json.dumps(statement).encode(), material.key("scanner"))
    (material.attestations / "v01.json").write_bytes(envelope.to_json())
    no_high = "!scan.vulnerabilities.exists(v, v.severity == 'high')"
    decision = judge(
        material, policy("cosign.sigstore.dev/attestation/vuln/v1", conditions=(("no-high", no_high),))
    )
    assert [v.rule for v in decision.violations] == [
        "images.runtime.attestations[cosign.sigstore.dev/attestation/vuln/v1].conditions.no-high"
    ]


def _unparsable() -> dict[str, Any]:
    bom = data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    bom["components"][0]["version"] = 5.3
    return bom


@pytest.mark.parametrize("on_indeterminate", ["Deny", "Warn"])
def test_a_signed_document_that_does_not_parse_cannot_tell(material: Material, on_indeterminate: str) -> None:
    attest(material, CDX, _unparsable())
    decision = judge(material, policy(on_indeterminate=on_indeterminate))
    [violation] = decision.violations
    assert (violation.rule, violation.indeterminate, violation.action) == (
        RULE,
        True,
        Action(on_indeterminate),
    )
    assert "cannot be read" in violation.message and "the signed document is invalid" in violation.message
    assert "which one is the newest" in violation.message


def test_an_unreadable_newest_scan_does_not_hide_an_older_readable_one(material: Material) -> None:
    # the readable one (made 2026-11-28) has a CRITICAL finding; the unreadable one may be newer or not:
    # both are said, neither is skipped
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"), "readable.json")
    unreadable = _unparsable() | {"metadata": {"timestamp": "2026-12-01T00:00:00Z"}}
    attest(material, CDX, unreadable, "unreadable.json")
    decision = judge(material, policy(on_indeterminate="Warn"))
    assert found(decision) == {
        (RULE, Action.WARN, False),
        (f"{RULE}.conditions.no-critical", Action.DENY, False),
    }


def test_an_undated_document_is_judged_beside_the_newest_dated_one(material: Material) -> None:
    # dated with a CRITICAL finding, and an undated clean one: both are judged
    attest(material, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"), "b-dated.json")
    undated = clean_scan()
    del undated["metadata"]
    attest(material, CDX, undated, "a-undated.json")
    decision = judge(material, policy())
    assert found(decision) == {(f"{RULE}.conditions.no-critical", Action.DENY, False)}
    assert any("a-undated.json records no time, so it is judged" in note for note in decision.notes)
    # attack 27 case C: an undated CRITICAL scan (cosign's Go zero time) beside an older dated clean one was
    # left out; it may be the newer, so it is judged
    critical = data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    del critical["metadata"]["timestamp"]
    attest(material, VULN, wrapped(critical, "0001-01-01T00:00:00Z"), "c-zero.json")
    attest(material, VULN, wrapped(clean_scan(), "2026-11-01T00:00:00Z"), "d-dated.json")
    zero = judge(material, policy(VULN))
    assert found(zero) == {
        (f"images.runtime.attestations[{VULN}].conditions.no-critical", Action.DENY, False)
    }
    # two undated ones: which describes the image cannot be told, so every one is judged
    critical = data("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    del critical["metadata"]
    attest(material, CDX, critical, "b-dated.json")
    assert found(judge(material, policy())) == {(f"{RULE}.conditions.no-critical", Action.DENY, False)}


@pytest.mark.parametrize("version", [None, "v1-2021080612"])
def test_a_condition_reading_an_absent_scan_field_cannot_tell_whatever_on_error_says(
    material: Material, version: str | None
) -> None:
    # attack 27 case F: a database version that is no time (Trivy's "v1-2021080612") leaves
    # scan.database_at out; the condition failed on the missing key as onError, which Warn admitted
    scan = wrapped(clean_scan())
    if version is not None:
        scan["scanner"]["db"] = {"version": version}
    attest(material, VULN, scan)
    fresh = (("fresh-db", "timestamp(scan.database_at) > timestamp(now) - duration('168h')"),)
    decision = judge(material, policy(VULN, conditions=fresh, on_error="Warn"))
    assert found(decision) == {
        (f"images.runtime.attestations[{VULN}].conditions.fresh-db", Action.DENY, False)
    }
    [violation] = decision.violations
    assert violation.indeterminate
    why = "is no RFC 3339 date" if version else "does not say when its vulnerability database was built"
    assert why in violation.message


def test_an_unverifiable_document_fails_only_itself_and_is_named(material: Material) -> None:
    clean = clean_scan()
    attest(material, CDX, clean, "good.json")
    material.statement(DIGEST, CDX, data("609-cyclonedx-vex-pyyaml-ratings.cdx.json"), "rogue", "rogue.json")
    decision = judge(material, policy())
    assert decision.allowed
    [note] = [n for n in decision.notes if "did not count" in n]
    assert "rogue.json" in note
    # without the good one the denial names each document that did not verify
    (material.attestations / "good.json").unlink()
    material.statement(DIGEST, CDX, clean, "rogue", "rogue2.json")
    [violation] = judge(material, policy()).violations
    assert "rogue.json" in violation.message and "rogue2.json" in violation.message


def test_a_scan_signed_by_another_key_is_refused(material: Material) -> None:
    material.statement(DIGEST, CDX, data("606-pip-audit-clean.cdx.json"), "rogue", "rogue.json")
    [violation] = judge(material, policy()).violations
    assert violation.rule == RULE and "signed by [platform/scanner]" in violation.message


def test_conditions_over_any_predicate(material: Material) -> None:
    provenance = "https://slsa.dev/provenance/v1"
    builder = "predicate.runDetails.builder.id == 'https://github.com/actions/runner'"
    attest(material, provenance, {"runDetails": {"builder": {"id": "https://github.com/actions/runner"}}})
    assert judge(material, policy(provenance, conditions=(("builder", builder),))).allowed
    other = builder.replace("actions/runner", "someone/else")
    assert not judge(material, policy(provenance, conditions=(("builder", other),))).allowed


def test_scan_and_max_age_need_a_predicate_trtguard_reads(material: Material) -> None:
    provenance = "https://slsa.dev/provenance/v1"
    with pytest.raises(PolicyLoadError, match="`scan` is set only for SBOMs and scans"):
        judge(material, policy(provenance))
    with pytest.raises(PolicyLoadError, match="maxAge needs a time trtguard can read"):
        judge(material, policy(provenance, max_age="7d", conditions=()))


def test_the_naive_max_age_on_a_cyclonedx_document_is_refused_with_a_hint(material: Material) -> None:
    # a fresh SBOM passed as a fresh scan, and an empty BOM as a fresh SBOM: say which document is meant
    with pytest.raises(PolicyLoadError, match="say which with `document: scan`"):
        judge(material, policy(max_age="7d", conditions=()))


def test_cannot_tell_holds_for_conditions_evaluated_in_the_sandbox(material: Material) -> None:
    # a nested comprehension is too costly to run inline: it runs in a worker process, and a missing
    # severity must still read as "cannot tell" there
    nested = (
        "scan.vulnerabilities.all(v, !v.affected || v.severity != 'critical' || v.ids.exists(i, i in ['X']))"
    )
    attest(material, CDX, data("603-pip-audit-pyyaml-5.3.cdx.json"))
    [violation] = judge(material, policy(conditions=(("nested", nested),))).violations
    assert violation.indeterminate and "cannot tell: no rating gives a severity" in violation.message
