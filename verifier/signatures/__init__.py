"""Offline verification of cosign-compatible signatures and attestations.

What the registry client fetches is handed in as plain values; nothing here touches the network:

* classic cosign image signatures (:class:`CosignSignature`, one per layer of the ``sha256-<digest>.sig``
  manifest): simple-signing payload, key or keyless (Fulcio certificate + Rekor SET) signers;
* classic cosign blob signatures (``cosign sign-blob``: a signature over the artifact, optionally with a
  certificate and the legacy Rekor bundle);
* Sigstore bundles v0.1-v0.3 (cosign v3 image signatures and attestations, ``cosign sign-blob --bundle``,
  ``cosign attest``): signed with a key, or keyless against a pinned trusted root;
* DSSE attestation envelopes signed with keys.

Every transparency log entry, whichever kind of signature carries it, goes through one check
(``_private/rekor_entry.verify_entry``): the entry records this signature, its signed entry timestamp and its
inclusion proof with the signed checkpoint verify with a trusted log key. ``tlog_verified`` in a result is
True only when that check ran and passed for every counted signature.

A :class:`TrustPolicy` says who may sign and how many distinct signers are needed. Results are
:class:`VerificationResult`; failures raise :class:`VerificationError` (:class:`NoSignatures` when there is
nothing to verify at all) whose message names what failed on each signature.

Everything here is synchronous and CPU-bound (a key signature costs about one ECDSA verification, a keyless
one about 10 ms for the certificate chain): async callers run it with ``asyncio.to_thread``.

The names below load on first use (module ``__getattr__``): a policy that trusts only keys never imports the
Sigstore, Notation or RFC 3161 code, which keeps ``trtguard check`` quick to start (issue 15).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifier.crypto import MAX_SIGNATURES
    from verifier.signatures._openpgp import (
        MAX_SIGNATURE_BYTES,
        OpenPGPKey,
        SignatureCheck,
        check_signatures,
        keyring_of,
        not_verified,
        read_keyring,
        read_signatures,
        verify_detached,
    )
    from verifier.signatures._policy import KeylessIdentity, SignerMatch, TrustPolicy
    from verifier.signatures._results import (
        BUNDLE_ANNOTATION,
        BUNDLE_MEDIA_TYPE,
        CERTIFICATE_ANNOTATION,
        CHAIN_ANNOTATION,
        COSIGN_SIGN_PREDICATE,
        SIGNATURE_ANNOTATION,
        SIMPLE_SIGNING_MEDIA_TYPE,
        CosignSignature,
        CountedSignature,
        LoggedCheck,
        NoSignatures,
        VerificationResult,
    )
    from verifier.signatures._trust import TrustRoot
    from verifier.signatures._verify import (
        verify_attestation,
        verify_blob_signature,
        verify_bundle,
        verify_image_signatures,
    )
    from verifier.signatures.notation import NotationSignature

#: Where each public name lives.
_HOMES: dict[str, str] = {
    "MAX_SIGNATURES": "verifier.crypto._dsse",
    **dict.fromkeys(
        (
            "MAX_SIGNATURE_BYTES",
            "OpenPGPKey",
            "SignatureCheck",
            "check_signatures",
            "keyring_of",
            "not_verified",
            "read_keyring",
            "read_signatures",
            "verify_detached",
        ),
        "verifier.signatures._openpgp",
    ),
    **dict.fromkeys(("KeylessIdentity", "SignerMatch", "TrustPolicy"), "verifier.signatures._policy"),
    **dict.fromkeys(
        (
            "BUNDLE_ANNOTATION",
            "BUNDLE_MEDIA_TYPE",
            "CERTIFICATE_ANNOTATION",
            "CHAIN_ANNOTATION",
            "COSIGN_SIGN_PREDICATE",
            "SIGNATURE_ANNOTATION",
            "SIMPLE_SIGNING_MEDIA_TYPE",
            "CosignSignature",
            "CountedSignature",
            "LoggedCheck",
            "NoSignatures",
            "VerificationResult",
        ),
        "verifier.signatures._results",
    ),
    "TrustRoot": "verifier.signatures._trust",
    **dict.fromkeys(
        ("verify_attestation", "verify_blob_signature", "verify_bundle", "verify_image_signatures"),
        "verifier.signatures._verify",
    ),
    "NotationSignature": "verifier.signatures.notation",
}

__all__ = [
    "BUNDLE_ANNOTATION",
    "BUNDLE_MEDIA_TYPE",
    "CERTIFICATE_ANNOTATION",
    "CHAIN_ANNOTATION",
    "COSIGN_SIGN_PREDICATE",
    "MAX_SIGNATURES",
    "MAX_SIGNATURE_BYTES",
    "SIGNATURE_ANNOTATION",
    "SIMPLE_SIGNING_MEDIA_TYPE",
    "CosignSignature",
    "CountedSignature",
    "KeylessIdentity",
    "LoggedCheck",
    "NoSignatures",
    "NotationSignature",
    "OpenPGPKey",
    "SignatureCheck",
    "SignerMatch",
    "TrustPolicy",
    "TrustRoot",
    "VerificationResult",
    "check_signatures",
    "keyring_of",
    "not_verified",
    "read_keyring",
    "read_signatures",
    "verify_attestation",
    "verify_blob_signature",
    "verify_bundle",
    "verify_detached",
    "verify_image_signatures",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
