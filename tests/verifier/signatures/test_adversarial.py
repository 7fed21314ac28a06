"""Attacks on offline signature verification, with a local Sigstore instance (tests/support/local_rekor.py: a
Rekor log, a Fulcio CA and its CT log) so that every piece is real and only the attacked piece is wrong.

Two kinds of attack: material that a trusted signer, log or CA never made must be refused; hostile input
(deep nesting, enormous numbers, undecodable certificates, unpaired surrogates, timestamp tokens that fail
late, quadratic PEM scans) must end in a verification error naming the problem, never in a crash or minutes
of CPU. A crash on one attached bundle would otherwise take down the verification of every good signature
beside it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support import local_rekor
from verifier import signatures
from verifier.base._errors import InputError, VerificationError
from verifier.crypto import _dsse as dsse
from verifier.crypto import _intoto as intoto
from verifier.crypto import _keys as keys
from verifier.crypto._keys import PrivateKey
from verifier.signatures import CosignSignature, KeylessIdentity, TrustPolicy, TrustRoot
from verifier.signatures._inclusion import leaf_hash, root_from_inclusion_proof

MANIFEST = b"an image manifest"
IMAGE = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
INTEGRATED = 1_700_000_000  # 2023-11-14T22:13:20Z, inside LocalFulcio's default certificate window
IDENTITY = KeylessIdentity(issuer=local_rekor.OIDC_ISSUER, subject=local_rekor.IDENTITY)
SAN_OID = x509.ObjectIdentifier("2.5.29.17")
TIMESTAMPED = (
    Path(__file__).resolve().parents[2]
    / "data"
    / "sigstore-conformance"
    / "bundle-verify"
    / "rekor2-timestamp-with-embedded-cert"
)


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

    def keyed_bundle(self, *, pem: bytes | None = None) -> dict[str, Any]:
        """A v0.3 message-signature bundle by alice over the manifest, logged (promise and proof); ``pem`` is
        the key or certificate its log entry records (default: alice's key)."""
        digest = hashlib.sha256(MANIFEST).digest()
        signature = self.alice.sign(MANIFEST)
        body = local_rekor.hashedrekord(digest, signature, pem or self.alice.public_key().to_pem())
        return {
            "mediaType": signatures.BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {}, "tlogEntries": [self.log.entry(body)]},
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": _b64(digest)},
                "signature": _b64(signature),
            },
        }

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

    def classic(self, payload: bytes | None = None) -> CosignSignature:
        """A classic signature by alice on the image, logged."""
        payload = payload or _simple_signing()
        signature = self.alice.sign(payload)
        body = local_rekor.hashedrekord(
            hashlib.sha256(payload).digest(), signature, self.alice.public_key().to_pem()
        )
        return CosignSignature(
            payload=payload, signature=_b64(signature), rekor_bundle=self.rekor_annotation(body)
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


def _entry(document: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = document["verificationMaterial"]["tlogEntries"][0]
    return entry


def _checkpoint(document: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    checkpoint = _entry(document)["inclusionProof"]["checkpoint"]
    checkpoint["envelope"] = change(checkpoint["envelope"])
    return document


def _tree_size(size: str) -> Callable[[str], str]:
    """Replace the tree size line of a checkpoint with ``size``."""

    def change(text: str) -> str:
        origin, _, rest = text.split("\n", 2)
        return f"{origin}\n{size}\n{rest}"

    return change


def _unknown_key_algorithm(certificate: x509.Certificate) -> bytes:
    """``certificate`` with its key's algorithm OID (id-ecPublicKey) turned into one nobody knows."""
    der = certificate.public_bytes(serialization.Encoding.DER)
    ec_public_key = bytes.fromhex("06072a8648ce3d0201")
    assert der.count(ec_public_key) == 1
    return der.replace(ec_public_key, bytes.fromhex("06072a8648ce3d0209"))


def _pem(der: bytes) -> bytes:
    body = _b64(der)
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----\n".encode()


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


# --- hostile input: an error that names the problem, never a crash -----------------------------------------


def _deep_body(s: Instance) -> dict[str, Any]:
    document = s.keyed_bundle()
    _entry(document)["canonicalizedBody"] = _b64(b"[" * 100_000)
    return document


def _with_entry(change: Callable[[dict[str, Any]], None]) -> Callable[[Instance], dict[str, Any]]:
    def build(s: Instance) -> dict[str, Any]:
        document = s.keyed_bundle()
        change(_entry(document))
        return document

    return build


def _keyless_with(**options: Any) -> Callable[[Instance], dict[str, Any]]:
    def build(s: Instance) -> dict[str, Any]:
        signer = keys.generate_private_key()
        return s.keyless_bundle(s.fulcio.certificate(signer.public_key(), **options), signer)

    return build


def _unknown_key_certificate(s: Instance) -> dict[str, Any]:
    signer = keys.generate_private_key()
    document = s.keyless_bundle(s.fulcio.certificate(signer.public_key()), signer)
    der = _unknown_key_algorithm(s.fulcio.certificate(signer.public_key()))
    document["verificationMaterial"]["certificate"]["rawBytes"] = _b64(der)
    return document


def _rekor_body_with_unknown_key_certificate(s: Instance) -> dict[str, Any]:
    return s.keyed_bundle(pem=_pem(_unknown_key_algorithm(s.fulcio.certificate(s.alice.public_key()))))


def _unpaired_surrogate_payload_type(s: Instance) -> dict[str, Any]:
    envelope = dsse.sign_envelope("application/vnd.in-toto+json", b"{}", s.alice)
    return {
        "mediaType": signatures.BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {}},
        "dsseEnvelope": envelope.to_dict() | {"payloadType": "application/vnd.in-toto+json\ud800"},
    }


HOSTILE_BUNDLES: list[tuple[str, Callable[[Instance], Any], str]] = [
    ("deep-document", lambda s: "[" * 100_000, "not a Sigstore bundle: the document is nested too deeply"),
    ("deep-rekor-body", _deep_body, "the Rekor entry body is nested too deeply"),
    (
        "int64-of-5000-digits",
        _with_entry(lambda e: e.update(logIndex="9" * 5000)),
        r"tlogEntries\[0\]\.logIndex expected an integer",
    ),
    (
        "checkpoint-size-of-5000-digits",
        lambda s: _checkpoint(s.keyed_bundle(), _tree_size("1" * 5000)),
        "the checkpoint's tree size",
    ),
    (
        "checkpoint-size-in-superscript-digits",
        lambda s: _checkpoint(s.keyed_bundle(), _tree_size("\u00b2")),
        "the checkpoint's tree size",
    ),
    (
        "checkpoint-with-unpaired-surrogate",
        lambda s: _checkpoint(s.keyed_bundle(), lambda t: "\ud800" + t),
        r"checkpoint\.envelope is not valid Unicode text",
    ),
    (
        "integrated-time-beyond-2^53",
        _with_entry(lambda e: e.update(integratedTime=str(2**60))),
        "too large for a signed entry timestamp",
    ),
    (
        "log-index-beyond-2^53",
        _with_entry(lambda e: e.update(logIndex=str(2**60))),
        "too large for a signed entry timestamp",
    ),
    (
        "payload-type-with-unpaired-surrogate",
        _unpaired_surrogate_payload_type,
        r"dsseEnvelope\.payloadType is not valid Unicode text",
    ),
    (
        "certificate-with-undecodable-san",
        _keyless_with(san=x509.UnrecognizedExtension(SAN_OID, b"\x30\x03\x01\x01\x00")),
        "the signing certificate's extensions do not parse",
    ),
    ("certificate-with-unknown-key-algorithm", _unknown_key_certificate, "public key is unusable"),
    (
        "rekor-body-certificate-with-unknown-key-algorithm",
        _rekor_body_with_unknown_key_certificate,
        "the Rekor entry records a different signing key or certificate",
    ),
    (
        "rekor-body-kind-with-unpaired-surrogate",
        _with_entry(
            lambda e: e.update(
                canonicalizedBody=_b64(json.dumps({"kind": "x\ud800", "apiVersion": "0.0.1"}).encode())
            )
        ),
        r"the Rekor entry body is 'x\\ud800/0.0.1', but the bundle says hashedrekord/0.0.1",
    ),
]


def _raw(document: Any) -> str:
    return document if isinstance(document, str) else json.dumps(document)


@pytest.mark.parametrize(
    ("build", "reason"), [pytest.param(build, reason, id=name) for name, build, reason in HOSTILE_BUNDLES]
)
def test_hostile_bundles_fail_with_the_reason(
    sigstore: Instance, build: Callable[[Instance], Any], reason: str
) -> None:
    with pytest.raises(VerificationError, match=reason) as raised:
        signatures.verify_bundle(_raw(build(sigstore)), sigstore.policy(), digest=IMAGE)
    raised.value.message.encode()  # messages reach UTF-8 logs: no unpaired surrogate in them


@pytest.mark.parametrize("build", [pytest.param(build, id=name) for name, build, _ in HOSTILE_BUNDLES])
def test_a_hostile_bundle_does_not_hide_a_good_signature(
    sigstore: Instance, build: Callable[[Instance], Any]
) -> None:
    # Whoever can attach a bundle to an image must not be able to stop its genuine signatures verifying.
    result = signatures.verify_image_signatures(
        IMAGE, sigstore.policy(), classic=[sigstore.classic()], bundles=[_raw(build(sigstore))]
    )
    assert (result.keys, result.verified, result.tlog_verified) == (("alice",), 1, True)


def _classic_with_unknown_key_algorithm(s: Instance) -> CosignSignature:
    certificate = _unknown_key_algorithm(s.fulcio.certificate(keys.generate_private_key().public_key()))
    payload = _simple_signing()
    return CosignSignature(
        payload=payload,
        signature=_b64(keys.generate_private_key().sign(payload)),
        certificate=_pem(certificate).decode(),
    )


def _classic_with_deep_rekor_annotation(s: Instance) -> CosignSignature:
    layer = s.classic()
    return CosignSignature(payload=layer.payload, signature=layer.signature, rekor_bundle="[" * 100_000)


def _classic_with_undecodable_san(s: Instance) -> CosignSignature:
    signer = keys.generate_private_key()
    certificate = s.fulcio.certificate(
        signer.public_key(), san=x509.UnrecognizedExtension(SAN_OID, b"\x30\x03\x01\x01\x00")
    )
    payload = _simple_signing()
    return CosignSignature(
        payload=payload,
        signature=_b64(signer.sign(payload)),
        certificate=certificate.public_bytes(serialization.Encoding.PEM).decode(),
    )


def _classic_with_huge_integrated_time(s: Instance) -> CosignSignature:
    layer = s.classic()
    annotation = json.loads(layer.rekor_bundle or "")
    annotation["Payload"]["integratedTime"] = 2**60
    return CosignSignature(
        payload=layer.payload, signature=layer.signature, rekor_bundle=json.dumps(annotation)
    )


HOSTILE_CLASSIC: list[tuple[str, Callable[[Instance], CosignSignature], str]] = [
    ("deep-rekor-annotation", _classic_with_deep_rekor_annotation, "the Rekor bundle annotation is nested"),
    ("deep-signed-payload", lambda s: s.classic(b"[" * 100_000), "the signed payload is nested too deeply"),
    ("huge-integrated-time", _classic_with_huge_integrated_time, "too large for a signed entry timestamp"),
    ("certificate-with-undecodable-san", _classic_with_undecodable_san, "extensions do not parse"),
    ("certificate-with-unknown-key-algorithm", _classic_with_unknown_key_algorithm, "public key is unusable"),
    (
        "rekor-body-kind-with-unpaired-surrogate",
        lambda s: CosignSignature(
            payload=s.classic().payload,
            signature=s.classic().signature,
            rekor_bundle=s.rekor_annotation({"kind": "x\ud800", "apiVersion": "0.0.1", "spec": {}}),
        ),
        r"the Rekor entry is 'x\\ud800/0.0.1', expected hashedrekord",
    ),
]


@pytest.mark.parametrize(
    ("build", "reason"), [pytest.param(build, reason, id=name) for name, build, reason in HOSTILE_CLASSIC]
)
def test_hostile_classic_signatures_fail_beside_a_good_one(
    sigstore: Instance, build: Callable[[Instance], CosignSignature], reason: str
) -> None:
    policy = sigstore.policy()
    with pytest.raises(VerificationError, match=reason) as raised:
        signatures.verify_image_signatures(IMAGE, policy, classic=[build(sigstore)])
    raised.value.message.encode()  # messages reach UTF-8 logs: no unpaired surrogate in them
    result = signatures.verify_image_signatures(IMAGE, policy, classic=[sigstore.classic(), build(sigstore)])
    assert (result.keys, result.verified) == (("alice",), 1)


def test_deep_documents_read_by_other_entry_points(sigstore: Instance) -> None:
    deep = b"[" * 100_000
    with pytest.raises(InputError, match="nested too deeply"):
        dsse.Envelope.from_json(deep)
    with pytest.raises(InputError, match="nested too deeply"):
        TrustRoot.from_bytes(deep, location="trusted_root.json")
    envelope = dsse.sign_envelope(intoto.PAYLOAD_TYPE, deep, sigstore.alice)
    with pytest.raises(InputError, match="the in-toto statement is nested too deeply"):
        signatures.verify_attestation(envelope, TrustPolicy(keys={"alice": sigstore.alice.public_key()}))


def _break_tstinfo(token: bytes) -> bytes:
    """``token`` with its TSTInfo's SEQUENCE tag damaged: the response decodes, its content does not."""
    tst_info_type = bytes.fromhex("060b2a864886f70d0109100104")
    position = token.index(tst_info_type) + len(tst_info_type)
    for expected in (0xA0, 0x04):  # [0] EXPLICIT, then the OCTET STRING around TSTInfo
        assert token[position] == expected
        length = token[position + 1]
        position += 2 + (length & 0x7F if length & 0x80 else 0)
    assert token[position] == 0x30
    return token[:position] + b"\x31" + token[position + 1 :]


def test_a_timestamp_that_fails_to_decode_late_adds_no_time(sigstore: Instance) -> None:
    # rfc3161-client decodes a response's outer structure at once and its TSTInfo when first read.
    material = json.loads((TIMESTAMPED / "bundle.sigstore.json").read_bytes())["verificationMaterial"]
    token = base64.b64decode(material["timestampVerificationData"]["rfc3161Timestamps"][0]["signedTimestamp"])
    signer = keys.generate_private_key()
    document = sigstore.keyless_bundle(sigstore.fulcio.certificate(signer.public_key()), signer)
    document["verificationMaterial"]["timestampVerificationData"] = {
        "rfc3161Timestamps": [{"signedTimestamp": _b64(_break_tstinfo(token))}]
    }
    assert signatures.verify_bundle(json.dumps(document), sigstore.policy(), digest=IMAGE)  # the SET dates it
    del _entry(document)["inclusionPromise"]
    with pytest.raises(VerificationError, match=r"no signed time.*timestamp 0 does not decode"):
        signatures.verify_bundle(json.dumps(document), sigstore.policy(), digest=IMAGE)


def test_a_rekor_body_of_unterminated_pem_blocks_is_refused_quickly(sigstore: Instance) -> None:
    # The key PEM of a Rekor body is read before any log signature is checked: whoever can attach a bundle
    # chooses it. A lazy BEGIN…END scan over 8000 unterminated blocks took about 15 s (quadratic).
    document = sigstore.keyed_bundle(pem=b"-----BEGIN PUBLIC KEY-----" * 8000)
    started = time.thread_time()  # CPU time: the work, not what a loaded machine gives to others
    with pytest.raises(VerificationError, match="records a different signing key or certificate"):
        signatures.verify_bundle(json.dumps(document), sigstore.policy(), digest=IMAGE)
    assert time.thread_time() - started < 2


def test_repeated_signatures_are_verified_once(sigstore: Instance, monkeypatch: pytest.MonkeyPatch) -> None:
    # One genuine signature repeated 64 times in the envelope, and its log entry whose checkpoint repeats the
    # log's signature line 99 times before a bad one: each copy was verified again for each copy (about 6500
    # ECDSA verifications, 0.5 s a bundle, 36 s for an image with 64 of them attached).
    statement = intoto.Statement(
        subject=[intoto.ResourceDescriptor(digest={"sha256": IMAGE.removeprefix("sha256:")})],
        predicate_type=signatures.COSIGN_SIGN_PREDICATE,
    )
    envelope = intoto.sign_statement(statement, sigstore.alice)
    signature = envelope.signatures[0].sig
    entry = sigstore.log.entry(
        local_rekor.dsse_entry(envelope.payload, [(signature, sigstore.alice.public_key().to_pem())])
    )
    note, line = entry["inclusionProof"]["checkpoint"]["envelope"].split("\n\n")
    name, blob = line.removeprefix("\u2014 ").split()
    bad = _b64(base64.b64decode(blob)[:4] + bytes.fromhex("3006020101020101"))
    lines = [line.strip()] * 99 + [f"\u2014 {name} {bad}"]
    entry["inclusionProof"]["checkpoint"]["envelope"] = note + "\n\n" + "\n".join(lines) + "\n"
    document = envelope.to_dict()
    document["signatures"] *= 64
    bundle = {
        "mediaType": signatures.BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {}, "tlogEntries": [entry]},
        "dsseEnvelope": document,
    }
    verified = keys.PublicKey.verify
    calls = []

    def counting(key: keys.PublicKey, signature: bytes, data: bytes) -> bool:
        calls.append(key)
        return verified(key, signature, data)

    monkeypatch.setattr(keys.PublicKey, "verify", counting)
    result = signatures.verify_bundle(json.dumps(bundle), sigstore.policy(), digest=IMAGE)
    assert (result.keys, result.tlog_verified) == (("alice",), True)
    assert len(calls) == 3  # the envelope's signature, the SET, the checkpoint
    # The first line of the log's key decides, as in Go's note package: a bad one first is refused.
    entry["inclusionProof"]["checkpoint"]["envelope"] = note + "\n\n" + "\n".join(lines[::-1]) + "\n"
    with pytest.raises(VerificationError, match="the checkpoint's signature does not verify"):
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
