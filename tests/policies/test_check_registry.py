"""``trtguard check --registry`` against a real registry (Debian's docker-registry on 127.0.0.1).

The whole chain runs through the command line: ``sign`` signs an image, ``push-engine`` stores an engine,
``attest`` + ``attach-attestation`` attach its signed build manifest, and ``check`` judges Pods that name
them — tags resolved to digests, signatures and manifests verified from what the registry returns.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.policies.conftest import manifest_data
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from trtguard.cli import main
from verifier.base._references import ImageReference
from verifier.crypto._keys import encrypt_private_key, generate_private_key
from verifier.registry.client import RegistryClient

pytestmark = pytest.mark.registry

PASSWORD = "check registry test"
POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: registry-policy}
spec:
  match: {namespaces: [prod]}
  images:
    - name: runtime
      match: ["*/team/*"]
      signatures: {keys: [platform/image-signer]}
    - name: engines
      match: ["REGISTRY/models/*"]
      requireDigest: true
  models:
    required: true
    buildManifest: {keys: [platform/build-signer]}
    rules: {precisions: [fp32, fp16]}
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("check-registry"), http={}, auth=None)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def world(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A signed image, an unsigned one, an engine with a signed manifest, keys and policies."""
    root = tmp_path_factory.mktemp("world")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("TRTGUARD_PASSWORD", PASSWORD)
    config = root / "registries.yaml"
    config.write_text(f'registries:\n  "{registry.host}":\n    plain_http: true\n')
    keys = {name: generate_private_key() for name in ("image-signer", "build-signer")}
    for name, key in keys.items():
        (root / f"{name}.key").write_bytes(encrypt_private_key(key, PASSWORD.encode()))
        (root / f"{name}.pub").write_bytes(key.public_key().to_pem())
    (root / "keys.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n  keys:\n"
        "    - {name: image-signer, file: image-signer.pub}\n"
        "    - {name: build-signer, file: build-signer.pub}\n"
    )
    (root / "policy.yaml").write_text(POLICY.replace("REGISTRY", registry.host))

    async def push() -> None:
        async with RegistryClient(plain_config(registry.host)) as client:
            await push_image(
                client, ImageReference.parse(f"{registry.host}/team/server:1.0"), tiny_image("a")
            )
            await push_image(client, ImageReference.parse(f"{registry.host}/team/rogue:1.0"), tiny_image("b"))

    asyncio.run(push())
    assert (
        main(
            [
                "sign",
                f"{registry.host}/team/server:1.0",
                "--key",
                str(root / "image-signer.key"),
                "--registry-config",
                str(config),
            ]
        )
        == 0
    )

    engine = root / "model.plan"
    engine.write_bytes(b"a TensorRT engine, for the test" * 100)
    predicate = root / "manifest.json"
    predicate.write_text(json.dumps(manifest_data(engine.read_bytes())))
    envelope = root / "manifest.dsse.json"
    assert (
        main(
            [
                "attest",
                "--predicate",
                str(predicate),
                "--type",
                "https://trtguard.dev/attestations/engine-build/v1",
                "--subject",
                str(engine),
                "--key",
                str(root / "build-signer.key"),
                "--output",
                str(envelope),
            ]
        )
        == 0
    )
    return {
        "root": root,
        "config": config,
        "engine": engine,
        "envelope": envelope,
        "monkeypatch": monkeypatch,
    }


def push_engine(world: dict[str, Any], registry: LocalRegistry, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert (
        main(
            [
                "push-engine",
                str(world["engine"]),
                "--to",
                f"{registry.host}/models/resnet:v1",
                "--registry-config",
                str(world["config"]),
            ]
        )
        == 0
    )
    reference = capsys.readouterr().out.strip()
    assert (
        main(
            [
                "attach-attestation",
                str(world["envelope"]),
                "--to",
                reference,
                "--registry-config",
                str(world["config"]),
            ]
        )
        == 0
    )
    return reference


def check(
    world: dict[str, Any], pod: dict[str, Any], capsys: pytest.CaptureFixture[str], config: Path | None = None
) -> tuple[int, dict[str, Any]]:
    root: Path = world["root"]
    (root / "pod.yaml").write_text(yaml.safe_dump(pod))
    capsys.readouterr()
    status = main(
        [
            "check",
            "--policies",
            str(root / "policy.yaml"),
            "--policies",
            str(root / "keys.yaml"),
            "--registry-config",
            str(config or world["config"]),
            "--format",
            "json",
            str(root / "pod.yaml"),
        ]
    )
    [result] = json.loads(capsys.readouterr().out)
    return status, result


def pod(image: str, engine: str | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "server", "image": image}
    spec: dict[str, Any] = {"containers": [container]}
    if engine:
        container["volumeMounts"] = [{"name": "engine", "mountPath": "/models"}]
        spec["volumes"] = [{"name": "engine", "image": {"reference": engine}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "prod"}, "spec": spec}


def test_signed_image_and_attested_engine_are_admitted_by_digest(
    world: dict[str, Any], registry: LocalRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = push_engine(world, registry, capsys)
    status, result = check(world, pod(f"{registry.host}/team/server:1.0", engine), capsys)
    assert status == 0, result
    # The tag was resolved and the decision records the digest that was judged.
    image, volume = result["images"]
    assert image["reference"] == f"{registry.host}/team/server:1.0"
    assert image["digest"].startswith("sha256:")
    assert volume["reference"] == engine


def test_unsigned_image_and_missing_engine_are_denied(
    world: dict[str, Any], registry: LocalRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    status, result = check(world, pod(f"{registry.host}/team/rogue:1.0", None), capsys)
    assert status == 1
    assert {v["rule"] for v in result["violations"]} == {"images.runtime.signatures", "models.required"}
    signature = next(v for v in result["violations"] if v["rule"] == "images.runtime.signatures")
    assert "no signature found" in signature["message"]


def test_registry_down_is_a_violation_never_an_allow(
    world: dict[str, Any], registry: LocalRegistry, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dead = "127.0.0.1:9"  # the discard port: nothing listens there
    config = tmp_path / "dead.yaml"
    config.write_text(f'registries:\n  "{dead}":\n    plain_http: true\n    retry: {{attempts: 1}}\n')
    status, result = check(world, pod(f"{dead}/team/server:1.0", None), capsys, config)
    assert status == 1
    errors = [v for v in result["violations"] if v["error"]]
    assert errors and all("could not be checked" in v["message"] for v in errors)
