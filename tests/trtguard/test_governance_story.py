"""The governance story of issue 12, end to end: ``trtguard serve`` over TLS against a real registry, then the
decision log alone answers who asked, what changed and who approved, and the evidence package verifies
offline.

1. prod/resnet is created with an FP16 engine: admitted (no earlier engine, no gated change).
2. It is updated to the first INT8 engine: denied, FirstInt8 needs two approvals; the denial's hint is an
   ``approve`` command.
3. Alice and Bob run that command as printed (their e-mail and key put in): two approvals pushed.
4. The next request is admitted (approvals are looked up again, not taken from the cache).
5. ``audit history prod/resnet`` alone names both approvers, the change kinds and the requester.
6. ``evidence export`` then ``evidence verify`` offline: verified, with the approvals and the runtime
   image's signature inside.

Every record written meets the JSON Schema of ``trtguard schema decision``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from decisionlog._record_schema import decision_json_schema
from policies.schema import trusted_keys_yaml
from tests.policies.conftest import manifest_data
from tests.support.harness import SERVICE, WebhookProcess, review, verify_admission_response
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from trtguard.cli import main
from verifier.base._digests import sha256_bytes
from verifier.base._references import ImageReference
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.crypto._keys import PrivateKey, encrypt_private_key, generate_private_key
from verifier.manifest import EngineBuildManifest, manifest_statement
from verifier.registry.client import RegistryClient

pytestmark = pytest.mark.registry

PASSWORD = "story password"
POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: resnet-governance}
spec:
  match: {namespaces: [prod]}
  images:
    - name: runtime
      match: ["HOST/inference/*"]
      signatures: {keys: [platform/image-signer]}
    - name: engines
      match: ["HOST/models/*"]
      requireDigest: true
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8]
    approvals: {keys: [committee/alice, committee/bob], threshold: 2}
"""
FP16 = b"the FP16 resnet engine " * 64
INT8 = b"the first INT8 resnet engine " * 64
CALIBRATION = {"dataset": {"sha256": "f6" * 32}, "cache": {"sha256": "07" * 32}}
APPROVERS = {"alice": "alice@example.com", "bob": "bob@example.com"}


def cli(*argv: object) -> tuple[int, str, str]:
    """``trtguard ARGV`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("story-registry"), http={}, auth=None)
    yield running
    running.stop()


def _key_file(folder: Path, name: str, key: PrivateKey) -> Path:
    path = folder / f"{name}.key"
    path.write_bytes(encrypt_private_key(key, PASSWORD.encode()))
    return path


def _deployment(runtime: str, engine: str) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "resnet"}},
        "spec": {
            "containers": [
                {"name": "server", "image": runtime, "volumeMounts": [{"name": "engine", "mountPath": "/m"}]}
            ],
            "volumes": [{"name": "engine", "image": {"reference": engine}}],
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "resnet", "namespace": "prod"},
        "spec": {"selector": {"matchLabels": {"app": "resnet"}}, "template": template},
    }


def _review(obj: dict[str, Any], *, operation: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    body = review(obj=obj, operation=operation, old=old)
    body["request"]["userInfo"] = {"username": "ci-deployer@example.com", "groups": ["ml-platform"]}
    return body


def test_the_first_int8_engine_story_is_answered_by_the_decision_log(
    registry: LocalRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = registry.host
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    keys = {name: generate_private_key() for name in ("image-signer", "build-signer", "alice", "bob")}
    exporter = generate_private_key()
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policy.yaml").write_text(POLICY.replace("HOST", host))
    (policies / "platform.yaml").write_text(
        trusted_keys_yaml("platform", {n: keys[n].public_key() for n in ("image-signer", "build-signer")})
    )
    (policies / "committee.yaml").write_text(
        trusted_keys_yaml("committee", {n: keys[n].public_key() for n in APPROVERS})
    )
    key_files = {name: _key_file(tmp_path, name, key) for name, key in {**keys, "exporter": exporter}.items()}
    (tmp_path / "exporter.pub").write_bytes(exporter.public_key().to_pem())
    monkeypatch.setenv("TRTGUARD_PASSWORD", PASSWORD)
    monkeypatch.setenv("TRTGUARD_REGISTRY_CONFIG", str(config))

    # The release side: a signed runtime image and two engines with signed build manifests.
    async def push_runtime() -> str:
        async with RegistryClient(plain_config(host)) as client:
            ref = ImageReference.parse(f"{host}/inference/tensorrt:25.01")
            return f"{ref.name}@{await push_image(client, ref, tiny_image('the runtime'))}"

    runtime = asyncio.run(push_runtime())
    assert cli("sign", runtime, "--key", key_files["image-signer"])[0] == 0
    engines: dict[str, str] = {}
    for name, data, overrides in (
        ("fp16", FP16, {"audit_id": "RESNET-FP16"}),
        (
            "int8",
            INT8,
            {
                "audit_id": "RESNET-INT8",
                "builder_config": {"typing": "weak", "precision_flags": ["fp16", "int8"]},
                "calibration": CALIBRATION,
            },
        ),
    ):
        plan = tmp_path / f"{name}.plan"
        plan.write_bytes(data)
        status, out, err = cli("push-engine", plan, "--to", f"{host}/models/resnet:{name}")
        assert status == 0, err
        engines[name] = out.strip()
        manifest = EngineBuildManifest.model_validate(manifest_data(data, **overrides))
        envelope = tmp_path / f"{name}.dsse.json"
        envelope.write_bytes(
            sign_envelope(
                PAYLOAD_TYPE, manifest_statement(manifest).to_json(), keys["build-signer"]
            ).to_json()
        )
        assert cli("attach-attestation", envelope, "--to", engines[name])[0] == 0

    server = WebhookProcess(
        [
            "--policies",
            str(policies),
            "--registry",
            "--registry-config",
            str(config),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            "sqlite:///decisions.db",
        ],
        tmp_path / "webhook",
    )
    (tmp_path / "webhook").mkdir()
    server.start()
    try:
        first, second = _deployment(runtime, engines["fp16"]), _deployment(runtime, engines["int8"])

        async def ask(body: dict[str, Any]) -> dict[str, Any]:
            async with server.client() as client:
                return verify_admission_response(body["request"]["uid"], await client.post(body))

        # 1. The FP16 engine: admitted.
        assert asyncio.run(ask(_review(first, operation="CREATE")))["allowed"]
        # 2. The first INT8 engine: denied, two approvals missing; the fix is a command to run.
        update = _review(second, operation="UPDATE", old=first)
        denied = asyncio.run(ask(update))
        assert not denied["allowed"]
        message = denied["status"]["message"]
        assert "gated changes [FirstInt8]" in message and "FirstInt8 needs 2 more" in message
        [command] = re.findall(r"run `(trtguard approve [^`]+)`", message)
        # 3. Each approver runs it as printed, with who they are and their key.
        for name, email in APPROVERS.items():
            mine = command.replace("<your e-mail>", email).replace("<your key file>", str(key_files[name]))
            status, _, err = cli(*shlex.split(mine)[1:])
            assert status == 0, err
        # 4. The next request: admitted.
        assert asyncio.run(ask(_review(second, operation="UPDATE", old=first)))["allowed"]
    finally:
        server.stop()

    log = f"sqlite:///{tmp_path / 'webhook' / 'decisions.db'}"
    # Every record meets the published schema, and is of the documented size.
    status, out, err = cli("audit", "query", "--decision-log", log, "--format", "json")
    assert status == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["record"]["allowed"] for line in lines] == [True, False, True]
    assert all(line["verified"] for line in lines)
    validator = jsonschema.Draft202012Validator(decision_json_schema())
    for line in lines:
        validator.validate(line["record"])

    # 5. The log alone: who asked, what changed, who approved.
    status, out, err = cli("audit", "history", "prod/resnet", "--decision-log", log, "--format", "json")
    assert status == 0, err
    history = json.loads(out)
    assert history["chain"]["ok"] is True
    created, updated = history["entries"]
    assert [c["artifact"] for c in created["changes"]] == ["engine", "image"]
    [engine] = [c for c in updated["changes"] if c["artifact"] == "engine"]
    assert engine["old"] == engines["fp16"] and engine["new"] == engines["int8"]
    assert "FirstInt8" in engine["change_kinds"] and engine["gated"] == ["FirstInt8"]
    assert engine["audit_ids"] == ["RESNET-INT8"]
    assert sorted(engine["approvers"]) == sorted(APPROVERS.values())
    [control] = engine["recorded"]["change_control"]
    [baseline] = control["baselines"]
    assert baseline["kind"] == "last-admitted-engine" and baseline["engine"] == engines["fp16"]
    assert baseline["admitted_by"]["seq"] == created["seq"] == 1
    approval_keys = {s["key"] for a in control["approvals"] for s in a["signers"]}
    assert approval_keys == {"committee/alice", "committee/bob"}
    assert (updated["user"], updated["groups"]) == ("ci-deployer@example.com", ["ml-platform"])
    status, text, _ = cli("audit", "history", "prod/resnet", "--decision-log", log)
    assert status == 0
    for expected in (
        "alice@example.com (committee/alice) for FirstInt8",
        "bob@example.com (committee/bob) for FirstInt8",
        "FirstInt8 (gated)",
        f"compared with (resnet-governance): last admitted engine {engines['fp16']} (admitted by #1)",
        "by ci-deployer@example.com (groups: ml-platform)",
        "audit ID RESNET-INT8",
    ):
        assert expected in text, expected

    # 6. The evidence package: exported from the log and the registry, verified offline.
    package = tmp_path / "resnet.tar.gz"
    status, out, err = cli(
        "evidence",
        "export",
        "--workload",
        "prod/resnet",
        "--decision-log",
        log,
        "--policies",
        policies,
        "--registry-config",
        config,
        "--key",
        key_files["exporter"],
        "-o",
        package,
    )
    assert status == 0, err
    assert "images: 1 (1 signatures)" in out
    status, out, err = cli(
        "evidence", "verify", package, "--key", tmp_path / "exporter.pub", "--format", "json"
    )
    assert status == 0, out
    report = json.loads(out)
    passed = "\n".join(f["message"] for f in report["findings"] if f["status"] == "pass")
    assert passed.count("change-approval (by ") == 2
    assert "signature images/" in passed and "keys [platform/image-signer]" in passed
    assert sha256_bytes(package.read_bytes()) == report["archive_sha256"]
