"""Issue 25, attack finding F2: the newest scan or build manifest cannot hide evidence, through ``trtguard
check --attestations`` and a real ``trtguard serve`` over TLS.

Real scanner output (tests/data 603-609) is signed as in-toto statements about image digests with real
keys: a signed document that cannot be read is "cannot tell" (``onIndeterminate``, apart from
``onError``) and never hides an older readable one; an undated document is never the newest; one that
does not verify fails only itself and is named in the decision's notes; a build manifest dated in the
future is refused as a future scan is. Names in the admission response's message and warnings are written
with their invisible code points spelled out. Times are written at test time relative to the real clock,
which ``serve`` always uses.
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
from tests.support.harness import SERVICE, WebhookProcess, review
from trtguard.cli import main

CDX = "https://cyclonedx.org/bom"
RULE = f"images.runtime.attestations[{CDX}]"
NO_CRITICAL = f"{RULE}.conditions.no-critical"
IMAGE = "nvcr.io/nvidia/tensorrt@sha256:"
#: A tag with a line separator and a right-to-left override: an invalid reference, quoted in the denial.
HOSTILE = "nvcr.io/nvidia/tensorrt:1\u2028fake-line\u202e"

POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: NAME}
spec:
  match: {namespaces: [NAMESPACE]}
  action: ACTION
  onError: ACTION
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/*"]
      attestations:
        - predicateType: https://cyclonedx.org/bom
          keys: [platform/scanner]
          conditions:
            - name: no-critical
              cel: "!scan.vulnerabilities.exists(v, v.affected && v.severity == 'critical')"
              message: the image has an affected CRITICAL vulnerability
    - name: engines
      fields: [volume]
      match: ["registry.example.com/models/*"]
  models:
    buildManifest: {keys: [platform/build-signer]}
"""


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


#: A clean scan: 609 without the advisory's CRITICAL rating (nothing affected above medium). A CycloneDX
#: document that reports no finding is an SBOM, never a clean scan (docs/scans.md).
CLEAN = "clean"


def _document(name: str, made: datetime | None) -> dict[str, Any]:
    source = "609-cyclonedx-vex-pyyaml-ratings.cdx.json" if name == CLEAN else name
    document: dict[str, Any] = json.loads((DATA / source).read_text())
    if name == CLEAN:
        document["vulnerabilities"][0]["ratings"] = document["vulnerabilities"][0]["ratings"][:1]
    if made is None:
        document.pop("metadata", None)
    else:
        document["metadata"] = {**document.get("metadata", {}), "timestamp": _time(made)}
    return document


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("newest-evidence")
    material = Material(root)
    now = datetime.now(UTC)
    critical, clean = "609-cyclonedx-vex-pyyaml-ratings.cdx.json", CLEAN
    unreadable = _document(critical, now - timedelta(hours=1))
    unreadable["components"][0]["version"] = 5.3  # signed, but not a CycloneDX document
    documents: dict[str, list[tuple[str | dict[str, Any], datetime | None, str]]] = {
        # a readable scan with a CRITICAL finding, and a newer signed one that cannot be read
        "aa": [(critical, now - timedelta(days=1), "scanner"), (unreadable, None, "scanner")],
        # a clean scan, and one with a finding signed by a key the policy does not trust
        "bb": [(clean, now - timedelta(days=1), "scanner"), (critical, now, "rogue")],
        # a dated scan with a CRITICAL finding, and an undated clean one
        "cc": [(critical, now - timedelta(days=2), "scanner"), (clean, None, "scanner")],
        # the runtime of the engine below: clean
        "dd": [(clean, now - timedelta(days=1), "scanner")],
    }
    for digest, attached in documents.items():
        for index, (source, made, signer) in enumerate(attached):
            predicate = source if isinstance(source, dict) else _document(source, made)
            material.statement(digest * 32, CDX, predicate, signer, f"{digest}-{index}.json")
    engine = material.engine("model", build_timestamp=_time(now + timedelta(days=30)))
    policies = root / "policies"
    policies.mkdir()
    material.keys_file("scanner", "build-signer", "rogue").rename(policies / "keys.yaml")
    for name, namespace, action in (("scans", "prod", "Deny"), ("warned", "staging", "Warn")):
        text = POLICY.replace("NAMESPACE", namespace).replace("NAME", name).replace("ACTION", action)
        (policies / f"{name}.yaml").write_text(text)
    return {"root": root, "policies": policies, "attestations": material.attestations, "engine": engine}


def _pod(digest: str, *, engine: str | None = None, namespace: str = "prod") -> dict[str, Any]:
    image = HOSTILE if digest == "hostile" else IMAGE + digest * 32
    return pod(f"p-{digest}", namespace, images=(image,), engine=engine)


def check(world: dict[str, Any], obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    path: Path = world["root"] / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(
            [
                "check",
                "--policies",
                str(world["policies"]),
                "--attestations",
                str(world["attestations"]),
                "--format",
                "json",
                str(path),
            ]
        )
    [result] = json.loads(out.getvalue())
    return status, result


def rules(result: dict[str, Any]) -> set[tuple[str, bool]]:
    """Each violation's rule, and whether it says "cannot tell"."""
    return {(v["rule"], v.get("indeterminate", False)) for v in result["violations"]}


def test_check_an_unreadable_newest_scan_cannot_tell_and_hides_nothing(world: dict[str, Any]) -> None:
    status, result = check(world, _pod("aa"))
    assert status == 1
    assert rules(result) == {(RULE, True), (NO_CRITICAL, False)}
    [cannot] = [v for v in result["violations"] if v.get("indeterminate")]
    assert "cannot be read" in cannot["message"] and "aa-1.json" in cannot["message"]


def test_check_an_unverifiable_scan_fails_only_itself_and_is_named(world: dict[str, Any]) -> None:
    status, result = check(world, _pod("bb"))
    assert status == 0, result
    assert any("bb-1.json" in note and "did not count" in note for note in result["notes"])


def test_check_an_undated_scan_never_hides_a_dated_one(world: dict[str, Any]) -> None:
    status, result = check(world, _pod("cc"))
    assert status == 1 and rules(result) == {(NO_CRITICAL, False)}


def test_check_refuses_a_build_manifest_dated_in_the_future(world: dict[str, Any]) -> None:
    status, result = check(world, _pod("dd", engine=world["engine"]))
    assert status == 1 and rules(result) == {("models.buildManifest", False)}
    assert "in the future" in result["violations"][0]["message"]


@pytest.fixture(scope="module")
def server(world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    process = WebhookProcess(
        [
            "--policies",
            str(world["policies"]),
            "--attestations",
            str(world["attestations"]),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            "sqlite:///decisions.db",
        ],
        tmp_path_factory.mktemp("newest-evidence-serve"),
    )
    process.start()
    yield process
    process.stop()


async def _serve(server: WebhookProcess, obj: dict[str, Any]) -> dict[str, Any]:
    async with server.client() as client:
        answer: dict[str, Any] = (await client.post(review(obj=obj))).json()["response"]
    return answer


async def test_serve_judges_what_the_newest_document_would_hide(
    world: dict[str, Any], server: WebhookProcess
) -> None:
    unreadable = await _serve(server, _pod("aa"))
    assert unreadable["allowed"] is False
    message = unreadable["status"]["message"]
    assert f"scans/{RULE}" in message and "cannot be read" in message and f"scans/{NO_CRITICAL}" in message
    assert (await _serve(server, _pod("bb")))["allowed"] is True
    undated = await _serve(server, _pod("cc"))
    assert undated["allowed"] is False and f"scans/{NO_CRITICAL}" in undated["status"]["message"]
    future = await _serve(server, _pod("dd", engine=world["engine"]))
    assert future["allowed"] is False
    assert "scans/models.buildManifest" in future["status"]["message"]
    assert "in the future" in future["status"]["message"]


async def test_serve_writes_invisible_code_points_out_in_messages_and_warnings(
    server: WebhookProcess,
) -> None:
    denied = await _serve(server, _pod("hostile"))
    assert denied["allowed"] is False
    message = denied["status"]["message"]
    assert "1<U+2028>fake-line<U+202E>" in message
    assert "\u2028" not in message and "\u202e" not in message
    warned = await _serve(server, _pod("hostile", namespace="staging"))
    assert warned["allowed"] is True
    [warning] = warned["warnings"]
    assert "<U+2028>" in warning and "\u2028" not in warning and "\u202e" not in warning
