"""Documents of an attestation folder that carry an image signature outside a DSSE statement.

A classic cosign signature is one layer of a ``sha256-<hex>.sig`` manifest: a simple-signing payload blob
and the annotations beside it. In a folder (and in an evidence package) it is one JSON document holding the
payload in base64 and the annotations by name (:func:`classic_signature_document`). It, and a Sigstore
message-signature bundle, are kept under the image digest they name (:func:`signed_image_digest`,
:func:`message_digest`), unverified: verifying the signature compares that digest again.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, Final

from verifier.base import InputError, is_sha256_hex
from verifier.signatures import CosignSignature

__all__ = [
    "CLASSIC_SIGNATURE_KEYS",
    "classic_signature_document",
    "classic_signature_from_document",
    "message_digest",
    "signed_image_digest",
]

#: The keys of a classic cosign signature document: one layer of a ``.sig`` manifest, its payload in base64.
CLASSIC_SIGNATURE_KEYS: Final = frozenset(
    {"payload", "signature", "media_type", "certificate", "chain", "rekor_bundle"}
)


def classic_signature_document(signature: CosignSignature) -> bytes:
    """A classic signature as a file of an attestation folder or an evidence package (JSON, then a newline):
    the layer's payload blob in base64 and the layer's media type and annotations by name."""
    document = {
        "payload": base64.b64encode(signature.payload).decode(),
        "signature": signature.signature,
        "media_type": signature.media_type,
        "certificate": signature.certificate,
        "chain": signature.chain,
        "rekor_bundle": signature.rekor_bundle,
    }
    return json.dumps(document, indent=1).encode() + b"\n"


def classic_signature_from_document(document: Mapping[str, Any], location: str) -> CosignSignature:
    """The signature a :func:`classic_signature_document` holds; raises :class:`InputError` if malformed."""
    if set(document) != CLASSIC_SIGNATURE_KEYS:
        raise InputError(
            f"a classic signature document has exactly the keys {', '.join(sorted(CLASSIC_SIGNATURE_KEYS))}",
            location=location,
        )
    texts = {key: document[key] for key in ("signature", "media_type")}
    optional = {key: document[key] for key in ("certificate", "chain", "rekor_bundle")}
    if not all(isinstance(value, str) for value in texts.values()) or not all(
        value is None or isinstance(value, str) for value in optional.values()
    ):
        raise InputError("a classic signature document has a field of the wrong type", location=location)
    try:
        payload = base64.b64decode(str(document["payload"]), validate=True)
    except (binascii.Error, ValueError):
        raise InputError("the classic signature's payload is not base64", location=location) from None
    return CosignSignature(payload=payload, **texts, **optional)


def signed_image_digest(payload: bytes) -> str | None:
    """The image digest a simple-signing payload names (unverified: the signature check compares it)."""
    try:
        digest = json.loads(payload)["critical"]["image"]["docker-manifest-digest"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    if isinstance(digest, str) and digest.startswith("sha256:") and is_sha256_hex(digest[7:]):
        return digest
    return None


def message_digest(document: Mapping[str, Any]) -> str | None:
    """The ``sha256:`` digest a message-signature bundle signs, or None (another algorithm, malformed)."""
    try:
        found = document["messageSignature"]["messageDigest"]
        if found["algorithm"] != "SHA2_256":
            return None
        raw = base64.b64decode(found["digest"], validate=True)
    except (KeyError, TypeError, binascii.Error, ValueError):
        return None
    return f"sha256:{raw.hex()}" if len(raw) == 32 else None
