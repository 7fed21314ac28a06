"""A cached verdict holds only while it is true, through a real ``trtguard serve`` over TLS (issue 25, attack
finding A1, fixed by the verification home's ``valid_until``).

A strict Notation signature with ``io.cncf.notary.expiry`` a few seconds ahead admits its image; once the
expiry has passed, the same review is denied although the verified-signature cache (600 s by default) still
holds the earlier answer, and ``trtguard check`` on the same inputs agrees. ``serve`` always uses the real
clock, so the test reads the clock around each request and asserts only what the clock decides: an answer
received before the expiry must be an allow, one asked for after it a deny.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from tests.support.harness import SERVICE, WebhookProcess, pod, review, verify_admission_response
from tests.support.notary_pki import make_pki
from trtguard.cli import main
from verifier.signatures.notation import JWS_MEDIA_TYPE, sign_notation

KEYS = """
apiVersion: trtguard.dev/v1alpha1
kind: TrustedKeys
metadata: {name: platform}
spec:
  keys:
    - name: notary-release
      notation:
        trustStores: {ca: [trust/ca.crt]}
        trustedIdentities: ["x509.subject: C=US, ST=WA, O=Example, CN=Release Signer"]
        registryScopes: ["*"]
        verificationLevel: strict
"""
POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: signed}
spec:
  match: {namespaces: [prod]}
  images:
    - name: notary-images
      fields: [container]
      match: ["registry.example.com/*"]
      signatures: {keys: [platform/notary-release]}
"""
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
#: How long the signature stays valid after it is made: room for one answer on a loaded machine.
LIFETIME = timedelta(seconds=8)


def _world(root: Path) -> tuple[Path, Path, dict[str, Any], datetime]:
    """Policies, an attestation folder holding one image and its expiring Notation signature, the Pod."""
    pki = make_pki()
    (root / "policies" / "trust").mkdir(parents=True)
    (root / "policies" / "trust" / "ca.crt").write_bytes(pki.root.pem())
    (root / "policies" / "keys.yaml").write_text(KEYS)
    (root / "policies" / "policy.yaml").write_text(POLICY)
    config = {
        "mediaType": "application/vnd.oci.image.config.v1+json",
        "digest": "sha256:" + "4" * 64,
        "size": 2,
    }
    manifest = json.dumps(
        {"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "config": config, "layers": []}
    ).encode()
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    folder = root / "attestations" / "registry.example.com" / "app" / digest.replace(":", "-")
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_bytes(manifest)
    now = datetime.now(UTC)
    expiry = now + LIFETIME
    target = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest,
        "size": len(manifest),
    }
    envelope = sign_notation(
        target, pki.leaf.signing_key, pki.chain, media_type=JWS_MEDIA_TYPE,
        signing_time=now - timedelta(minutes=1), expiry=expiry,
    )  # fmt: skip
    (folder / "signature.notation.jws").write_bytes(envelope)
    return root / "policies", root / "attestations", pod("p", f"registry.example.com/app@{digest}"), expiry


def _ask(server: WebhookProcess, obj: dict[str, Any]) -> tuple[datetime, dict[str, Any], datetime]:
    body = review(obj=obj)

    async def post() -> dict[str, Any]:
        async with server.client() as client:
            return verify_admission_response(body["request"]["uid"], await client.post(body))

    sent = datetime.now(UTC)
    answer = asyncio.run(post())
    return sent, answer, datetime.now(UTC)


def test_an_expired_notation_signature_is_denied_although_its_allow_is_cached(tmp_path: Path) -> None:
    policies, attestations, obj, expiry = _world(tmp_path)
    server = WebhookProcess(
        ["--policies", str(policies), "--attestations", str(attestations), "--self-signed", "tls",
         "--san", SERVICE],
        tmp_path / "webhook",
    )  # fmt: skip
    (tmp_path / "webhook").mkdir()
    server.start()
    try:
        sent, first, received = _ask(server, obj)
        if received < expiry:
            assert first["allowed"], first  # verified before the expiry: the allow the cache now holds
        elif sent > expiry:
            assert not first["allowed"], first
        while datetime.now(UTC) <= expiry:
            time.sleep(0.2)
        _, second, _ = _ask(server, obj)
    finally:
        server.stop()
    assert not second["allowed"], second
    assert "the signature expired at" in second["status"]["message"]
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(obj))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["check", "--policies", str(policies), "--attestations", str(attestations),
                       "--format", "json", str(pod_file)])  # fmt: skip
    assert status == 1
    assert not json.loads(out.getvalue())[0]["allowed"]
