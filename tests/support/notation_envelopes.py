"""Notary Project envelopes built here from the envelope specifications (signature-envelope-jws.md,
signature-envelope-cose.md), with any headers a test wants, signed for real with the key given: what
``sign_notation`` would never write (a chain in the protected COSE header, a hostile ``crit``, another
descriptor), for the verifier's tests, the fuzzing and the conformance harness."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import cbor2
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from verifier.crypto._keys import PrivateKey
from verifier.signatures.notation import PAYLOAD_CONTENT_TYPE
from verifier.signatures.notation._sign import _raw_signature

COSE_ALGORITHMS = {"PS256": -37, "PS384": -38, "PS512": -39, "ES256": -7, "ES384": -35, "ES512": -36}
SCHEME = "io.cncf.notary.signingScheme"
SIGNING_TIME = "io.cncf.notary.signingTime"
EXPIRY = "io.cncf.notary.expiry"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def payload(descriptor: Mapping[str, Any]) -> bytes:
    """The Notary payload ``{"targetArtifact": descriptor}``."""
    return json.dumps({"targetArtifact": dict(descriptor)}, separators=(",", ":")).encode()


def jws_headers(alg: str, signed: datetime, **extra: Any) -> dict[str, Any]:
    """The protected headers ``notation sign`` writes for the ``notary.x509`` scheme."""
    return {
        "alg": alg,
        "crit": [SCHEME],
        "cty": PAYLOAD_CONTENT_TYPE,
        SCHEME: "notary.x509",
        SIGNING_TIME: signed.isoformat().replace("+00:00", "Z"),
    } | extra


def cose_headers(alg: str, signed: datetime, **extra: Any) -> dict[Any, Any]:
    """The protected headers of a COSE envelope, labels as the specification gives them."""
    headers: dict[Any, Any] = {
        1: COSE_ALGORITHMS[alg],
        2: [SCHEME],
        3: PAYLOAD_CONTENT_TYPE,
        SCHEME: "notary.x509",
        SIGNING_TIME: cbor2.CBORTag(1, int(signed.timestamp())),
    }
    headers.update(extra)
    return headers


def der(chain: Sequence[x509.Certificate]) -> list[bytes]:
    return [certificate.public_bytes(Encoding.DER) for certificate in chain]


def jws(
    key: PrivateKey,
    chain: Sequence[x509.Certificate],
    protected: Mapping[str, Any],
    body: bytes,
    *,
    unprotected: Mapping[str, Any] | None = None,
    alg: str | None = None,
) -> bytes:
    """A flattened JWS over exactly these headers and payload, signed with ``key`` under ``alg``."""
    header = b64url(json.dumps(dict(protected)).encode())
    encoded = b64url(body)
    signature = _raw_signature(key, alg or str(protected["alg"]), f"{header}.{encoded}".encode())
    plain = {"x5c": [base64.b64encode(d).decode() for d in der(chain)]} | dict(unprotected or {})
    document = {"payload": encoded, "protected": header, "header": plain, "signature": b64url(signature)}
    return json.dumps(document).encode()


def cose(
    key: PrivateKey,
    chain: Sequence[x509.Certificate],
    protected: Mapping[Any, Any],
    body: bytes,
    *,
    unprotected: Mapping[Any, Any] | None = None,
    alg: str,
    chain_protected: bool = False,
) -> bytes:
    """A tagged COSE_Sign1 over these headers and payload; ``chain_protected`` puts ``x5chain`` (33) into the
    protected header, as the COSE envelope specification allows."""
    headers = dict(protected)
    plain: dict[Any, Any] = dict(unprotected or {})
    (headers if chain_protected else plain)[33] = der(chain)
    raw = cbor2.dumps(headers)
    signature = _raw_signature(key, alg, cbor2.dumps(["Signature1", raw, b"", body]))
    return cbor2.dumps(cbor2.CBORTag(18, [raw, plain, body, signature]))
