"""Who may sign a model, and whether they signed one signature: the key, certificate and keyless methods.

As upstream's verifiers (``model_signing._signing.sign_ec_key`` and ``sign_certificate``): both read only a
bundle of media type ``application/vnd.dev.sigstore.bundle.v0.3+json``; the one DSSE signature is ECDSA,
with the hash of the key's curve, over the envelope's PAE. With a key, the bundle carries
``verificationMaterial.publicKey``, whose hint (SHA-256 of the key's PEM) must be that key's when present.
With certificates, the bundle carries ``x509CertificateChain`` (leaf first); the leaf chains to a trusted
self-signed root at the leaf's own ``notBefore`` (the signature is not timestamped), through the bundle's
certificates and the trusted non-root ones, as OpenSSL's store builds a chain (an intermediate or a leaf is
no trust anchor: no partial chains); and may sign (key usage digitalSignature, or extended key usage
codeSigning).

A Sigstore keyless signature is never a certificate-method one: a bundle carrying one Fulcio ``certificate``,
transparency-log entries, or a leaf with Fulcio's OIDC extensions is refused there (upstream would accept a
Fulcio leaf moved into ``x509CertificateChain``, with no identity, issuer, log or SCT checked), and a
certificate chain whose root is a Sigstore public-good Fulcio root is refused when loaded. What a threshold
counts is the signing key itself (:func:`signing_key`): every certificate-based signature, keyless too, by its
leaf's key, so one leaf key certified by two trusted CAs, or matched by two keyless signers, is one signer.

Keyless (``model_signing sign sigstore``: a Fulcio certificate for an OIDC identity, and a Rekor entry) is
verified by trtguard's Sigstore bundle verifier (``verifier.signatures``, the one that verifies keyless image
signatures: certificate chain to a Fulcio CA of the pinned trusted root at the log's signed time, SCT, Fulcio
profile, the log entry's promise and inclusion proof), offline; a threshold counts the leaf's key.
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
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
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
from verifier.model_signing._signature import (
    BUNDLE_MEDIA_TYPES,
    PREDICATE_TYPE,
    ModelSignature,
    SigstoreBundle,
)

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
#: The one media type upstream's key and certificate verifiers read (``sign_sigstore_pb._BUNDLE_MEDIA_TYPE``).
_V03 = BUNDLE_MEDIA_TYPES[3]
#: Fulcio's certificate extensions (OIDC issuer, workflow claims): a leaf carrying one is a keyless one.
_FULCIO_ARC = "1.3.6.1.4.1.57264.1."
#: SHA-256 of the Sigstore public-good Fulcio CA certificates (production and staging; their trusted roots
#: are tests/data/model-transparency): as certificate-method anchors they would trust anyone's signature.
_SIGSTORE_FULCIO = frozenset(
    {
        "03a38ffb1f450100c2596d1d10b900ac4d504058006dda58199576bbeb9c73d0",  # sigstore.dev root, 2021
        "3ba7b6cc4e95469d4d334b49cb257ad8537076fa84b0ca87ff4ecfe6a54680c1",  # sigstore.dev root, 2022
        "15d795348226b4649f750f5802592c393bee7cc53c3b86982175b7ad087efe47",  # sigstore.dev intermediate
        "bca21d3cc62c9d6a52be9989e6a705f99e91a39d9114890990789ef75d382b39",  # sigstage.dev root
        "66e08b3881fc311194779aeaad11b70677c316985bf847b6ca2c83d8c5700565",  # sigstage.dev intermediate
    }
)
_KEYLESS_HINT = (
    "a Sigstore keyless signature: trust its signer as modelSigning.keyless (subject, issuer, trustedRoot)"
)
_CURVE_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "secp256r1": hashes.SHA256,
    "secp384r1": hashes.SHA384,
    "secp521r1": hashes.SHA512,
}


def _key_identity(key: CertificatePublicKeyTypes) -> str:
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
    """The certificate method: the trusted certificates, as upstream's ``--certificate_chain`` gives them to
    OpenSSL's store: the self-signed ones are the trust anchors; the others may complete a chain to one."""

    anchors: tuple[x509.Certificate, ...]

    @classmethod
    def from_pem(cls, data: bytes, location: str) -> ModelSigningCertificates:
        """Every certificate of a PEM file; :class:`InputError` when it holds none, does not parse, or holds
        a Sigstore public-good Fulcio CA (which certifies anyone: trust a keyless identity instead)."""
        try:
            anchors = tuple(x509.load_pem_x509_certificates(data))
        except ValueError as error:
            raise InputError(f"not PEM certificates ({error})", location=location) from None
        for certificate in anchors:
            if certificate.fingerprint(hashes.SHA256()).hex() in _SIGSTORE_FULCIO:
                raise InputError(
                    f"{certificate.subject.rfc4514_string()} is a Sigstore Fulcio CA, which certifies "
                    "anyone's OIDC identity: as a certificateChain it would trust every Sigstore signature",
                    location=location,
                    hint=_KEYLESS_HINT,
                )
        return cls(anchors)

    @property
    def roots(self) -> list[x509.Certificate]:
        """The self-signed certificates: the only trust anchors (OpenSSL's store without partial chains)."""
        return [c for c in self.anchors if _self_signed(c)]

    @property
    def others(self) -> list[x509.Certificate]:
        """The trusted certificates that are not self-signed: intermediates a chain may be built through."""
        return [c for c in self.anchors if not _self_signed(c)]

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


def _self_signed(certificate: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _curve_hash(key: object, what: str) -> hashes.HashAlgorithm:
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in _CURVE_HASHES:
        raise InputError(f"{what} is not an ECDSA P-256, P-384 or P-521 key (what model_signing signs with)")
    return _CURVE_HASHES[key.curve.name]()


def _verify_ecdsa(key: ec.EllipticCurvePublicKey, bundle: SigstoreBundle) -> None:
    try:
        key.verify(
            bundle.signature,
            _pae(bundle.payload),
            ec.ECDSA(_curve_hash(key, "the signing key")),
        )
    except InvalidSignature:
        raise VerificationError("the signature does not verify with the signing key") from None


def signing_key(signature: ModelSignature, trust: ModelSigningTrust) -> str:
    """Verify ``signature`` with ``trust``; the identity of the key that signed (``key:<id>``: the trusted
    key, or the leaf certificate's key, keyless too), or :class:`VerificationError` saying why not
    (:class:`InputError` for a key that is not ECDSA)."""
    if isinstance(trust, ModelSigningKeyless):
        return _keyless_signer(signature, trust)
    bundle = signature.bundle
    if bundle.media_type != _V03:
        raise VerificationError(
            f"a bundle of media type {bundle.media_type!r}: the key and certificate methods read "
            f"{_V03} only (as model_signing does)"
            + ("; a keyless one is verified with modelSigning.keyless" if bundle.logged else ""),
        )
    if isinstance(trust, ModelSigningKey):
        if bundle.material != "publicKey":
            raise VerificationError(
                f"the signature carries {bundle.material}, not publicKey: it was not signed with a key"
            )
        key = trust.key
        pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        if bundle.key_hint is not None and bundle.key_hint != hashlib.sha256(pem).hexdigest():
            raise VerificationError("signed with another key (the bundle's key hint is not this key's)")
        _verify_ecdsa(key, bundle)
        return trust.identity
    if bundle.material != "x509CertificateChain":
        kind = {"publicKey": "it was signed with a key", "certificate": _KEYLESS_HINT}[bundle.material]
        raise VerificationError(f"the signature carries {bundle.material}, not x509CertificateChain: {kind}")
    if bundle.logged:
        raise VerificationError(f"the signature carries transparency-log entries: {_KEYLESS_HINT}")
    leaf = _verified_leaf(bundle.chain, trust)
    leaf_key = leaf.public_key()
    if not isinstance(leaf_key, ec.EllipticCurvePublicKey):
        raise VerificationError("the signing certificate's key is not an ECDSA key")
    _verify_ecdsa(leaf_key, bundle)
    return _key_identity(leaf_key)


def _verified_leaf(chain: Sequence[bytes], trust: ModelSigningCertificates) -> x509.Certificate:
    try:
        certificates = [x509.load_der_x509_certificate(der) for der in chain]
        extensions = certificates[0].extensions  # parsed on first use: a malformed one raises here
    except ValueError as error:
        raise VerificationError(f"a certificate of the signature does not parse ({error})") from None
    leaf, intermediates = certificates[0], [*certificates[1:], *trust.others]
    if any(e.oid.dotted_string.startswith(_FULCIO_ARC) for e in extensions):
        raise VerificationError(f"the signing certificate is a Fulcio one: {_KEYLESS_HINT}")
    roots = trust.roots
    if not roots:
        raise VerificationError(
            "no trusted certificate is a self-signed root: an intermediate or a leaf is no trust anchor "
            "(as in model_signing, whose OpenSSL store builds no partial chain)"
        )
    # Upstream's OpenSSL store checks CAs and leaves the leaf's extensions to the usage check below.
    ca_policy = ExtensionPolicy.webpki_defaults_ca().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    verifier = (
        PolicyBuilder()
        .store(Store(roots))
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

    bundle = signature.bundle
    if not bundle.chain:
        raise VerificationError("the signature carries no certificate (it was signed with a key)")
    policy = TrustPolicy(identities=(trust.signer,), trust_root=trust.trust_root)
    result = verify_bundle(
        bundle.raw,
        policy,
        digest=f"sha256:{signature.root_digest}",
        predicate_type=PREDICATE_TYPE,
        location=signature.origin,
    )
    # The statement verified is the one read (the bundle reader also takes proto field names, so a bundle
    # holding two envelopes must not pass one off for the other).
    if result.statement is None or result.statement.predicate != json.loads(bundle.payload)["predicate"]:
        raise VerificationError("the statement verified is not the one the signature lists files from")
    # Counted by the leaf's key, as a certificate-method signature is: one signature is one signer, however
    # many keyless or certificateChain signers it verifies for. verify_bundle read this very leaf (its reader
    # takes exactly one of the bundle's certificate fields, each spelling once), or it would not verify.
    return _key_identity(x509.load_der_x509_certificate(bundle.chain[0]).public_key())
