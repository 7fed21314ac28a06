"""What a scan's own content says beyond its findings (issue 27, third attack): the image it is about
(Trivy's ``RepoDigests``, CycloneDX ``metadata.component``), the components nested in ``metadata.component``,
vendor advisories that are no aliases, CVSS vectors without a score in Trivy reports, and scanner flags
that leave findings out."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.conftest import DATA
from verifier.scans import COSIGN_VULN_PREDICATE_TYPE, read_scan

TRIVY = "610-cosign-vuln-trivy-spec-example.json"
ALPINE = "sha256:d9459083f962de6bd980ae6a05be2a4cf670df6a1d898157bceb420342bec280"
OTHER = "sha256:" + "ab" * 32
CDX = "https://cyclonedx.org/bom"
NINE_EIGHT = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"


def trivy_predicate() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / TRIVY).read_text())
    return loaded


def read_trivy(predicate: dict[str, Any]) -> Any:
    return read_scan(COSIGN_VULN_PREDICATE_TYPE, predicate, "scan.json")


def test_a_trivy_report_says_which_image_it_is_about() -> None:
    # RepoDigests (repo@sha256:...) and a pinned ArtifactName name manifests; ImageID is the config digest
    predicate = trivy_predicate()
    assert read_trivy(predicate).about == (ALPINE,)
    result = predicate["scanner"]["result"]
    result["ArtifactName"] = f"registry.example.com/app@{OTHER}"
    del result["Metadata"]["RepoDigests"]
    assert read_trivy(predicate).about == (OTHER,)
    result["ArtifactName"] = "alpine:3.12"
    assert read_trivy(predicate).about == ()


def cyclonedx(component: dict[str, Any] | None, components: list[dict[str, Any]]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"timestamp": "2026-12-01T00:00:00Z"}
    if component is not None:
        metadata["component"] = component
    return {"bomFormat": "CycloneDX", "specVersion": "1.5", "metadata": metadata, "components": components}


def test_a_cyclonedx_document_says_which_image_it_is_about() -> None:
    image = {
        "bom-ref": "img",
        "type": "container",
        "name": "app",
        "purl": f"pkg:oci/app@{OTHER.replace(':', '%3A')}?arch=amd64",
        "properties": [{"name": "aquasecurity:trivy:RepoDigest", "value": f"app@{ALPINE}"}],
    }
    document = read_scan(CDX, cyclonedx(image, [{"name": "pyyaml", "version": "6.0"}]), "sbom.json")
    assert set(document.about) == {ALPINE, OTHER}
    assert read_scan(CDX, cyclonedx(None, [{"name": "pyyaml"}]), "sbom.json").about == ()


def test_components_nested_in_metadata_component_are_the_documents() -> None:
    # the described application's own inventory counts as the document's: a ban must see log4j there
    nested = {
        "bom-ref": "app",
        "type": "application",
        "name": "app",
        "components": [{"name": "log4j-core", "group": "org.apache.logging.log4j", "version": "2.14.1"}],
    }
    document = read_scan(CDX, cyclonedx(nested, []), "sbom.json")
    assert [c.package for c in document.components] == ["org.apache.logging.log4j:log4j-core"]
    # the described component itself is not an entry of the inventory: an empty BOM stays empty
    empty = read_scan(CDX, cyclonedx({"bom-ref": "app", "type": "application", "name": "app"}, []), "x")
    assert empty.components == ()
    assert any("lists no component" in u for u in empty.unknowns)


def test_vendor_advisories_are_no_aliases() -> None:
    # one DSA or ALPINE advisory covers many CVEs: an allow-list entry naming it must not admit them all
    predicate = trivy_predicate()
    finding = predicate["scanner"]["result"]["Results"][0]["Vulnerabilities"][0]
    finding["VendorIDs"] = ["ALPINE-13661"]
    vulnerability = read_trivy(predicate).vulnerabilities[0]
    assert "ALPINE-13661" not in vulnerability.ids
    assert vulnerability.advisories == ("ALPINE-13661",)
    assert vulnerability.to_json()["advisories"] == ["ALPINE-13661"]


@pytest.mark.parametrize(
    ("cvss", "severities"),
    [
        # NVD's 9.8 vector and no V3Score, beside a vendor's "LOW": critical (the CycloneDX rule)
        ({"nvd": {"V3Vector": NINE_EIGHT}}, ("critical", "low")),
        # a v2 or v4 vector without a score cannot be scored here: the highest severity cannot be told
        ({"nvd": {"V2Vector": "AV:N/AC:L/Au:N/C:C/I:C/A:C"}}, ()),
        ({"nvd": {"V40Vector": "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"}}, ()),
        # a score and a vector: the score counts
        ({"nvd": {"V3Vector": NINE_EIGHT, "V3Score": 5.0}}, ("medium", "low")),
    ],
)
def test_trivy_cvss_vectors_without_a_score(cvss: dict[str, Any], severities: tuple[str, ...]) -> None:
    predicate = trivy_predicate()
    finding = predicate["scanner"]["result"]["Results"][0]["Vulnerabilities"][0]
    finding.update(Severity="LOW", SeveritySource="alpine", VendorSeverity={"alpine": 1}, CVSS=cvss)
    document = read_trivy(predicate)
    assert document.vulnerabilities[0].severities == severities
    if not severities:
        assert any("cannot be told" in u for u in document.unknowns)


@pytest.mark.parametrize(
    ("parameters", "named"),
    [
        (["--ignore-unfixed"], "--ignore-unfixed"),
        (["--severity=HIGH,CRITICAL"], "--severity HIGH,CRITICAL"),
        (["--severity", "CRITICAL"], "--severity CRITICAL"),
        (["-s", "LOW"], "-s LOW"),
        (["--skip-dirs=/opt", "--format=json"], "--skip-dirs"),
        (["--ignorefile", ".trivyignore"], "--ignorefile"),
        (["--vex", "vex.json"], "--vex"),
        # Trivy's default --severity names UNKNOWN too: leaving it out drops unrated findings
        (["--severity=LOW,MEDIUM,HIGH,CRITICAL"], "--severity LOW,MEDIUM,HIGH,CRITICAL"),
        (["-sCRITICAL"], "-s CRITICAL"),
        (["--format json --ignore-unfixed"], "--ignore-unfixed"),  # several words in one entry
        ("--format json --ignore-unfixed", "--ignore-unfixed"),  # one string
        (["--config", "trivy.yaml"], "--config"),  # a file may set any filter
        (["--pkg-relationships", "root"], "--pkg-relationships"),
        ({"flags": "--ignore-unfixed"}, "not a list of flags"),
    ],
)
def test_flags_that_leave_findings_out_cannot_tell(parameters: object, named: str) -> None:
    predicate = trivy_predicate()
    predicate["invocation"]["parameters"] = parameters
    document = read_trivy(predicate)
    assert document.vulnerabilities is None
    assert any(named in u and "leave findings out" in u for u in document.unknowns)


@pytest.mark.parametrize(
    "parameters",
    [
        ["--format=json"],
        ["--severity=UNKNOWN,LOW,MEDIUM,HIGH,CRITICAL"],
        ["--ignore-unfixed=false"],
        None,  # what Trivy's own --format cosign-vuln writes: it records no flags
        [],
    ],
)
def test_flags_that_filter_nothing_keep_the_findings(parameters: object) -> None:
    predicate = trivy_predicate()
    predicate["invocation"]["parameters"] = parameters
    unfiltered = copy.deepcopy(trivy_predicate())
    assert read_trivy(predicate).vulnerabilities == read_trivy(unfiltered).vulnerabilities is not None


@pytest.mark.parametrize(
    ("scanner", "parameters", "filtered"),
    [
        # pip-audit's -s is its vulnerability service, not a severity filter
        ("pkg:pypi/pip-audit@2.10.1", ["-s", "osv"], False),
        ("pkg:pypi/pip-audit@2.10.1", ["--ignore-vuln", "PYSEC-2021-142"], True),
        ("pkg:github/anchore/grype@0.80.0", ["--only-fixed"], True),
        ("pkg:github/anchore/grype@0.80.0", ["--ignore-states", "wont-fix"], True),
    ],
)
def test_flags_are_read_as_their_scanner_means_them(
    scanner: str, parameters: list[str], filtered: bool
) -> None:
    predicate = trivy_predicate()
    predicate["scanner"]["uri"] = scanner
    predicate["invocation"]["parameters"] = parameters
    assert (read_trivy(predicate).vulnerabilities is None) is filtered


@pytest.mark.parametrize(
    "written",
    [
        f"registry.example.com/other@{OTHER.upper().replace('SHA256', 'sha256')}",  # upper-case hex
        f"registry.example.com/other@{OTHER.replace('sha256', 'SHA256')}",
        f"pkg:OCI/other@{OTHER.replace(':', '%3A')}",
        f"pkg:docker/other@{OTHER.replace(':', '%3A')}",
    ],
)
def test_another_image_is_recognised_however_it_is_written(written: str) -> None:
    predicate = trivy_predicate()
    predicate["scanner"]["result"]["Metadata"]["RepoDigests"] = [written]
    assert read_trivy(predicate).about == (OTHER,)


def test_a_digest_that_does_not_parse_names_no_subject() -> None:
    # sha512, or text after the digest: kept as written, so that it matches no subject (refused)
    predicate = trivy_predicate()
    predicate["scanner"]["result"]["Metadata"]["RepoDigests"] = ["other@sha512:" + "ab" * 64]
    assert read_trivy(predicate).about[-1] == "other@sha512:" + "ab" * 64


def test_syft_and_spdx_name_the_image_they_describe() -> None:
    bom_ref_only = {"bom-ref": f"pkg:oci/app@{OTHER.replace(':', '%3A')}", "type": "container", "name": "app"}
    assert read_scan(CDX, cyclonedx(bom_ref_only, [{"name": "pyyaml"}]), "x").about == (OTHER,)
    syft = {"bom-ref": "1", "type": "container", "name": "app", "version": OTHER}
    assert read_scan(CDX, cyclonedx(syft, [{"name": "pyyaml"}]), "x").about == (OTHER,)
    spdx = {
        "spdxVersion": "SPDX-2.3",
        "creationInfo": {"created": "2026-12-01T00:00:00Z"},
        "packages": [
            {
                "name": "app",
                "externalRefs": [
                    {
                        "referenceCategory": "PACKAGE-MANAGER",
                        "referenceType": "purl",
                        "referenceLocator": f"pkg:oci/app@{OTHER.replace(':', '%3A')}",
                    }
                ],
            },
            {"name": "pyyaml", "versionInfo": "6.0"},
        ],
    }
    assert read_scan("https://spdx.dev/Document", spdx, "x").about == (OTHER,)
