"""Attacks on offline signature verification, with a local Sigstore instance (tests/verifier/local_rekor.py: a
Rekor log, a Fulcio CA and its CT log) so that every piece is real and only the attacked piece is wrong:
material that a trusted signer, log or CA never made must be refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.verifier import local_rekor
from verifier import dsse, intoto, keys, signatures
from verifier._private.sigstore_inclusion import leaf_hash, root_from_inclusion_proof
from verifier.errors import VerificationError
from verifier.keys import PrivateKey
from verifier.signatures import CosignSignature, KeylessIdentity, TrustPolicy, TrustRoot

MANIFEST = b"an image manifest"
IMAGE = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
INTEGRATED = 1_700_000_000  # 2023-11-14T22:13:20Z, inside LocalFulcio's default certificate window
IDENTITY = KeylessIdentity(issuer=local_rekor.OIDC_ISSUER, subject=local_rekor.IDENTITY)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Instance:
    """A local Sigstore instance and the signers of these tests."""

    alice: PrivateKey
    log: local_rekor.LocalLog
    fulcio: local_rekor.LocalFulcio

    def root(self, **ct_window: str) -> TrustRoot:
        document = self.fulcio.trusted_root(self.log, **ct_window)
        return TrustRoot.from_bytes(json.dumps(document).encode(), location="trusted_root.json")

    def policy(self, root: TrustRoot | None = None) -> TrustPolicy:
        """Alice's key or the local identity, every signature logged."""
        return TrustPolicy(
            keys={"alice": self.alice.public_key()},
            identities=(IDENTITY,),
            trust_root=root or self.root(),
            require_tlog=True,
        )

    def keyless_bundle(self, certificate: x509.Certificate, key: PrivateKey) -> dict[str, Any]:
        return local_rekor.keyless_bundle(certificate, key, MANIFEST, self.log, integrated_time=INTEGRATED)

    def rekor_annotation(self, body: dict[str, Any], *, integrated_time: int = INTEGRATED) -> str:
        """The classic ``dev.sigstore.cosign/bundle`` annotation of ``body`` in the local log."""
        entry = self.log.entry(body, integrated_time=integrated_time, proof=False)
        return json.dumps(
            {
                "SignedEntryTimestamp": entry["inclusionPromise"]["signedEntryTimestamp"],
                "Payload": {
                    "body": entry["canonicalizedBody"],
                    "integratedTime": integrated_time,
                    "logIndex": int(entry["logIndex"]),
                    "logID": self.log.log_id.hex(),
                },
            }
        )


@pytest.fixture(scope="module")
def sigstore() -> Instance:
    return Instance(
        alice=keys.generate_private_key(),
        log=local_rekor.LocalLog(keys.generate_private_key()),
        fulcio=local_rekor.LocalFulcio(),
    )


def _simple_signing(digest: str = IMAGE) -> bytes:
    return json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": "registry.example.com/inference/trt"},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        }
    ).encode()


# --- the local instance itself ------------------------------------------------------------------------------


def test_local_keyless_bundle_verifies(sigstore: Instance) -> None:
    signer = keys.generate_private_key()
    bundle = sigstore.keyless_bundle(sigstore.fulcio.certificate(signer.public_key()), signer)
    result = signatures.verify_bundle(json.dumps(bundle), sigstore.policy(), digest=IMAGE)
    assert result.identities == (f"{local_rekor.IDENTITY} ({local_rekor.OIDC_ISSUER})",)
    assert result.tlog_verified


# --- keyless: what a trusted CA or CT log never vouched for -----------------------------------------------


def test_sct_counts_only_inside_its_ct_logs_validity(sigstore: Instance) -> None:
    # sigstore-go skips SCTs dated outside the CT log key's validity period: a retired CT key (which may
    # since have leaked) must not vouch for certificates it never saw while in service.
    signer = keys.generate_private_key()
    sct_time = datetime(2023, 11, 14, 22, 10, tzinfo=UTC)
    bundle = json.dumps(sigstore.keyless_bundle(sigstore.fulcio.certificate(signer.public_key()), signer))
    for start, end in [
        ("2023-11-14T22:10:00Z", "2023-11-14T22:10:00Z"),  # both ends inclusive
        ("2020-01-01T00:00:00Z", None),
    ]:
        root = sigstore.root(ct_start=start, **({"ct_end": end} if end else {}))
        assert signatures.verify_bundle(bundle, sigstore.policy(root), digest=IMAGE)
    before, after = sct_time - timedelta(seconds=1), sct_time + timedelta(seconds=1)
    for window in [
        {"ct_end": before.isoformat().replace("+00:00", "Z")},
        {"ct_start": after.isoformat().replace("+00:00", "Z")},
    ]:
        with pytest.raises(VerificationError, match="no SCT in the signing certificate verifies"):
            signatures.verify_bundle(bundle, sigstore.policy(sigstore.root(**window)), digest=IMAGE)


def test_a_signing_certificate_cannot_issue_certificates(sigstore: Instance) -> None:
    # Mallory holds a genuine Fulcio certificate for her own identity and uses its key as a CA for the
    # victim's identity, shipping her certificate as the chain. The chain annotation of a classic signature
    # is the one place trtguard takes intermediates from: they must still be CAs.
    mallory_crypto = ec.generate_private_key(ec.SECP256R1())
    mallory = PrivateKey(mallory_crypto)
    mallory_certificate = sigstore.fulcio.certificate(mallory.public_key(), identity="mallory@example.com")
    victim_key = keys.generate_private_key()
    forged = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(mallory_certificate.subject)
        .public_key(victim_key.public_key().crypto)
        .serial_number(1)
        .not_valid_before(mallory_certificate.not_valid_before_utc)
        .not_valid_after(mallory_certificate.not_valid_after_utc)
        .add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(local_rekor.IDENTITY)]), critical=True
        )
        .add_extension(
            x509.UnrecognizedExtension(
                x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1"), b"https://issuer.local"
            ),
            critical=False,
        )
        .sign(mallory_crypto, hashes.SHA256())
    )
    payload = _simple_signing()
    signature = victim_key.sign(payload)
    pem = forged.public_bytes(serialization.Encoding.PEM)
    body = local_rekor.hashedrekord(hashlib.sha256(payload).digest(), signature, pem)
    layer = CosignSignature(
        payload=payload,
        signature=_b64(signature),
        certificate=pem.decode(),
        chain=mallory_certificate.public_bytes(serialization.Encoding.PEM).decode(),
        rekor_bundle=sigstore.rekor_annotation(body),
    )
    with pytest.raises(VerificationError, match="does not chain to a trusted Fulcio CA"):
        signatures.verify_image_signatures(IMAGE, sigstore.policy(), classic=[layer])


def test_a_dsse_bundle_is_not_bound_by_a_hashedrekord_entry(sigstore: Instance) -> None:
    # Anyone may log a hashedrekord of (SHA-256 of the PAE, the envelope's signature, the key): the ECDSA
    # signature verifies over that digest. Such an entry records a blob, not this envelope (Rekor v1 kinds).
    statement = intoto.Statement(
        subject=[intoto.ResourceDescriptor(digest={"sha256": IMAGE.removeprefix("sha256:")})],
        predicate_type=signatures.COSIGN_SIGN_PREDICATE,
    )
    envelope = intoto.sign_statement(statement, sigstore.alice)
    signature = envelope.signatures[0].sig
    pae_digest = hashlib.sha256(dsse.pae(envelope.payload_type, envelope.payload)).digest()
    body = local_rekor.hashedrekord(pae_digest, signature, sigstore.alice.public_key().to_pem())
    bundle = {
        "mediaType": signatures.BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {}, "tlogEntries": [sigstore.log.entry(body)]},
        "dsseEnvelope": envelope.to_dict(),
    }
    with pytest.raises(VerificationError, match="is a hashedrekord, but the bundle carries a DSSE envelope"):
        signatures.verify_bundle(json.dumps(bundle), sigstore.policy(), digest=IMAGE)


# --- Merkle inclusion proofs against a brute-force tree -----------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 5, 6, 7, 8, 13, 16, 31, 33])
def test_inclusion_proofs_prove_only_the_leaf_they_were_made_for(size: int) -> None:
    leaves = [leaf_hash(b"entry %d" % i) for i in range(size)]
    root = local_rekor.merkle_root(leaves)

    def proves(index: int, tree_size: int, leaf: bytes, path: list[bytes]) -> bool:
        try:
            return root_from_inclusion_proof(index, tree_size, leaf, path) == root
        except VerificationError:
            return False

    assert not proves(0, 0, leaves[0], [])  # an empty tree holds nothing
    for index in range(size):
        path = local_rekor.audit_path(index, leaves)
        assert proves(index, size, leaves[index], path)
        assert not proves(index, size, leaves[index], [*path, root])  # one hash too many
        assert not proves(size, size, leaves[index], path)  # an index outside the tree
        if not path:
            continue
        assert not proves(index, size, leaves[index], path[:-1])  # one hash short
        assert not proves(index, size, leaves[index], [path[0][:31], *path[1:]])  # not a SHA-256 value
        # RFC 6962 domain separation: the children of the first node on the path, offered as an entry body,
        # are not a leaf; wherever the rest of the path is tried from, it does not reach the root.
        on_the_left = index % 2 == 1 or index == size - 1
        children = path[0] + leaves[index] if on_the_left else leaves[index] + path[0]
        assert not any(proves(other, size, leaf_hash(children), path[1:]) for other in range(size))
