"""Issue 27 attack findings through ``trtguard check --attestations`` and a real ``trtguard serve`` over TLS:
a Trivy CycloneDX SBOM is no clean scan (F1), a document attested under another version of the predicate
type counts (F5), and an edited ``allowFrom`` file goes live in ``serve`` (F3), on real scanner output
(tests/data 609, 612) signed with real keys about image digests.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import DATA
from tests.policies.conftest import Material, pod
from tests.support.harness import SERVICE, WaitUntil, WebhookProcess, review
from trtguard.cli import main

VULN = "https://cosign.sigstore.dev/attestation/vuln/v1"
CDX = "https://cyclonedx.org/bom"
IMAGE = "nvcr.io/nvidia/tensorrt@sha256:"
RULE = "images.runtime.attestations"

POLICY = f"""
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {{name: scans}}
spec:
  match: {{namespaces: [prod]}}
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/*"]
      attestations:
        - anyOf:
            - predicateType: {VULN}
              keys: [platform/scanner]
              vulnerabilities: {{maxSeverity: high, allowFrom: exceptions.allow.yaml}}
            - predicateType: {CDX}
              keys: [platform/scanner]
              document: scan
              vulnerabilities: {{maxSeverity: high, allowFrom: exceptions.allow.yaml}}
"""
#: The entry that admits 609's CRITICAL finding (PYSEC-2021-142, by its CVE alias).
ALLOWED = "- {id: CVE-2020-14343, reason: we never load untrusted YAML}\n"


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("scan-roles")
    material = Material(root)
    yesterday = _time(datetime.now(UTC) - timedelta(days=1))
    critical = _json("609-cyclonedx-vex-pyyaml-ratings.cdx.json")
    critical["metadata"]["timestamp"] = yesterday
    # aa: real Trivy CycloneDX SBOM output, `"vulnerabilities": []`, which was a clean scan
    material.statement("aa" * 32, CDX, _json("612-trivy-conda-sbom.cdx.json"), "scanner", "aa.json")
    # bb: a scan with a CRITICAL finding, in cosign's vulnerability predicate
    wrapped = {"scanner": {"uri": "pkg:pypi/pip-audit@2.10.1", "result": critical}}
    material.statement(
        "bb" * 32, VULN, wrapped | {"metadata": {"scanFinishedOn": yesterday}}, "scanner", "bb.json"
    )
    # cc: the same finding in a CycloneDX scan attested as .../bom/v1.5, which the rule did not see
    material.statement("cc" * 32, f"{CDX}/v1.5", critical, "scanner", "cc.json")
    policies = root / "policies"
    policies.mkdir()
    material.keys_file("scanner").rename(policies / "keys.yaml")
    (policies / "scans.yaml").write_text(POLICY)
    (policies / "exceptions.allow.yaml").write_text("[]\n")
    return {"root": root, "policies": policies, "attestations": material.attestations}


def _pod(digest: str) -> dict[str, Any]:
    return pod(f"p-{digest}", "prod", images=(IMAGE + digest * 32,))


def check(world: dict[str, Any], obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    path: Path = world["root"] / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(
            [
                "check",
                *("--policies", str(world["policies"])),
                *("--attestations", str(world["attestations"])),
                *("--format", "json"),
                str(path),
            ]
        )
    [result] = json.loads(out.getvalue())
    return status, result


def rules(result: dict[str, Any]) -> set[tuple[str, bool]]:
    return {(v["rule"], v.get("indeterminate", False)) for v in result["violations"]}


def test_check_a_trivy_sbom_is_no_clean_scan(world: dict[str, Any]) -> None:
    status, result = check(world, _pod("aa"))
    assert status == 1
    assert rules(result) == {(f"{RULE}[{VULN}]", False), (f"{RULE}[{CDX}].document", True)}
    [cannot] = [v for v in result["violations"] if v.get("indeterminate")]
    assert "says it is a vulnerability scan" in cannot["message"]


def test_check_a_document_of_another_version_of_the_type_is_judged(world: dict[str, Any]) -> None:
    status, result = check(world, _pod("cc"))
    assert status == 1
    assert (f"{RULE}[{CDX}].vulnerabilities", False) in rules(result)
    assert "PYSEC-2021-142" in json.dumps(result["violations"])


@pytest.fixture(scope="module")
def server(world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    process = WebhookProcess(
        [
            *("--policies", str(world["policies"])),
            *("--attestations", str(world["attestations"])),
            *("--self-signed", "tls", "--san", SERVICE),
            *("--reload-interval", "0.2", "--reload-settle", "0.1"),
        ],
        tmp_path_factory.mktemp("scan-roles-serve"),
    )
    process.start()
    yield process
    process.stop()


async def _serve(server: WebhookProcess, obj: dict[str, Any]) -> dict[str, Any]:
    async with server.client() as client:
        answer: dict[str, Any] = (await client.post(review(obj=obj))).json()["response"]
    return answer


async def test_serve_denies_a_trivy_sbom_and_reloads_an_edited_allow_list(
    world: dict[str, Any], server: WebhookProcess, wait_until: WaitUntil
) -> None:
    sbom = await _serve(server, _pod("aa"))
    assert sbom["allowed"] is False and "says it is a vulnerability scan" in sbom["status"]["message"]
    for digest in ("bb", "cc"):
        denied = await _serve(server, _pod(digest))
        assert denied["allowed"] is False and "PYSEC-2021-142" in denied["status"]["message"]
    # the allow-list file is edited (not the policy): serve reloads it, and the finding is admitted
    (world["policies"] / "exceptions.allow.yaml").write_text(ALLOWED)

    async def admitted() -> bool | None:
        return (await _serve(server, _pod("bb")))["allowed"] or None

    assert await wait_until(admitted, within=15)
    assert (await _serve(server, _pod("cc")))["allowed"] is True
    assert (await _serve(server, _pod("aa")))["allowed"] is False  # an SBOM stays no scan
    (world["policies"] / "exceptions.allow.yaml").write_text("[]\n")
