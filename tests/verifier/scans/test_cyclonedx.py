"""verifier.scans._cyclonedx on real pip-audit and cyclonedx-py output (tests/data 602-607) and a VEX document
(609), compared with cyclonedx-python-lib where that library reads the document."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.conftest import DATA
from verifier.base._errors import InputError
from verifier.scans import read_scan
from verifier.scans.model import ScanDocument

CDX = "https://cyclonedx.org/bom"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


def read(name: str, predicate_type: str = CDX) -> ScanDocument:
    return read_scan(predicate_type, load(name), name)


@pytest.mark.parametrize(
    "name",
    [
        "602-pip-audit-offline-skipped.cdx.json",
        "603-pip-audit-pyyaml-5.3.cdx.json",
        "606-pip-audit-clean.cdx.json",
        "607-cyclonedx-py-requirements.cdx.json",
    ],
)
def test_the_subset_reads_what_cyclonedx_python_lib_reads(name: str) -> None:
    # Imported here: the reference libraries are large, and at collection they would weigh on every test
    # that measures a child's peak memory (wait4 counts the memory of the pytest process it forked from).
    from cyclonedx.model.bom import Bom  # noqa: PLC0415

    ours = read(name)
    theirs = Bom.from_json(load(name))  # type: ignore[attr-defined]
    assert sorted((c.raw_name, c.version) for c in ours.components) == sorted(
        (c.name, c.version) for c in theirs.components
    )
    assert sorted(v.id for v in ours.vulnerabilities or ()) == sorted(v.id for v in theirs.vulnerabilities)
    assert ours.scanned_at == theirs.metadata.timestamp


def test_the_reference_library_refuses_severities_scanners_write() -> None:
    # 609 rates one finding "CRITICAL" and another "MODERATE", as advisories spell them: the library stops
    # at the first; the subset reads both into its severities.
    from cyclonedx.model.bom import Bom  # noqa: PLC0415 - see above

    with pytest.raises(ValueError, match="is not a valid VulnerabilitySeverity"):
        Bom.from_json(load("609-cyclonedx-vex-pyyaml-ratings.cdx.json"))  # type: ignore[attr-defined]
    assert read("609-cyclonedx-vex-pyyaml-ratings.cdx.json").vulnerabilities


def test_every_rating_counts_not_the_first() -> None:
    # The owner's environmental rating (medium) comes first, the advisory's CRITICAL second.
    [first, *_] = read("609-cyclonedx-vex-pyyaml-ratings.cdx.json").vulnerabilities or ()
    assert first.ratings[0].severity == "medium"
    assert first.severities == ("critical", "medium")
    assert first.to_json()["severity"] == "critical"


def test_severity_names_are_normalised() -> None:
    found = {v.id: v for v in read("609-cyclonedx-vex-pyyaml-ratings.cdx.json").vulnerabilities or ()}
    assert found["GHSA-9wx4-h78v-vm56"].severities == ("medium",)  # MODERATE
    assert found["PYSEC-2020-96"].severities == ("critical",)  # CVSS 3.1 score 9.8, no severity word
    assert found["CVE-2024-37891"].severities == ()  # "unknown" names no severity


def test_vex_analysis_decides_what_is_affected() -> None:
    found = {v.id: v for v in read("609-cyclonedx-vex-pyyaml-ratings.cdx.json").vulnerabilities or ()}
    assert found["PYSEC-2021-142"].affected  # no analysis
    assert found["GHSA-9wx4-h78v-vm56"].affected  # in_triage
    assert not found["PYSEC-2020-96"].affected  # not_affected
    assert not found["CVE-2024-37891"].affected  # resolved
    assert found["PYSEC-2020-96"].to_json()["state"] == "not_affected"


def test_aliases_come_from_references_in_one_case() -> None:
    [first, *_] = read("609-cyclonedx-vex-pyyaml-ratings.cdx.json").vulnerabilities or ()
    # written GHSA-8Q59-Q68H-6HV4 and cve-2020-14343 in the document
    assert first.ids == ("PYSEC-2021-142", "GHSA-8q59-q68h-6hv4", "CVE-2020-14343")


def test_pip_audit_writes_no_severity_which_stays_unknown() -> None:
    scan = read("603-pip-audit-pyyaml-5.3.cdx.json")
    assert [v.id for v in scan.vulnerabilities or ()] == ["PYSEC-2020-96", "PYSEC-2021-142"]
    assert all("severity" not in v for v in scan.to_json()["vulnerabilities"])
    assert any("no rating gives a severity for PYSEC-2020-96, PYSEC-2021-142" in u for u in scan.unknowns)


def test_an_empty_bom_audits_nothing() -> None:
    # pip-audit offline: every package skipped, and its CycloneDX output is an empty BOM
    scan = read("602-pip-audit-offline-skipped.cdx.json")
    assert scan.components == () and scan.vulnerabilities is None
    assert "components" not in scan.to_json() and "vulnerabilities" not in scan.to_json()
    assert any("empty BOM" in u for u in scan.unknowns)


def test_a_clean_scan_without_the_vulnerabilities_key_is_no_scan_evidence() -> None:
    scan = read("606-pip-audit-clean.cdx.json")
    assert len(scan.components) == 2
    assert scan.vulnerabilities is None and scan.role == "sbom"
    assert any("reports no finding, so it is an SBOM" in u for u in scan.unknowns)


def test_a_trivy_sbom_with_an_empty_vulnerabilities_list_is_an_sbom() -> None:
    # attack finding F1: real `trivy rootfs --format cyclonedx` output (no vulnerability scanning) carries
    # "vulnerabilities": [], byte for byte what a clean Trivy scan writes: it says nothing was scanned
    scan = read("612-trivy-conda-sbom.cdx.json")
    assert scan.role == "sbom" and scan.vulnerabilities is None
    assert [c.package for c in scan.components] == ["openssl", "pip"]
    # and pip-audit's clean scan given an empty list is no scan either
    assert (
        read_scan(CDX, load("606-pip-audit-clean.cdx.json") | {"vulnerabilities": []}, "606").role == "sbom"
    )


def test_a_document_that_reports_findings_is_a_scan_and_one_all_analysed_is_vex() -> None:
    # real `trivy fs --scanners vuln --format cyclonedx` output: findings, so a scan
    assert read("613-trivy-pom-scan.cdx.json").role == "scan"
    # 609 has one finding no VEX analysis covers: a scan with VEX embedded
    assert read("609-cyclonedx-vex-pyyaml-ratings.cdx.json").role == "scan"
    vex = load("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    analysed = [v for v in vex["vulnerabilities"] if "analysis" in v]  # not_affected, in_triage, resolved
    vex["vulnerabilities"] = [v for v in analysed if v["analysis"]["state"] != "in_triage"]
    scan = read_scan(CDX, vex, "vex")
    assert scan.role == "vex" and not scan.is_scan
    assert any("VEX document" in u for u in scan.unknowns)


@pytest.mark.parametrize("state", ["exploitable", "in_triage", None])
def test_a_finding_analysed_as_affected_makes_a_scan(state: str | None) -> None:
    # attack 27 case B: every finding of a newer Trivy scan analysed as `exploitable` made it a VEX document,
    # left out for an older scan; only analyses that clear a finding make one
    scan = load("613-trivy-pom-scan.cdx.json")
    for finding in scan["vulnerabilities"]:
        finding["analysis"] = {"state": state} if state else {"detail": "triaged"}
    read = read_scan(CDX, scan, "613")
    assert read.role == "scan" and read.vulnerabilities
    assert all(v.affected for v in read.vulnerabilities)


def test_a_rating_says_the_highest_of_its_word_and_its_score() -> None:
    # attack finding F10: Trivy writes Red Hat's own word beside the CVSS score (613: CVE-2020-9548 is
    # "high" by Red Hat at 8.1); a "low" at 9.8 is critical, and a "critical" at 2.0 is critical too
    data = load("613-trivy-pom-scan.cdx.json")
    [finding] = [v for v in data["vulnerabilities"] if v["id"] == "CVE-2020-9548"]
    redhat = [r for r in finding["ratings"] if r["source"]["name"] == "redhat"]
    for word, score, vector, expected in (
        ("low", 9.8, None, "critical"),
        ("critical", 2.0, None, "critical"),
        ("low", 9.8, "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", "critical"),
    ):
        rating = {**redhat[0], "severity": word, "score": score}
        if vector is not None:  # the method left out: the vector names the version
            rating = {k: v for k, v in rating.items() if k != "method"} | {"vector": vector}
        finding["ratings"] = [rating]
        [read_back] = [
            v for v in read_scan(CDX, data, "613").vulnerabilities or () if v.id == "CVE-2020-9548"
        ]
        assert read_back.severities[0] == expected, (word, score)


def test_a_cyclonedx_component_with_group_and_name_is_group_colon_artifact() -> None:
    # attack finding F9: Trivy writes Maven components with `group` and `name` (and a purl); without the
    # purl the group still counts
    data = load("613-trivy-pom-scan.cdx.json")
    jackson = next(c for c in data["components"] if c.get("name") == "jackson-databind")
    assert read_scan(CDX, data, "613").components[-1].package == "com.fasterxml.jackson.core:jackson-databind"
    del jackson["purl"]
    [component] = [c for c in read_scan(CDX, data, "613").components if c.raw_name == "jackson-databind"]
    assert (component.package, component.name) == (
        "com.fasterxml.jackson.core:jackson-databind",
        "com.fasterxml.jackson.core/jackson-databind",
    )


def test_component_names_are_normalised() -> None:
    sbom = read("607-cyclonedx-py-requirements.cdx.json", "https://cyclonedx.org/bom/v1.6")
    first = sbom.components[0]
    assert (first.name, first.raw_name, first.purl) == ("pyyaml", "PyYAML", "pkg:pypi/pyyaml@5.3")
    # pip-audit writes no purl: the written name, in lower case
    assert read("603-pip-audit-pyyaml-5.3.cdx.json").components[0].name == "pyyaml"
    # nested components count, and the purl's own spelling is normalised (pkg:pypi/PyYAML@5.3)
    names = [c.name for c in read("609-cyclonedx-vex-pyyaml-ratings.cdx.json").components]
    assert names == ["pyyaml", "requests", "urllib3"]


def test_times_need_a_zone() -> None:
    data = load("606-pip-audit-clean.cdx.json")
    data["metadata"]["timestamp"] = "2026-12-01T16:51:07"
    scan = read_scan(CDX, data, "naive")
    assert scan.scanned_at is None
    assert any("not an RFC 3339 time with a zone" in u for u in scan.unknowns)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("components", 0, "version"), 5.3),
        (("vulnerabilities", 0, "ratings"), "critical"),
        (("vulnerabilities", 1, "analysis", "state"), ["not_affected"]),
    ],
)
def test_fields_of_the_wrong_type_are_errors(path: tuple[str | int, ...], value: object) -> None:
    data = copy.deepcopy(load("609-cyclonedx-vex-pyyaml-ratings.cdx.json"))
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InputError, match="the CycloneDX document is not valid"):
        read_scan(CDX, data, "bad")


def test_a_document_of_another_format_is_refused() -> None:
    with pytest.raises(InputError, match="not a CycloneDX document"):
        read_scan(CDX, load("608-spdx-2.3-spec-example.spdx.json"), "spdx")


def test_a_trivy_cyclonedx_scan_of_packages_it_does_not_look_up_cannot_tell() -> None:
    # the family of F6 in CycloneDX: Trivy's conda SBOM (612) made a scan by a finding (613's): its conda
    # packages (aquasecurity:trivy:PkgType conda-pkg) were listed, never looked up
    data = load("612-trivy-conda-sbom.cdx.json")
    data["vulnerabilities"] = load("613-trivy-pom-scan.cdx.json")["vulnerabilities"][:1]
    scan = read_scan(CDX, data, "612")
    assert scan.role == "scan" and scan.vulnerabilities is None
    assert [name for name, _ in scan.skipped] == ["openssl", "pip"]
    assert any("of a type Trivy has no vulnerability data for" in u for u in scan.unknowns)
    # and inside cosign's predicate alike
    wrapped = {"scanner": {"uri": "pkg:github/aquasecurity/trivy@0.66.0", "result": data}, "metadata": {}}
    assert (
        read_scan("https://cosign.sigstore.dev/attestation/vuln/v1", wrapped, "612").vulnerabilities is None
    )
