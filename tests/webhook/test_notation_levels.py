"""Notation verification levels are visible (issue 25): a check that ``permissive`` or ``audit`` only logs
(here the signature's own expiry, ``io.cncf.notary.expiry`` in the past) admits the image, and says so in
every output of ``trtguard check`` (table, JSON, JUnit, SARIF), in the AdmissionReview response's warnings
of a real ``trtguard serve`` over TLS, and in its decision record (the signature's ``logged`` entries, the
record's warnings), which the record schema accepts. ``strict`` refuses the same signature.

Signatures are made here with trtguard's Notation signer (an expiry the CLI does not offer) and pushed as
referrers to a real registry (Debian's docker-registry).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from decisionlog._record_schema import decision_json_schema
from tests.policies.registry_world import pod, run_cli
from tests.support.harness import SERVICE, WebhookProcess, review, verify_admission_response
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from tests.support.notary_pki import NOW, Pki, make_pki
from trtguard.release.cosign_layout import push_referrer
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._references import ImageReference
from verifier.registry.client import RegistryClient
from verifier.signatures.notation import ARTIFACT_TYPE, JWS_MEDIA_TYPE, sign_notation

pytestmark = pytest.mark.registry

LEVELS = ("strict", "permissive", "audit")
KEY = """\
    - name: notary-{level}
      notation:
        trustStores: {{ca: [ca.crt]}}
        trustedIdentities: ["x509.subject: C=US, ST=WA, O=Example, OU=Builds, CN=Release Signer"]
        registryScopes: ["*"]
        verificationLevel: {level}
"""
RULE = """\
    - name: {level}
      match: ["{host}/{level}/*"]
      signatures: {{keys: [platform/notary-{level}]}}
"""


@dataclass
class World:
    root: Path
    config: Path
    policies: Path
    images: dict[str, str]  # level -> the image signed with an expired signature


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("levels")
    (root / "registry").mkdir()
    registry: LocalRegistry = start_registry(root / "registry", http={}, auth=None)
    host = registry.host
    config = root / "registries.yaml"
    config.write_text(f'registries:\n  "{host}":\n    plain_http: true\n')
    pki = make_pki()
    policies = root / "policies"
    policies.mkdir()
    (policies / "ca.crt").write_bytes(pki.root.pem())
    keys = (
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n  keys:\n"
    )
    (policies / "keys.yaml").write_text(keys + "".join(KEY.format(level=level) for level in LEVELS))
    rules = "".join(RULE.format(level=level, host=host) for level in LEVELS)
    (policies / "policy.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: levels}\nspec:\n"
        "  match: {namespaces: [prod]}\n  images:\n" + rules
    )
    images = {level: f"{host}/{level}/app:v1" for level in LEVELS}
    for image in images.values():
        asyncio.run(_push_signed(host, image, pki, expiry=NOW - timedelta(hours=1)))
    try:
        yield World(root, config, policies, images)
    finally:
        registry.stop()


async def _push_signed(host: str, image: str, pki: Pki, *, expiry: Any) -> None:
    """Push ``image`` and a Notation signature of it whose own expiry is ``expiry``."""
    async with RegistryClient(plain_config(host)) as client:
        reference = ImageReference.parse(image)
        await push_image(client, reference, tiny_image(image))
        pinned = reference.with_digest(await client.resolve(reference, Deadline.after(30)))
        target = (await client.get_manifest(pinned, Deadline.after(30))).descriptor
        descriptor = {"mediaType": target.media_type, "digest": target.digest, "size": target.size}
        envelope = sign_notation(
            descriptor, pki.leaf.signing_key, pki.chain, signing_time=NOW - timedelta(hours=2), expiry=expiry
        )
        await push_referrer(
            RegistryWriter(client),
            pinned,
            target,
            artifact_type=ARTIFACT_TYPE,
            blob=envelope,
            blob_media_type=JWS_MEDIA_TYPE,
            deadline=Deadline.after(30),
        )


def _check(world: World, level: str, fmt: str) -> tuple[int, str]:
    folder = world.root / f"check-{level}"
    folder.mkdir(exist_ok=True)
    (folder / "pod.yaml").write_text(yaml.safe_dump(pod(world.images[level], None)))
    status, out, err = run_cli(
        "check",
        "--policies",
        world.policies,
        "--registry-config",
        world.config,
        "--format",
        fmt,
        folder / "pod.yaml",
    )
    assert status in (0, 1), err
    return status, out


def test_strict_refuses_the_expired_signature(world: World) -> None:
    status, out = _check(world, "strict", "json")
    [result] = json.loads(out)
    assert status == 1
    assert "the signature expired at" in result["violations"][0]["message"]
    assert "enforced at level strict" in result["violations"][0]["message"]


@pytest.mark.parametrize("level", ["permissive", "audit"])
def test_what_the_level_only_logs_shows_in_every_output_of_check(world: World, level: str) -> None:
    status, out = _check(world, level, "json")
    [result] = json.loads(out)
    assert status == 0
    assert result["allowed"] is True
    [warning] = result["warnings"]
    assert warning.startswith(f"levels/images.{level}.signatures: {world.images[level].split(':v1')[0]}")
    assert f"which verification level {level} only logs: the signature expired at" in warning
    [signature] = result["images"][0]["signatures"]
    assert signature["format"] == "notation"
    [logged] = signature["logged"]
    assert (logged["signer"], logged["check"], logged["level"]) == (
        f"platform/notary-{level}",
        "expiry",
        level,
    )
    assert logged["message"].startswith("the signature expired at")

    status, table = _check(world, level, "table")
    assert status == 0
    assert table.startswith("ALLOW ")
    assert f"  ! levels/images.{level}.signatures" in table
    assert f"which verification level {level} only logs" in table
    _, junit = _check(world, level, "junit")
    assert "<system-out>" in junit and f"verification level {level} only logs" in junit
    _, sarif = _check(world, level, "sarif")
    [finding] = json.loads(sarif)["runs"][0]["results"]
    assert finding["level"] == "warning"
    assert f"verification level {level} only logs" in finding["message"]["text"]


@pytest.fixture(scope="module")
def server(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    process = WebhookProcess(
        [
            "--policies",
            str(world.policies),
            "--registry-config",
            str(world.config),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            f"sqlite:///{world.root / 'decisions.db'}",
        ],
        tmp_path_factory.mktemp("levels-webhook"),
    )
    process.start()
    yield process
    process.stop()


def test_serve_warns_and_records_what_the_level_only_logs(world: World, server: WebhookProcess) -> None:
    async def admit() -> dict[str, dict[str, Any]]:
        answers = {}
        async with server.client() as client:
            for level, image in world.images.items():
                body = review(obj=pod(image, None, f"app-{level}"))
                answers[level] = verify_admission_response(body["request"]["uid"], await client.post(body))
        return answers

    answers = asyncio.run(admit())
    assert {level: answer["allowed"] for level, answer in answers.items()} == {
        "strict": False,
        "permissive": True,
        "audit": True,
    }
    for level in ("permissive", "audit"):
        [warning] = answers[level]["warnings"]
        assert warning.startswith(f"levels/images.{level}.signatures: ")
        assert len(warning) <= 120
    assert "warnings" not in answers["strict"]

    status, out, err = run_cli(
        "audit", "query", "--decision-log", f"sqlite:///{world.root / 'decisions.db'}", "--format", "json"
    )
    assert status == 0, err
    records = {r["record"]["name"]: r["record"] for r in map(json.loads, out.splitlines())}
    schema = decision_json_schema()
    for record in records.values():
        jsonschema.validate(record, schema)
    for level in ("permissive", "audit"):
        record = records[f"app-{level}"]
        [warning] = record["warnings"]
        assert f"which verification level {level} only logs: the signature expired at" in warning
        [logged] = record["images"][0]["signatures"][0]["logged"]
        assert (logged["check"], logged["level"]) == ("expiry", level)
    assert records["app-strict"]["warnings"] == []
