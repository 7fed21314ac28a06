"""policies/verified.py: cached verified evidence answers only while it holds at the evaluation clock.

Issue 25's review (F1): the cross-request cache kept a verdict for its TTL whatever the clock said, so a
Notation signature that expired, or whose certificate did, between two admissions still counted for up to
ten minutes, and ``--now`` was not honoured on a cache hit. The signature here is a real Notary Project
JWS envelope (trtguard's signer, a three-level PKI made with ``cryptography``) in an attestation folder.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from tests.policies.conftest import Material, pod
from tests.policies.evaluation import evaluate
from tests.support.notary_pki import NOW, make_pki
from verifier.base import sha256_bytes
from verifier.evidence_folder import LocalEvidence
from verifier.signatures.notation import sign_notation

KEYS = """\
apiVersion: trtguard.dev/v1alpha1
kind: TrustedKeys
metadata: {name: platform}
spec:
  keys:
    - name: notary
      notation:
        trustStores: {ca: [ca.crt]}
        trustedIdentities: ["*"]
        registryScopes: ["*"]
        verificationLevel: strict
"""
POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: images}
spec:
  match: {namespaces: [prod]}
  images:
    - name: signed
      match: ["registry.example.com/app/*"]
      signatures: {keys: [platform/notary]}
"""


def _signed_image(folder: Path, expiry: timedelta) -> str:
    """An image manifest in ``folder`` with a Notation signature whose own expiry is ``NOW + expiry``."""
    pki = make_pki()
    (folder.parent / "ca.crt").write_bytes(pki.root.pem())
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": "sha256:" + "c0" * 32,
                "size": 2,
            },
            "layers": [],
        }
    ).encode()
    digest = f"sha256:{sha256_bytes(manifest)}"
    (folder / "app.manifest.json").write_bytes(manifest)
    descriptor = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest,
        "size": len(manifest),
    }
    envelope = sign_notation(
        descriptor,
        pki.leaf.signing_key,
        pki.chain,
        signing_time=NOW - timedelta(hours=1),
        expiry=NOW + expiry,
    )
    signatures = folder / f"sha256-{digest[7:]}"
    signatures.mkdir()
    (signatures / "signature.jws").write_bytes(envelope)
    return f"registry.example.com/app/server@{digest}"


def test_a_cached_signature_verdict_ends_when_the_signature_expires(material: Material) -> None:
    image = _signed_image(material.attestations, expiry=timedelta(hours=1))
    (material.root / "keys.yaml").write_text(KEYS)
    clock = [NOW]
    engine = PolicyEvaluator(
        load_policy_set([material.policy(POLICY), material.root / "keys.yaml"]),
        LocalEvidence(material.attestations),
        clock=lambda: clock[0],
    )
    workload = pod(images=(image,))
    assert evaluate(engine, workload).allowed
    clock[0] = NOW + timedelta(minutes=30)
    assert evaluate(engine, workload).allowed  # still valid: answered from the cache
    clock[0] = NOW + timedelta(hours=2)  # well inside the cache's ten minutes of real time
    decision = evaluate(engine, workload)
    assert not decision.allowed
    assert "the signature expired at" in decision.violations[0].message
    # An earlier evaluation time (`--now` for an audit) is judged at that time, not by the later answer.
    clock[0] = NOW
    assert evaluate(engine, workload).allowed
