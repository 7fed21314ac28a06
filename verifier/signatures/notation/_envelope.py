"""Notary Project signature envelopes (JWS and COSE) read into one :class:`SignerInfo`, integrity checked.

JWS (``application/jose+json``, flattened JSON serialization) is parsed once and its signing input
(RFC 7515 §5.2: ``BASE64URL(protected) || '.' || BASE64URL(payload)``) verified with ``cryptography``;
COSE_Sign1 (``application/cose``) is decoded with cbor2 and its ``Sig_structure`` (RFC 9052 §4.4) verified
with ``cryptography`` (pycose cannot read these envelopes: docs/signatures.md). An envelope is at most
:data:`MAX_ENVELOPE_BYTES` (real ones are a few KiB: a chain of up to :data:`MAX_CHAIN` certificates and a
timestamp token). Either way, what generic libraries leave to the caller is checked here, as
notation-core-go does:

* the algorithm must be the one the signing key calls for (RSA-2048/3072/4096 → PS256/384/512, P-256/384/521
  → ES256/384/512): an RSA-3072 certificate with a PS256 signature fails;
* ``crit`` must list the signing scheme, and the expiry and authentic signing time when present; any other
  critical header (an extension) fails;
* a signature that names a verification plugin (``io.cncf.notary.verificationPlugin`` or
  ``…verificationPluginMinVersion`` in the protected header) fails whether ``crit`` lists it or not:
  trtguard runs no plugins, notation-go refuses such a signature without its plugin and refuses the header
  outright when it is not marked critical (``verifier/helpers.go``);
* the signing scheme is ``notary.x509`` (with ``signingTime``) or ``notary.x509.signingAuthority`` (with
  ``authenticSigningTime``, not ``signingTime``); the expiry, when present, is after the signing time;
* the content type is the Notary payload, and the payload's ``targetArtifact`` is a descriptor (media type,
  digest and size; the verifier compares all three with the artifact's);
* the certificate chain (``x5c``; COSE ``x5chain``, unprotected or, as the COSE envelope specification
  allows, protected) is a list of DER certificates.

Every value is type-checked before it is used: a hostile envelope fails as itself (``VerificationError``),
never as a crash of whatever reads it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import cbor2
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

from verifier.base import VerificationError
from verifier.signatures.notation._stores import CERTIFICATE_ERRORS, parsed

__all__ = [
    "AUTHENTIC_SIGNING_TIME",
    "COSE_MEDIA_TYPE",
    "EXPIRY",
    "JWS_MEDIA_TYPE",
    "MAX_ENVELOPE_BYTES",
    "PAYLOAD_CONTENT_TYPE",
    "PLUGIN_HEADERS",
    "SCHEME_SIGNING_AUTHORITY",
    "SCHEME_X509",
    "SIGNING_SCHEME",
    "SIGNING_TIME",
    "TIMESTAMP_SIGNATURE",
    "SignerInfo",
    "TargetArtifact",
    "algorithm_for",
    "read_envelope",
]

JWS_MEDIA_TYPE: Final = "application/jose+json"
COSE_MEDIA_TYPE: Final = "application/cose"
PAYLOAD_CONTENT_TYPE: Final = "application/vnd.cncf.notary.payload.v1+json"
SIGNING_SCHEME: Final = "io.cncf.notary.signingScheme"
SIGNING_TIME: Final = "io.cncf.notary.signingTime"
EXPIRY: Final = "io.cncf.notary.expiry"
AUTHENTIC_SIGNING_TIME: Final = "io.cncf.notary.authenticSigningTime"
TIMESTAMP_SIGNATURE: Final = "io.cncf.notary.timestampSignature"
SCHEME_X509: Final = "notary.x509"
SCHEME_SIGNING_AUTHORITY: Final = "notary.x509.signingAuthority"

#: Certificates a chain may have (leaf, intermediates, root; real ones have two to four).
MAX_CHAIN: Final = 10
#: The largest envelope read (bytes): a few KiB is usual; a ten-certificate chain and a timestamp token with
#: its TSA chain stay far below. A larger one fails as itself, before it is parsed.
MAX_ENVELOPE_BYTES: Final = 1024 * 1024
_NOTARY_HEADERS: Final = (SIGNING_SCHEME, SIGNING_TIME, EXPIRY, AUTHENTIC_SIGNING_TIME)
#: Each signing scheme's header with the signing time, and the other time header, which it must not have.
_SCHEME_TIMES: Final = {
    SCHEME_X509: (SIGNING_TIME, AUTHENTIC_SIGNING_TIME),
    SCHEME_SIGNING_AUTHORITY: (AUTHENTIC_SIGNING_TIME, SIGNING_TIME),
}
#: The extended attributes that make a signature need a verification plugin (the Notary Project signature
#: specification, "Extended attributes for Notation plugins").
PLUGIN_HEADERS: Final = ("io.cncf.notary.verificationPlugin", "io.cncf.notary.verificationPluginMinVersion")
_COSE_ALGORITHMS: Final = {-37: "PS256", -38: "PS384", -39: "PS512", -7: "ES256", -35: "ES384", -36: "ES512"}
_HASHES: Final = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}
_CURVES: Final = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_RSA_SIZES: Final = {2048: "PS256", 3072: "PS384", 4096: "PS512"}
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
_COSE_ALG, _COSE_CRIT, _COSE_CONTENT_TYPE, _COSE_X5CHAIN = 1, 2, 3, 33


@dataclass(frozen=True, slots=True)
class TargetArtifact:
    """The signed payload's ``targetArtifact``: the descriptor of what was signed."""

    media_type: str
    digest: str
    size: int


@dataclass(frozen=True, slots=True)
class SignerInfo:
    """What a verified envelope says (its signature over ``payload`` checked with the leaf's key)."""

    media_type: str
    algorithm: str  # "PS256", …
    scheme: str
    signing_time: datetime  # signingTime, or authenticSigningTime for the signing-authority scheme
    expiry: datetime | None
    payload: bytes
    target: TargetArtifact
    certificates: tuple[x509.Certificate, ...]  # leaf first
    signature: bytes
    timestamp_token: bytes | None


def algorithm_for(certificate: x509.Certificate) -> str:
    """The only signature algorithm Notation allows for the certificate's key (``VerificationError`` else)."""
    try:
        key = certificate.public_key()
    except (ValueError, UnsupportedAlgorithm) as error:
        raise VerificationError(f"the signing certificate's key is unusable ({error})") from error
    if isinstance(key, rsa.RSAPublicKey) and key.key_size in _RSA_SIZES:
        return _RSA_SIZES[key.key_size]
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in _CURVES:
        return _CURVES[key.curve.name]
    raise VerificationError(
        "the signing certificate's key is not RSA 2048/3072/4096 or ECDSA P-256/384/521, which the Notary "
        "Project signature specification requires"
    )


def _time(value: Any, name: str) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise VerificationError(f"{name} {value!r} is not an RFC 3339 time") from None
    else:
        raise VerificationError(f"{name} is not a time")
    if moment.tzinfo is None:
        raise VerificationError(f"{name} has no time zone")
    return moment


def _check_headers(
    protected: Mapping[Any, Any], crit: Any, content_type: Any
) -> tuple[str, datetime, datetime | None]:
    """The signing scheme, (authentic) signing time and expiry, after the rules on ``crit`` and the scheme."""
    if content_type != PAYLOAD_CONTENT_TYPE:
        raise VerificationError(f"the content type is {content_type!r}, not {PAYLOAD_CONTENT_TYPE}")
    if not isinstance(crit, list | tuple) or not crit:
        raise VerificationError('the protected header has no "crit" list')
    if not all(isinstance(name, str | int) and not isinstance(name, bool) for name in crit):
        raise VerificationError('"crit" lists something other than header names')
    scheme = protected.get(SIGNING_SCHEME)
    # A decoded header can be a list or a map (unhashable): only a string names a scheme.
    if not isinstance(scheme, str) or scheme not in _SCHEME_TIMES:
        raise VerificationError(
            f"signing scheme {scheme!r} is not {SCHEME_X509} or {SCHEME_SIGNING_AUTHORITY}"
        )
    time_header, other = _SCHEME_TIMES[scheme]
    if other in protected:
        raise VerificationError(f"{other} must not be present for {scheme}")
    if time_header not in protected:
        raise VerificationError(f"{time_header} is missing for {scheme}")
    signing_time = _time(protected[time_header], time_header)
    expiry = _time(protected[EXPIRY], EXPIRY) if EXPIRY in protected else None
    if expiry is not None and expiry <= signing_time:
        raise VerificationError("the expiry is not after the signing time")
    required = {SIGNING_SCHEME} | ({EXPIRY} if expiry is not None else set())
    if scheme == SCHEME_SIGNING_AUTHORITY:
        required.add(AUTHENTIC_SIGNING_TIME)
    plugin = [name for name in PLUGIN_HEADERS if name in protected]
    if plugin:
        named = ", ".join(f"{name}={protected[name]!r}" for name in plugin)
        raise VerificationError(
            f"the signature requires a verification plugin ({named}"
            f"{', not marked critical' if set(plugin) - set(crit) else ''}); trtguard runs no plugins, so "
            "such a signature never verifies (Notation refuses it too without the plugin)"
        )
    listed = set(crit)
    if len(listed) != len(crit):
        raise VerificationError('"crit" lists a header twice')
    unmarked = sorted(required - listed)
    if unmarked:
        raise VerificationError(f"required headers are not marked critical: {', '.join(unmarked)}")
    unknown = sorted(str(name) for name in listed - required)
    if unknown:
        raise VerificationError(
            f"critical header(s) trtguard does not understand: {', '.join(unknown)} (verification plugins "
            "and "
            "extended critical attributes are not supported)"
        )
    return scheme, signing_time, expiry


def _target(payload: bytes) -> TargetArtifact:
    try:
        document = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise VerificationError("the payload is not JSON") from None
    target = document.get("targetArtifact") if isinstance(document, dict) else None
    if not isinstance(target, dict):
        raise VerificationError("the payload is not a Notary payload with a targetArtifact descriptor")
    media_type, digest, size = target.get("mediaType"), target.get("digest"), target.get("size")
    if not (isinstance(media_type, str) and isinstance(digest, str)):
        raise VerificationError("targetArtifact lacks its mediaType or digest (strings)")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise VerificationError("targetArtifact.size is not a non-negative integer")
    return TargetArtifact(media_type, digest, size)


def _certificates(chain: Any) -> tuple[x509.Certificate, ...]:
    if isinstance(chain, bytes):
        chain = [chain]
    if not isinstance(chain, list | tuple) or not chain or not all(isinstance(c, bytes) for c in chain):
        raise VerificationError("the envelope carries no certificate chain")
    if len(chain) > MAX_CHAIN:
        raise VerificationError(f"the certificate chain has {len(chain)} certificates; at most {MAX_CHAIN}")
    try:
        return tuple(parsed(x509.load_der_x509_certificate(der)) for der in chain)
    except CERTIFICATE_ERRORS as error:
        raise VerificationError(f"a certificate of the envelope does not parse ({error})") from None


def _b64(text: Any, what: str, *, url: bool) -> bytes:
    if not isinstance(text, str):
        raise VerificationError(f"{what} is not a string")
    if url and _BASE64URL.fullmatch(text) is None:
        # RFC 7515 base64url has no padding and no other characters; decoders that skip them would verify
        # bytes other than the ones signed.
        raise VerificationError(f"{what} is not unpadded base64url")
    try:
        if url:
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise VerificationError(f"{what} is not base64") from None


def _read_jws(data: bytes) -> SignerInfo:
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise VerificationError("the JWS envelope is not JSON") from None
    if not isinstance(document, dict) or set(document) != {"payload", "protected", "header", "signature"}:
        raise VerificationError(
            "the JWS envelope is not a flattened JSON serialization with an unprotected header"
        )
    payload = _b64(document["payload"], "the JWS payload", url=True)
    raw_protected = _b64(document["protected"], "the JWS protected header", url=True)
    signature = _b64(document["signature"], "the JWS signature", url=True)
    header = document["header"]
    if not isinstance(header, dict):
        raise VerificationError("the JWS unprotected header is not an object")
    chain = header.get("x5c")
    if not isinstance(chain, list):
        raise VerificationError("the envelope carries no certificate chain (x5c)")
    certificates = _certificates([_b64(c, "x5c", url=False) for c in chain])
    try:
        protected = json.loads(raw_protected)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise VerificationError("the JWS protected header is not JSON") from None
    if not isinstance(protected, dict):
        raise VerificationError("the JWS protected header is not an object")
    if set(protected) & set(header):
        raise VerificationError("a header is both protected and unprotected")
    headers = _check_headers(protected, protected.get("crit"), protected.get("cty"))
    algorithm = algorithm_for(certificates[0])
    if protected.get("alg") != algorithm:
        raise VerificationError(
            f"the signature algorithm is {protected.get('alg')!r}, but the signing key calls for {algorithm}"
        )
    # The signing input is the envelope's own base64url text, exactly as carried (RFC 7515 §5.2).
    signing_input = f"{document['protected']}.{document['payload']}".encode("ascii")
    if not _verify_raw(certificates[0], algorithm, signature, signing_input):
        raise VerificationError("the JWS signature does not verify")
    stamp = header.get(TIMESTAMP_SIGNATURE)
    token = _b64(stamp, TIMESTAMP_SIGNATURE, url=False) if stamp is not None else None
    return _signer_info(JWS_MEDIA_TYPE, algorithm, headers, payload, certificates, signature, token)


def _signer_info(
    media_type: str,
    algorithm: str,
    headers: tuple[str, datetime, datetime | None],
    payload: bytes,
    certificates: tuple[x509.Certificate, ...],
    signature: bytes,
    timestamp_token: bytes | None,
) -> SignerInfo:
    """What an envelope of either format says, once its signature verified: ``headers`` are
    :func:`_check_headers`'s (scheme, signing time, expiry)."""
    scheme, signing_time, expiry = headers
    return SignerInfo(
        media_type=media_type,
        algorithm=algorithm,
        scheme=scheme,
        signing_time=signing_time,
        expiry=expiry,
        payload=payload,
        target=_target(payload),
        certificates=certificates,
        signature=signature,
        timestamp_token=timestamp_token,
    )


def _verify_raw(certificate: x509.Certificate, algorithm: str, signature: bytes, message: bytes) -> bool:
    key = certificate.public_key()
    digest = _HASHES[algorithm[2:]]
    try:
        if isinstance(key, rsa.RSAPublicKey):
            salt = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            key.verify(signature, message, salt, digest)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            size = (key.curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                return False
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            key.verify(utils.encode_dss_signature(r, s), message, ec.ECDSA(digest))
        else:
            return False
    except InvalidSignature:
        return False
    return True


def _read_cose(data: bytes) -> SignerInfo:
    try:
        message = cbor2.loads(data)
    except (cbor2.CBORDecodeError, ValueError, RecursionError):
        raise VerificationError("the COSE envelope is not CBOR") from None
    if not (isinstance(message, cbor2.CBORTag) and message.tag == 18):
        raise VerificationError("the COSE envelope is not a tagged COSE_Sign1 message")
    parts = message.value
    if not (isinstance(parts, list | tuple) and len(parts) == 4):
        raise VerificationError("the COSE_Sign1 message does not have four parts")
    raw_protected, unprotected, payload, signature = parts
    if not (isinstance(raw_protected, bytes) and isinstance(unprotected, Mapping)):
        raise VerificationError("the COSE headers are malformed")
    if not (isinstance(payload, bytes) and isinstance(signature, bytes)):
        raise VerificationError(
            "the COSE payload or signature is not a byte string (detached payloads are refused)"
        )
    try:
        protected = cbor2.loads(raw_protected)
    except (cbor2.CBORDecodeError, ValueError, RecursionError):
        raise VerificationError("the COSE protected header is not CBOR") from None
    if not isinstance(protected, dict):
        raise VerificationError("the COSE protected header is not a map")
    if set(protected) & set(unprotected):
        raise VerificationError("a header is both protected and unprotected")
    headers = _check_headers(protected, protected.get(_COSE_CRIT), protected.get(_COSE_CONTENT_TYPE))
    # The COSE envelope specification lets the chain be protected too; in both places is refused above.
    certificates = _certificates(
        protected[_COSE_X5CHAIN] if _COSE_X5CHAIN in protected else unprotected.get(_COSE_X5CHAIN)
    )
    algorithm = algorithm_for(certificates[0])
    alg = protected.get(_COSE_ALG)
    if not isinstance(alg, int) or _COSE_ALGORITHMS.get(alg) != algorithm:
        raise VerificationError(
            f"the signature algorithm is {protected.get(_COSE_ALG)!r}, but the signing key calls for "
            f"{algorithm}"
        )
    to_be_signed = cbor2.dumps(["Signature1", raw_protected, b"", payload])
    if not _verify_raw(certificates[0], algorithm, signature, to_be_signed):
        raise VerificationError("the COSE signature does not verify")
    stamp = unprotected.get(TIMESTAMP_SIGNATURE)
    if stamp is not None and not isinstance(stamp, bytes):
        raise VerificationError(f"{TIMESTAMP_SIGNATURE} is not a byte string")
    return _signer_info(COSE_MEDIA_TYPE, algorithm, headers, payload, certificates, signature, stamp)


def read_envelope(data: bytes, media_type: str) -> SignerInfo:
    """The envelope's signer information, its signature verified with its own leaf certificate.

    Raises :class:`VerificationError` for anything malformed, unsupported or not verifying (integrity), and
    for an envelope larger than :data:`MAX_ENVELOPE_BYTES` (refused unread).
    """
    if len(data) > MAX_ENVELOPE_BYTES:
        raise VerificationError(
            f"the signature envelope is {len(data)} bytes; at most {MAX_ENVELOPE_BYTES // 1024} KiB are read"
        )
    if media_type == JWS_MEDIA_TYPE:
        return _read_jws(data)
    if media_type == COSE_MEDIA_TYPE:
        return _read_cose(data)
    raise VerificationError(
        f"signature envelope media type {media_type!r} is not {JWS_MEDIA_TYPE} or {COSE_MEDIA_TYPE}"
    )
