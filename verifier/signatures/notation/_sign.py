"""Making Notary Project signatures (``notary.x509`` scheme) over an OCI descriptor, as Notation does.

The envelope is what ``notation sign`` writes: JWS flattened JSON (``application/jose+json``) or a tagged
COSE_Sign1 (``application/cose``), with the signing time, an optional expiry, the ``crit`` list, the payload
``{"targetArtifact": descriptor}`` and the certificate chain (leaf first) in ``x5c`` / ``x5chain``. The
algorithm follows the key, as the verifier requires.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import cbor2
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from verifier.base import InputError, VerificationError
from verifier.crypto import PrivateKey
from verifier.signatures.notation._envelope import (
    COSE_MEDIA_TYPE,
    EXPIRY,
    JWS_MEDIA_TYPE,
    PAYLOAD_CONTENT_TYPE,
    SCHEME_X509,
    SIGNING_SCHEME,
    SIGNING_TIME,
    algorithm_for,
)

__all__ = ["sign_notation"]

_COSE_IDS = {"PS256": -37, "PS384": -38, "PS512": -39, "ES256": -7, "ES384": -35, "ES512": -36}
_HASHES = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}
_AGENT = "trtguard"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _raw_signature(key: PrivateKey, algorithm: str, message: bytes) -> bytes:
    crypto = key.crypto
    digest = _HASHES[algorithm[2:]]
    if isinstance(crypto, rsa.RSAPrivateKey):
        return crypto.sign(
            message, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest
        )
    if isinstance(crypto, ec.EllipticCurvePrivateKey):
        r, s = utils.decode_dss_signature(crypto.sign(message, ec.ECDSA(digest)))
        size = (crypto.curve.key_size + 7) // 8
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    raise InputError("Notary Project signatures need an RSA or ECDSA key", hint="Ed25519 is not in the spec")


def sign_notation(
    descriptor: Mapping[str, Any],
    key: PrivateKey,
    chain: Sequence[x509.Certificate],
    *,
    media_type: str = JWS_MEDIA_TYPE,
    signing_time: datetime | None = None,
    expiry: datetime | None = None,
) -> bytes:
    """The envelope of a signature by ``key`` (certified by ``chain[0]``) over the OCI ``descriptor``.

    ``descriptor`` is the signed artifact's ``{mediaType, digest, size}``. Raises :class:`InputError` when
    the key does not belong to the certificate or is not one the Notary Project allows.
    """
    if not chain:
        raise InputError("a Notary Project signature needs the signing certificate")
    if (
        chain[0].public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        != key.public_key().to_der()
    ):
        raise InputError("the private key does not belong to the signing certificate")
    try:
        algorithm = algorithm_for(chain[0])
    except VerificationError as error:
        raise InputError(error.message) from error
    moment = (signing_time or datetime.now(UTC)).replace(microsecond=0)
    payload = json.dumps({"targetArtifact": dict(descriptor)}, separators=(",", ":")).encode()
    critical = [SIGNING_SCHEME] + ([EXPIRY] if expiry is not None else [])
    ders = [certificate.public_bytes(Encoding.DER) for certificate in chain]
    if media_type == JWS_MEDIA_TYPE:
        protected: dict[str, Any] = {
            "alg": algorithm,
            "crit": critical,
            "cty": PAYLOAD_CONTENT_TYPE,
            SIGNING_SCHEME: SCHEME_X509,
            SIGNING_TIME: moment.isoformat().replace("+00:00", "Z"),
        }
        if expiry is not None:
            protected[EXPIRY] = expiry.replace(microsecond=0).isoformat().replace("+00:00", "Z")
        header = _b64url(json.dumps(protected, separators=(",", ":")).encode())
        body = _b64url(payload)
        signature = _raw_signature(key, algorithm, f"{header}.{body}".encode())
        envelope = {
            "payload": body,
            "protected": header,
            "header": {
                "x5c": [base64.b64encode(d).decode() for d in ders],
                "io.cncf.notary.signingAgent": _AGENT,
            },
            "signature": _b64url(signature),
        }
        return json.dumps(envelope, separators=(",", ":")).encode()
    if media_type == COSE_MEDIA_TYPE:
        headers: dict[Any, Any] = {
            1: _COSE_IDS[algorithm],
            2: critical,
            3: PAYLOAD_CONTENT_TYPE,
            SIGNING_SCHEME: SCHEME_X509,
            SIGNING_TIME: cbor2.CBORTag(1, int(moment.timestamp())),
        }
        if expiry is not None:
            headers[EXPIRY] = cbor2.CBORTag(1, int(expiry.timestamp()))
        raw_protected = cbor2.dumps(headers)
        signature = _raw_signature(key, algorithm, cbor2.dumps(["Signature1", raw_protected, b"", payload]))
        unprotected = {33: ders if len(ders) > 1 else ders[0], "io.cncf.notary.signingAgent": _AGENT}
        return cbor2.dumps(cbor2.CBORTag(18, [raw_protected, unprotected, payload, signature]))
    raise InputError(f"envelope media type {media_type!r} is not {JWS_MEDIA_TYPE} or {COSE_MEDIA_TYPE}")
