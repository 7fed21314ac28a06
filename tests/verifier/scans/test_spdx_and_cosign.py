"""verifier.scans._spdx (the SPDX 2.3 specification's example, compared with spdx-tools) and
verifier.scans._cosign (the cosign specification's Trivy example, real pip-audit JSON reports)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import DATA
from verifier.base._errors import InputError
from verifier.scans import (
    COSIGN_VULN_PREDICATE_TYPE,
    SPDX_PREDICATE_TYPE,
    is_scan_predicate_type,
    read_scan,
    same_predicate_type,
    scan_family,
)

SPDX_EXAMPLE = "608-spdx-2.3-spec-example.spdx.json"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


def wrapped(result: dict[str, Any], **metadata: str) -> dict[str, Any]:
    """A cosign vulnerability predicate around a scanner result (as `cosign attest --type vuln` takes it)."""
    return {
        "invocation": {"parameters": [], "uri": "", "event_id": "", "builder.id": ""},
        "scanner": {"uri": "pkg:pypi/pip-audit@2.10.1", "version": "2.10.1", "result": result},
        "metadata": metadata
        or {"scanStartedOn": "2026-12-01T16:51:00Z", "scanFinishedOn": "2026-12-01T16:51:05Z"},
    }


def test_spdx_packages_as_spdx_tools_reads_them() -> None:
    # Imported here: spdx-tools loads ~500 modules (rdflib among them), which at collection would weigh on
    # every test that measures a child's peak memory (wait4 counts the pytest process it forked from).
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser  # noqa: PLC0415

    ours = read_scan(SPDX_PREDICATE_TYPE, load(SPDX_EXAMPLE), SPDX_EXAMPLE)
    theirs = JsonLikeDictParser().parse(load(SPDX_EXAMPLE))  # type: ignore[no-untyped-call]
    assert [(c.raw_name, c.version) for c in ours.components] == [
        (p.name, p.version) for p in theirs.packages
    ]
    assert ours.scanned_at == theirs.creation_info.created.replace(tzinfo=UTC)
    jena = next(c for c in ours.components if c.raw_name == "Jena")
    assert (jena.name, jena.ecosystem) == ("org.apache.jena/apache-jena", "maven")


def test_spdx_carries_no_vulnerability_results() -> None:
    scan = read_scan("https://spdx.dev/Document/v2.3", load(SPDX_EXAMPLE), SPDX_EXAMPLE)
    assert scan.vulnerabilities is None
    assert "vulnerabilities" not in scan.to_json()


def test_spdx_of_another_version_is_refused() -> None:
    data = load(SPDX_EXAMPLE) | {"spdxVersion": "SPDX-3.0"}
    with pytest.raises(InputError, match=r"not an SPDX 2\.2 or 2\.3 JSON document"):
        read_scan(SPDX_PREDICATE_TYPE, data, "spdx3")


def test_trivy_report_in_the_cosign_predicate() -> None:
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, load("610-cosign-vuln-trivy-spec-example.json"), "610")
    # the time the wrapper records, which is where cosign's predicate keeps it
    assert scan.scanned_at == datetime(2021, 8, 6, 17, 50, 50, 520000, tzinfo=UTC)
    assert scan.database_at is None  # "v1-2021080612" is a version, not a time
    # every score counts: NVD's CVSS v2 5.0 is medium, its v3 7.5 high
    assert [(v.id, v.severities, v.components) for v in scan.vulnerabilities or ()] == [
        ("CVE-2021-28831", ("high", "medium"), ("busybox",)),
        ("CVE-2021-28831", ("high", "medium"), ("ssl_client",)),
    ]
    assert any("--list-all-pkgs" in u for u in scan.unknowns)


def test_cosign_before_1_3_wrote_the_type_without_scheme() -> None:
    assert is_scan_predicate_type("cosign.sigstore.dev/attestation/vuln/v1")
    scan = read_scan(
        "cosign.sigstore.dev/attestation/vuln/v1", load("610-cosign-vuln-trivy-spec-example.json"), ""
    )
    assert scan.format == "cosign-vuln"


def test_pip_audit_skipping_every_package_cannot_tell() -> None:
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(load("604-pip-audit-offline-skipped.json")), "604")
    assert scan.vulnerabilities is None
    assert [name for name, _ in scan.skipped] == ["pyyaml", "requests"]
    assert any("pip-audit skipped 2 package(s)" in u for u in scan.unknowns)


def test_pip_audit_skipping_one_package_cannot_tell_either() -> None:
    report = load("605-pip-audit-pyyaml-5.3.json")
    report["dependencies"][1] = {"name": "requests", "skip_reason": "Dependency not found on PyPI"}
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(report), "one skipped")
    assert scan.vulnerabilities is None
    assert scan.to_json()["skipped"] == [{"name": "requests", "reason": "Dependency not found on PyPI"}]


def test_pip_audit_json_keeps_the_aliases_its_cyclonedx_drops() -> None:
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(load("605-pip-audit-pyyaml-5.3.json")), "605")
    assert [v.ids for v in scan.vulnerabilities or ()] == [
        ("PYSEC-2021-142", "GHSA-8q59-q68h-6hv4", "CVE-2020-14343"),
        ("PYSEC-2020-96", "CVE-2020-1747"),
    ]


def test_a_clean_cyclonedx_scan_counts_inside_the_wrapper() -> None:
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(load("606-pip-audit-clean.cdx.json")), "606")
    assert scan.vulnerabilities == ()
    assert scan.unknowns == ()


def test_go_zero_times_are_absent_and_a_database_time_is_read() -> None:
    predicate = wrapped(
        load("605-pip-audit-pyyaml-5.3.json"),
        scanStartedOn="0001-01-01T00:00:00Z",
        scanFinishedOn="0001-01-01T00:00:00Z",
    )
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, predicate, "zero")
    assert scan.scanned_at is None and scan.freshness is None
    predicate["metadata"] = {"scanFinishedOn": "2026-12-01T16:51:05.123456789Z"}
    predicate["scanner"]["db"] = {"uri": "pkg:github/example/db", "version": "2026-10-01T00:00:00Z"}
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, predicate, "db")
    assert scan.scanned_at == datetime(2026, 12, 1, 16, 51, 5, 123456, tzinfo=UTC)
    # a scan made today against a database built two months ago is as fresh as the database
    assert scan.freshness == datetime(2026, 10, 1, tzinfo=UTC)


def test_an_unknown_scanner_result_is_refused() -> None:
    with pytest.raises(InputError, match="neither a CycloneDX document"):
        read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped({"matches": []}), "grype")


def test_an_unread_predicate_type_is_refused() -> None:
    assert not is_scan_predicate_type("https://slsa.dev/provenance/v1")
    with pytest.raises(InputError, match="reads no SBOM or scan of predicate type"):
        read_scan("https://slsa.dev/provenance/v1", {}, "slsa")


def test_a_trivy_report_that_did_not_look_for_vulnerabilities_cannot_tell() -> None:
    # attack finding F6: real `trivy fs --scanners misconfig` output (614): results, none of packages
    scan = read_scan(
        COSIGN_VULN_PREDICATE_TYPE, wrapped(load("614-trivy-dockerfile-config-only.json")), "614"
    )
    assert scan.vulnerabilities is None
    assert any("no package results (only config)" in u for u in scan.unknowns)


def test_a_clean_trivy_result_of_a_type_it_scans_is_clean() -> None:
    # real `trivy fs --scanners vuln --list-all-pkgs` output of a Cargo.lock with no finding (615)
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(load("615-trivy-cargo-list-all-pkgs.json")), "615")
    assert scan.vulnerabilities == () and scan.skipped == ()
    assert "regex" in [c.package for c in scan.components]


@pytest.mark.parametrize("package_type", ["conda-pkg", "conda-environment", "a-type-trivy-adds-later"])
def test_a_trivy_result_of_a_type_it_has_no_vulnerability_data_for_cannot_tell(package_type: str) -> None:
    # attack finding F6: Trivy writes such a result (Class and Type, no Vulnerabilities) as it writes a clean
    # one (615), so only the types its detector looks up count
    report = load("615-trivy-cargo-list-all-pkgs.json")
    report["Results"][0]["Type"] = package_type
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(report), "conda")
    assert scan.vulnerabilities is None
    assert scan.skipped == (("Cargo.lock", f"Trivy has no vulnerability data for {package_type} packages"),)
    assert any("no vulnerability data for the packages of Cargo.lock" in u for u in scan.unknowns)


def test_a_trivy_report_of_an_os_it_did_not_scan_or_no_longer_supported_cannot_tell() -> None:
    # 616: real output for alpine 3.10, end of service life (EOSL): Alpine publishes no more fixes
    report = load("616-trivy-alpine-310-eosl.json")
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(report), "616")
    assert scan.vulnerabilities is None
    assert any("end of service life (EOSL)" in u for u in scan.unknowns)
    # an OS Trivy has no data for: it names the OS and writes no OS result; a lang result beside it is clean
    report["Metadata"]["OS"].pop("EOSL")
    report["Results"] = load("615-trivy-cargo-list-all-pkgs.json")["Results"]
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(report), "unsupported os")
    assert scan.vulnerabilities is None
    assert any("did not scan the OS packages" in u for u in scan.unknowns)


def test_trivy_findings_without_packages_are_judged_but_components_are_not_told() -> None:
    # 610 (Trivy 0.19.2, no --list-all-pkgs): the findings count; there is no component list
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, load("610-cosign-vuln-trivy-spec-example.json"), "610")
    assert scan.vulnerabilities and scan.components == ()


def test_a_pip_audit_dependency_without_a_findings_list_cannot_tell() -> None:
    # attack finding F7: a dependency with neither `vulns` nor `skip_reason` was not counted clean before
    report = load("605-pip-audit-pyyaml-5.3.json")
    del report["dependencies"][1]["vulns"]
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, wrapped(report), "no vulns")
    assert scan.vulnerabilities is None
    assert scan.skipped == (("requests", "the report records no findings list for it ('vulns')"),)


def test_trivy_scores_count_in_their_own_bands() -> None:
    # attack finding F10: a finding Trivy words LOW with a CVSS v3 score of 9.8 is critical
    report = load("610-cosign-vuln-trivy-spec-example.json")
    finding = report["scanner"]["result"]["Results"][0]["Vulnerabilities"][0]
    finding["Severity"] = "LOW"
    finding["CVSS"] = {"redhat": {"V3Score": 9.8}, "nvd": {"V2Score": 7.5}}
    scan = read_scan(COSIGN_VULN_PREDICATE_TYPE, report, "610")
    assert (scan.vulnerabilities or ())[0].severities == ("critical", "high", "low")


@pytest.mark.parametrize(
    ("predicate_type", "family"),
    [
        ("https://cyclonedx.org/bom", "cyclonedx"),
        ("https://cyclonedx.org/bom/v1.5", "cyclonedx"),
        ("https://cyclonedx.org/bom/v2.0", "cyclonedx"),
        ("https://spdx.dev/Document/v2.3", "spdx"),
        ("https://spdx.dev/Document/v3.0", "spdx"),
        ("https://cosign.sigstore.dev/attestation/vuln/v1", "cosign-vuln"),
        ("cosign.sigstore.dev/attestation/vuln/v1", "cosign-vuln"),
        ("https://cosign.sigstore.dev/attestation/vuln/v0.1", "cosign-vuln"),
        ("https://cyclonedx.org/bomb", None),
        ("https://cyclonedx.org/bom/", None),
        ("https://example.com/https://cyclonedx.org/bom", None),
    ],
)
def test_predicate_type_families_are_explicit(predicate_type: str, family: str | None) -> None:
    # attack finding F5
    assert scan_family(predicate_type) == family
    assert same_predicate_type("https://cyclonedx.org/bom/v1.4", predicate_type) == (family == "cyclonedx")
