"""Who may sign a model, and whether they signed one signature: the key, certificate and keyless methods.

As upstream's verifiers (``model_signing._signing.sign_ec_key`` and ``sign_certificate``): the one DSSE
signature is ECDSA, with the hash of the key's curve, over the envelope's PAE; with a key, the bundle's key
hint (SHA-256 of the key's PEM) must be that key's when present; with certificates, the leaf chains to one of
the trusted certificates at the leaf's own ``notBefore`` (the signature is not timestamped) and may sign
(key usage digitalSignature, or extended key usage codeSigning). What a threshold counts is the signing key
itself (:func:`signing_key`), so one leaf key certified by two trusted CAs is one signer.

Keyless (``model_signing sign sigstore``: a Fulcio certificate for an OIDC identity, and a Rekor entry) is
verified by trtguard's Sigstore bundle verifier (``verifier.signatures``, the one that verifies keyless image
signatures: certificate chain to a Fulcio CA of the pinned trusted root at the log's signed time, SCT, Fulcio
profile, the log entry's promise and inclusion proof), offline; a threshold counts the identity.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
)
from cryptography.x509.verification import (
    VerificationError as X509VerificationError,
)

from verifier.base import InputError, VerificationError
from verifier.model_signing._signature import PREDICATE_TYPE, ModelSignature

if TYPE_CHECKING:  # Sigstore's verifier loads with the first keyless signature (verify-engine, start-up time)
    from verifier.signatures import KeylessIdentity, TrustRoot

__all__ = [
    "ModelSigningCertificates",
    "ModelSigningKey",
    "ModelSigningKeyless",
    "ModelSigningTrust",
    "signing_key",
]

_PAYLOAD_TYPE = "application/vnd.in-toto+json"
_CURVE_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "secp256r1": hashes.SHA256,
    "secp384r1": hashes.SHA384,
    "secp521r1": hashes.SHA512,
}


def _key_identity(key: ec.EllipticCurvePublicKey) -> str:
    """``key:`` and the SHA-256 of the key's SubjectPublicKeyInfo: how every format names a key (the DSSE
    format's ``PublicKey.key_id``), so one key counts once across formats."""
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return f"key:{hashlib.sha256(der).hexdigest()}"


def _pae(payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding of an in-toto payload: what the signature is over."""
    return b"DSSEv1 %d %b %d %b" % (len(_PAYLOAD_TYPE), _PAYLOAD_TYPE.encode(), len(payload), payload)


@dataclass(frozen=True, slots=True)
class ModelSigningKey:
    """The key method: the publisher's elliptic-curve public key (P-256, P-384 or P-521)."""

    key: ec.EllipticCurvePublicKey

    @classmethod
    def from_pem(cls, data: bytes, location: str | None = None) -> ModelSigningKey:
        """A PEM public key; :class:`InputError` unless it is an ECDSA key of a curve model_signing uses."""
        try:
            key = serialization.load_pem_public_key(data)
        except (ValueError, TypeError) as error:
            raise InputError(f"not a PEM public key ({error})", location=location) from None
        _curve_hash(key, "the model-signing key")
        assert isinstance(key, ec.EllipticCurvePublicKey)  # noqa: S101 - _curve_hash refused others
        return cls(key)

    @property
    def identity(self) -> str:
        """What a threshold counts: the key."""
        return _key_identity(self.key)


@dataclass(frozen=True, slots=True)
class ModelSigningCertificates:
    """The certificate method: the certificates a signing certificate must chain to (each a trust anchor)."""

    anchors: tuple[x509.Certificate, ...]

    @classmethod
    def from_pem(cls, data: bytes, location: str) -> ModelSigningCertificates:
        """Every certificate of a PEM file; :class:`InputError` when it holds none or does not parse."""
        try:
            anchors = tuple(x509.load_pem_x509_certificates(data))
        except ValueError as error:
            raise InputError(f"not PEM certificates ({error})", location=location) from None
        return cls(anchors)

    @property
    def identity(self) -> str:
        """The anchors' fingerprint (a threshold counts the leaf key each signature was made with)."""
        digest = hashlib.sha256()
        for der in sorted(c.public_bytes(serialization.Encoding.DER) for c in self.anchors):
            digest.update(hashlib.sha256(der).digest())
        return f"x509:{digest.hexdigest()}"


@dataclass(frozen=True, slots=True)
class ModelSigningKeyless:
    """The keyless (Sigstore) method: the certificate identity (SAN) and OIDC issuer a Fulcio certificate
    must carry, and the trusted root (Fulcio CAs, Rekor and CT logs) it is verified against, offline."""

    signer: KeylessIdentity
    trust_root: TrustRoot

    @property
    def identity(self) -> str:
        """The identity under its trusted root (a threshold counts the identity that signed)."""
        return f"identity:{self.signer} under {self.trust_root.fingerprint}"


ModelSigningTrust = ModelSigningKey | ModelSigningCertificates | ModelSigningKeyless


def _curve_hash(key: object, what: str) -> hashes.HashAlgorithm:
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in _CURVE_HASHES:
        raise InputError(f"{what} is not an ECDSA P-256, P-384 or P-521 key (what model_signing signs with)")
    return _CURVE_HASHES[key.curve.name]()


def _verify_ecdsa(key: ec.EllipticCurvePublicKey, signature: ModelSignature) -> None:
    try:
        key.verify(
            signature.signature,
            _pae(signature.payload),
            ec.ECDSA(_curve_hash(key, "the signing key")),
        )
    except InvalidSignature:
        raise VerificationError("the signature does not verify with the signing key") from None


def signing_key(signature: ModelSignature, trust: ModelSigningTrust) -> str:
    """Verify ``signature`` with ``trust``; the identity of the key that signed (``key:<id>``; keyless:
    ``identity:<subject> (<issuer>)``), or :class:`VerificationError` saying why not (:class:`InputError`
    for a key that is not ECDSA)."""
    if isinstance(trust, ModelSigningKeyless):
        return _keyless_signer(signature, trust)
    if isinstance(trust, ModelSigningKey):
        key = trust.key
        pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        if signature.key_hint is not None and signature.key_hint != hashlib.sha256(pem).hexdigest():
            raise VerificationError("signed with another key (the bundle's key hint is not this key's)")
        _verify_ecdsa(key, signature)
        return trust.identity
    leaf = _verified_leaf(signature.chain, trust.anchors)
    leaf_key = leaf.public_key()
    if not isinstance(leaf_key, ec.EllipticCurvePublicKey):
        raise VerificationError("the signing certificate's key is not an ECDSA key")
    _verify_ecdsa(leaf_key, signature)
    return _key_identity(leaf_key)


def _verified_leaf(chain: Sequence[bytes], anchors: Sequence[x509.Certificate]) -> x509.Certificate:
    if not chain:
        raise VerificationError("the signature carries no certificate (it was signed with a key)")
    try:
        certificates = [x509.load_der_x509_certificate(der) for der in chain]
    except ValueError as error:
        raise VerificationError(f"a certificate of the signature does not parse ({error})") from None
    leaf, intermediates = certificates[0], certificates[1:]
    # Upstream's OpenSSL store checks CAs and leaves the leaf's extensions to the usage check below.
    ca_policy = ExtensionPolicy.webpki_defaults_ca().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    verifier = (
        PolicyBuilder()
        .store(Store(list(anchors)))
        .time(leaf.not_valid_before_utc)
        .extension_policies(ca_policy=ca_policy, ee_policy=ExtensionPolicy.permit_all())
        .build_client_verifier()
    )
    try:
        verifier.verify(leaf, intermediates)
    except (X509VerificationError, x509.UnsupportedGeneralNameType) as error:
        raise VerificationError(
            f"the signing certificate does not chain to a trusted one ({error})"
        ) from None
    if not _may_sign(leaf):
        raise VerificationError("the signing certificate may not sign (no digitalSignature nor codeSigning)")
    return leaf


def _may_sign(leaf: x509.Certificate) -> bool:
    try:
        if leaf.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature:
            return True
    except x509.ExtensionNotFound:
        pass
    try:
        return (
            ExtendedKeyUsageOID.CODE_SIGNING
            in leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        )
    except x509.ExtensionNotFound:
        return False


def _keyless_signer(signature: ModelSignature, trust: ModelSigningKeyless) -> str:
    from verifier.signatures import TrustPolicy, verify_bundle  # noqa: PLC0415 - see TYPE_CHECKING above

    if not signature.chain:
        raise VerificationError("the signature carries no certificate (it was signed with a key)")
    policy = TrustPolicy(identities=(trust.signer,), trust_root=trust.trust_root)
    result = verify_bundle(
        signature.bundle,
        policy,
        digest=f"sha256:{signature.root_digest}",
        predicate_type=PREDICATE_TYPE,
        location=signature.origin,
    )
    # The statement verified is the one read (the bundle reader also takes proto field names, so a bundle
    # holding two envelopes must not pass one off for the other).
    if result.statement is None or result.statement.predicate != json.loads(signature.payload)["predicate"]:
        raise VerificationError("the statement verified is not the one the signature lists files from")
    return result.counted[0].signers[0].signer_id
