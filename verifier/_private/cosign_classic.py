"""One classic cosign signature (a layer of the ``sha256-<digest>.sig`` manifest), checked offline.

Order: the signature over the exact payload bytes first (with the trusted keys, else through the Fulcio
certificate for keyless signers), then the Rekor entry, then what the payload claims. Every failure raises
:class:`VerificationError` whose message says what was wrong with this signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Final

from cryptography import x509

from verifier._private import rekor_entry, sigstore_cert
from verifier._private.cosign_payload import check_payload
from verifier._private.sigstore_policy import SignerMatch, TrustPolicy
from verifier.errors import VerificationError
from verifier.keys import InvalidKey, PublicKey

SIMPLE_SIGNING_MEDIA_TYPE: Final = "application/vnd.dev.cosign.simplesigning.v1+json"


def _keyless(
    payload: bytes,
    signature: bytes,
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
        cert_key = PublicKey.from_crypto(leaf.public_key())
    except InvalidKey as error:
        raise VerificationError(f"the signing certificate's key is unusable: {error.message}") from error
    if not cert_key.verify(signature, payload):
        raise VerificationError("the signature does not verify with its certificate's key")
    match = policy.identity_match(leaf)
    if match is None:
        issuer, subjects = sigstore_cert.certificate_identity(leaf)
        raise VerificationError(
            f"the certificate identity {', '.join(subjects) or '(none)'} ({issuer}) is not trusted"
            f" (trusted: {policy.describe()})"
        )
    if rekor_bundle is None:
        raise VerificationError(
            "the keyless signature has no Rekor bundle, so its signing time cannot be established offline"
        )
    entry = rekor_entry.entry_from_cosign_bundle(rekor_bundle)
    rekor_entry.verify_set(entry, trust_root.rekor_logs)
    rekor_entry.check_hashedrekord(
        entry,
        sha256_hex=hashlib.sha256(payload).hexdigest(),
        signature=signature,
        key=cert_key,
        certificate=leaf,
    )
    chain = sigstore_cert.verify_chain(
        leaf, intermediates, trust_root.certificate_authorities, entry.signed_at
    )
    sigstore_cert.verify_sct(leaf, chain[1], trust_root.ct_logs)
    sigstore_cert.check_profile(leaf)
    return match


def verify_classic(
    *,
    payload: bytes,
    media_type: str,
    signature_b64: str,
    certificate: str | None,
    chain: str | None,
    rekor_bundle: str | None,
    image_digest: str,
    repository: str | None,
    policy: TrustPolicy,
) -> tuple[list[SignerMatch], bool]:
    """The trusted signers of one classic signature and whether its Rekor entry was verified."""
    if media_type != SIMPLE_SIGNING_MEDIA_TYPE:
        raise VerificationError(f"media type {media_type!r} is not a cosign simple-signing payload")
    if not signature_b64:
        raise VerificationError("the layer has no dev.cosignproject.cosign/signature annotation")
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError) as error:
        raise VerificationError("the signature annotation is not valid base64") from error
    matches = policy.key_matches({name: key.verify(signature, payload) for name, key in policy.keys.items()})
    tlog_verified = False
    if matches:
        if policy.require_tlog:
            if rekor_bundle is None:
                raise VerificationError("the signature has no Rekor bundle but the policy requires one")
            entry = rekor_entry.entry_from_cosign_bundle(rekor_bundle)
            rekor_entry.verify_set(entry, policy.rekor_logs)
            rekor_entry.check_hashedrekord(
                entry,
                sha256_hex=hashlib.sha256(payload).hexdigest(),
                signature=signature,
                key=policy.keys[matches[0].label],
            )
            tlog_verified = True
    elif certificate is not None:
        matches = [
            _keyless(
                payload,
                signature,
                certificate_pem=certificate,
                chain_pem=chain,
                rekor_bundle=rekor_bundle,
                policy=policy,
            )
        ]
        tlog_verified = True
    else:
        raise VerificationError("signature present but not made by any trusted key")
    check_payload(payload, image_digest=image_digest, repository=repository)
    return matches, tlog_verified
