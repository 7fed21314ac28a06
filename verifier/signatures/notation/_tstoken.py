"""The RFC 3161 timestamp countersignature of a Notary Project signature, checked with ``tsa`` trust stores.

Notation stores the bare TimeStampToken (CMS ``ContentInfo``) over the signature bytes. rfc3161-client (which
the Sigstore checks use too) reads a TimeStampResp and insists on DER, while Go TSA clients and some TSAs
write the token's certificate SET unsorted. The certificates lie outside what the TSA signed (the signed
attributes and the TSTInfo), so they are put into DER order and the token is wrapped as a granted response
before it is read; nothing signed is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cryptography import x509
from rfc3161_client import VerificationError as TokenError
from rfc3161_client import VerifierBuilder, decode_timestamp_response

from verifier.base import VerificationError
from verifier.crypto import der_header

__all__ = ["timestamp_range"]


def _tlv(data: bytes, position: int) -> tuple[int, int, int]:
    """(tag, start of content, end) of the DER element at ``position``."""
    tag, start, length = der_header(data, position)
    return tag, start, start + length


def _encode(tag: int, content: bytes) -> bytes:
    size = len(content)
    length = (
        bytes([size])
        if size < 0x80
        else bytes([0x80 | ((size.bit_length() + 7) // 8)])
        + size.to_bytes((size.bit_length() + 7) // 8, "big")
    )
    return bytes([tag]) + length + content


def _children(data: bytes, start: int, end: int) -> list[bytes]:
    found = []
    while start < end:
        _, _, stop = _tlv(data, start)
        found.append(data[start:stop])
        start = stop
    return found


def _as_response(token: bytes) -> bytes:
    """The token as a granted TimeStampResp, its certificate SET in DER order."""
    _, start, end = _tlv(token, 0)
    content_type, wrapped = _children(token, start, end)
    _, inner, _ = _tlv(wrapped, 0)
    _, start, end = _tlv(wrapped, inner)
    parts = []
    for part in _children(wrapped, start, end):
        if part[0] == 0xA0:  # certificates [0] IMPLICIT SET OF
            _, first, last = _tlv(part, 0)
            parts.append(_encode(0xA0, b"".join(sorted(_children(part, first, last)))))
        else:
            parts.append(part)
    signed_data = _encode(0x30, b"".join(parts))
    content_info = _encode(0x30, content_type + _encode(0xA0, signed_data))
    return _encode(0x30, bytes.fromhex("3003020100") + content_info)


def timestamp_range(
    token: bytes, signature: bytes, roots: Sequence[x509.Certificate]
) -> tuple[datetime, datetime]:
    """The earliest and latest time the token vouches for, once a trusted TSA's signature over ``signature``
    verifies (``VerificationError`` saying why not)."""
    try:
        response = decode_timestamp_response(_as_response(token))
        generated = response.tst_info.gen_time
        accuracy = response.tst_info.accuracy
    except (ValueError, IndexError) as error:
        raise VerificationError(f"the timestamp countersignature does not decode ({error})") from error
    generated = generated if generated.tzinfo is not None else generated.replace(tzinfo=UTC)
    try:  # the accuracy is an unbounded INTEGER of the (not yet verified) token
        margin = (
            timedelta(
                seconds=accuracy.seconds or 0,
                milliseconds=accuracy.millis or 0,
                microseconds=accuracy.micros or 0,
            )
            if accuracy is not None
            else timedelta(0)
        )
        earliest, latest = generated - margin, generated + margin
    except OverflowError:
        raise VerificationError("the timestamp countersignature's accuracy is out of range") from None
    problems = []
    for root in roots:
        try:
            VerifierBuilder().add_root_certificate(root).build().verify_message(response, signature)
        except (TokenError, ValueError) as error:
            problems.append(str(error))
            continue
        return earliest, latest
    raise VerificationError(
        "the timestamp countersignature is not signed over this signature by a TSA of the tsa trust store"
        + (f" ({problems[0]})" if problems else "")
    )
