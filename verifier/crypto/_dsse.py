"""DSSE (Dead Simple Signing Envelope) v1: pre-authentication encoding, signing and verification.

Spec: https://github.com/secure-systems-lab/dsse (envelope.md, protocol.md). Signatures are made over
``PAE(payloadType, payload)``, never over the JSON envelope, so the envelope's serialisation does not matter.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from verifier.base import InputError, VerificationError
from verifier.crypto._keys import PrivateKey, PublicKey

__all__ = [
    "MAX_SIGNATURES",
    "Envelope",
    "EnvelopeSignature",
    "pae",
    "sign_envelope",
    "verify_envelope",
]

#: Envelopes with more signatures than this are refused: each signature is tried against each trusted key.
MAX_SIGNATURES: Final = 64


def pae(payload_type: str, payload: bytes) -> bytes:
    """``"DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload`` with decimal ASCII lengths."""
    type_bytes = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


def _decode_b64(value: Any, field: str, location: str | None) -> bytes:
    # The DSSE spec asks parsers to accept standard and URL-safe base64, with or without padding.
    if not isinstance(value, str):
        raise InputError(f"DSSE field {field} must be a base64 string", location=location)
    text = value.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InputError(f"DSSE field {field} is not valid base64", location=location) from error


@dataclass(frozen=True, slots=True)
class EnvelopeSignature:
    """One signature of an envelope; ``keyid`` is an unauthenticated hint and never trusted."""

    sig: bytes
    keyid: str = ""


@dataclass(frozen=True, slots=True)
class Envelope:
    """A DSSE envelope: the payload, its type and the signatures over their PAE."""

    payload_type: str
    payload: bytes
    signatures: tuple[EnvelopeSignature, ...]

    @classmethod
    def from_json(cls, data: bytes | str, *, location: str | None = None) -> Envelope:
        """Parse the JSON envelope; :class:`InputError` (naming ``location``) when it is malformed."""
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            problem = "is nested too deeply" if isinstance(error, RecursionError) else "is not JSON"
            raise InputError(
                f"not a DSSE envelope: the document {problem}",
                location=location,
                hint="expected {payloadType, payload, signatures} JSON",
            ) from error
        return cls.from_dict(document, location=location)

    @classmethod
    def from_dict(cls, document: Any, *, location: str | None = None) -> Envelope:
        """Build an envelope from already parsed JSON (as found inside a Sigstore bundle, for instance)."""
        if not isinstance(document, dict):
            raise InputError("not a DSSE envelope: expected a JSON object", location=location)
        payload_type = document.get("payloadType")
        if not isinstance(payload_type, str) or not payload_type:
            raise InputError("DSSE envelope has no payloadType", location=location)
        try:
            payload_type.encode()  # PAE encodes it as UTF-8; JSON can spell an unpaired surrogate
        except UnicodeEncodeError as error:
            raise InputError("DSSE payloadType is not valid Unicode text", location=location) from error
        payload = _decode_b64(document.get("payload"), "payload", location)
        raw_signatures = document.get("signatures")
        if not isinstance(raw_signatures, list):
            raise InputError("DSSE envelope has no signatures list", location=location)
        signatures = []
        for index, item in enumerate(raw_signatures):
            if not isinstance(item, dict):
                raise InputError(f"DSSE signatures[{index}] is not an object", location=location)
            keyid = item.get("keyid") or ""
            if not isinstance(keyid, str):
                raise InputError(f"DSSE signatures[{index}].keyid is not a string", location=location)
            sig = _decode_b64(item.get("sig"), f"signatures[{index}].sig", location)
            signatures.append(EnvelopeSignature(sig=sig, keyid=keyid))
        return cls(payload_type=payload_type, payload=payload, signatures=tuple(signatures))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object form (standard base64)."""
        return {
            "payloadType": self.payload_type,
            "payload": base64.b64encode(self.payload).decode(),
            "signatures": [
                {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode()} for s in self.signatures
            ],
        }

    def to_json(self) -> bytes:
        """Compact JSON bytes of the envelope."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()


def sign_envelope(payload_type: str, payload: bytes, key: PrivateKey) -> Envelope:
    """An envelope with one signature by ``key``; its keyid is the key's id (SPKI SHA-256 hex)."""
    signature = key.sign(pae(payload_type, payload))
    return Envelope(
        payload_type=payload_type,
        payload=payload,
        signatures=(EnvelopeSignature(sig=signature, keyid=key.public_key().key_id),),
    )


def _describe(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def verify_envelope(
    envelope: Envelope, keys: Mapping[str, PublicKey], *, threshold: int = 1
) -> tuple[str, ...]:
    """Names of the trusted ``keys`` that signed ``envelope``, in the order of ``keys``.

    The threshold counts distinct keys (two names for the same key count once; two signatures by one key
    count once). Raises :class:`VerificationError` when the envelope carries no signature at all, or when
    fewer than ``threshold`` distinct trusted keys signed it; :class:`InputError` when the threshold cannot
    be met by the keys given.
    """
    distinct = {key.key_id for key in keys.values()}
    if threshold < 1 or threshold > len(distinct):
        raise InputError(
            f"threshold {threshold} cannot be met by {len(distinct)} distinct key(s) {_describe(list(keys))}",
            hint="the threshold must be between 1 and the number of distinct trusted keys",
        )
    if not envelope.signatures:
        raise VerificationError(
            "the envelope carries no signature", hint="sign it, e.g. with `trtguard attest --key`"
        )
    if len(envelope.signatures) > MAX_SIGNATURES:
        raise VerificationError(
            f"the envelope carries {len(envelope.signatures)} signatures;"
            f" at most {MAX_SIGNATURES} are checked"
        )
    message = pae(envelope.payload_type, envelope.payload)
    verified: list[str] = []
    verified_ids: set[str] = set()
    for name, key in keys.items():
        if key.key_id in verified_ids or any(key.verify(s.sig, message) for s in envelope.signatures):
            verified.append(name)
            verified_ids.add(key.key_id)
    if len(verified_ids) < threshold:
        count = len(envelope.signatures)
        # A signature that names a trusted key but does not verify: the payload (or the signature) was
        # changed after signing, which is not the same as a signature by someone else.
        named = {s.keyid for s in envelope.signatures if s.keyid}
        altered = [n for n, k in keys.items() if k.key_id in named and k.key_id not in verified_ids]
        counted = (
            f"{len(verified_ids)} of {threshold} required signatures from keys {_describe(list(keys))}"
            f" (the envelope carries {count} signature{'s' if count != 1 else ''}"
            + (f"; verified: {_describe(verified)})" if verified else ", none by a trusted key)")
        )
        if altered:
            raise VerificationError(
                f"payload altered: a signature under the key id of {_describe(altered)}, a trusted key, does "
                f"not verify over this payload (the statement or the signature was changed after signing); "
                f"{counted}",
                hint="attest the document again with the trusted key; do not edit a signed statement",
            )
        raise VerificationError(
            counted,
            hint="sign with the keys the policy trusts, or check that the right public keys are configured",
        )
    return tuple(verified)
