"""Classic cosign signatures (a layer of the ``sha256-<digest>.sig`` manifest, or a ``cosign sign-blob``
signature), checked offline.

Order: the signature over the exact signed bytes first (with the trusted keys, else through the Fulcio
certificate for keyless signers), then the Rekor entry (its signed entry timestamp: classic signatures carry
no inclusion proof), then, for images, what the payload claims. Every failure raises
:class:`VerificationError` whose message says what was wrong with this signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from datetime import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes

from verifier.base import VerificationError
from verifier.crypto import InvalidKey, PublicKey
from verifier.signatures import _certificate as sigstore_cert
from verifier.signatures import _rekor as rekor_entry
from verifier.signatures._policy import SignerMatch, TrustPolicy
from verifier.signatures._rekor import LoggedSignature
from verifier.signatures._results import SIMPLE_SIGNING_MEDIA_TYPE, CosignSignature
from verifier.signatures._simple_signing import check_payload


def _verifies(key: PublicKey, signature: bytes, data: bytes | None, sha256: bytes) -> bool:
    """``signature`` by ``key`` over ``data``, or over the artifact whose SHA-256 is ``sha256``."""
    if data is not None:
        return key.verify(signature, data)
    return key.verify_digest(signature, sha256, hashes.SHA256())


def _logged(
    rekor_bundle: str | None, logged: LoggedSignature, policy: TrustPolicy, *, missing: str
) -> datetime:
    """Verify the classic Rekor bundle (a promise, no proof); return the integrated time it signs."""
    if rekor_bundle is None:
        raise VerificationError(missing)
    promised_time = rekor_entry.verify_entry(
        rekor_entry.entry_from_cosign_bundle(rekor_bundle),
        policy.rekor_logs,
        logged,
        require_promise=True,
        require_proof=False,
    )
    if promised_time is None:  # the promise is required above
        raise VerificationError("the Rekor entry has no signed entry timestamp")
    return promised_time


def _keyless(
    signature: bytes,
    data: bytes | None,
    sha256: bytes,
    *,
    certificate_pem: str,
    chain_pem: str | None,
    rekor_bundle: str | None,
    policy: TrustPolicy,
) -> SignerMatch:
    trust_root = policy.trust_root
    if trust_root is None or not policy.identities:
        raise VerificationError("signature present but not made by any trusted key")
    try:
        leaf = x509.load_pem_x509_certificate(certificate_pem.encode())
        intermediates = x509.load_pem_x509_certificates(chain_pem.encode()) if chain_pem else []
    except ValueError as error:
        raise VerificationError("the signature's certificate or chain does not parse") from error
    try:
        cert_key = PublicKey.from_certificate(leaf)
    except InvalidKey as error:
        raise VerificationError(f"the signing certificate's key is unusable: {error.message}") from error
    if not _verifies(cert_key, signature, data, sha256):
        raise VerificationError("the signature does not verify with its certificate's key")
    match = policy.trusted_identity(leaf)
    signed_at = _logged(
        rekor_bundle,
        LoggedSignature(signature=signature, key=cert_key, certificate=leaf, artifact_sha256=sha256),
        policy,
        missing="the keyless signature has no Rekor bundle, so its signing time cannot be established "
        "offline",
    )
    chain = sigstore_cert.verify_chain(leaf, intermediates, trust_root.certificate_authorities, signed_at)
    sigstore_cert.verify_sct(leaf, chain[1], trust_root.ct_logs)
    sigstore_cert.check_profile(leaf)
    return match


def decode_signature(signature_b64: str) -> bytes:
    """The signature bytes of a base64 signature annotation (or ``cosign sign-blob`` output)."""
    if not signature_b64:
        raise VerificationError("the layer has no dev.cosignproject.cosign/signature annotation")
    try:
        return base64.b64decode(signature_b64.strip(), validate=True)
    except (binascii.Error, ValueError) as error:
        raise VerificationError("the signature annotation is not valid base64") from error


def verify_signed(
    signature: bytes,
    *,
    data: bytes | None,
    sha256: bytes,
    certificate: str | None,
    chain: str | None,
    rekor_bundle: str | None,
    policy: TrustPolicy,
) -> tuple[list[SignerMatch], bool]:
    """The trusted signers of ``signature`` over ``data`` (or, given only its SHA-256, over the artifact whose
    digest is ``sha256``), and whether its Rekor entry was verified."""
    matches = policy.key_matches(
        {name: _verifies(key, signature, data, sha256) for name, key in policy.keys.items()}
    )
    if matches:
        if not policy.require_tlog:
            return matches, False
        key = policy.keys[matches[0].label]
        _logged(
            rekor_bundle,
            LoggedSignature(signature=signature, key=key, artifact_sha256=sha256),
            policy,
            missing="the signature has no Rekor bundle but the policy requires one",
        )
        return matches, True
    if certificate is None:
        raise VerificationError("signature present but not made by any trusted key")
    match = _keyless(
        signature,
        data,
        sha256,
        certificate_pem=certificate,
        chain_pem=chain,
        rekor_bundle=rekor_bundle,
        policy=policy,
    )
    return [match], True


def verify_classic(
    signature: CosignSignature,
    *,
    image_digest: str,
    repository: str | None,
    policy: TrustPolicy,
) -> tuple[list[SignerMatch], bool]:
    """The trusted signers of one classic image signature and whether its Rekor entry was verified."""
    if signature.media_type != SIMPLE_SIGNING_MEDIA_TYPE:
        raise VerificationError(f"media type {signature.media_type!r} is not a cosign simple-signing payload")
    result = verify_signed(
        decode_signature(signature.signature),
        data=signature.payload,
        sha256=hashlib.sha256(signature.payload).digest(),
        certificate=signature.certificate,
        chain=signature.chain,
        rekor_bundle=signature.rekor_bundle,
        policy=policy,
    )
    check_payload(signature.payload, image_digest=image_digest, repository=repository)
    return result
