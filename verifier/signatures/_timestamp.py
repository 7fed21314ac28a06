"""RFC 3161 signed timestamps of a bundle's signature, checked against the trusted root's TSAs.

A timestamp counts as a signed time only when it verifies with a timestamp authority of the trusted root: the
TSA's chain at the time the token was generated (rfc3161-client, which sigstore-python uses as well), the
message imprint over the bundle's signature bytes, and the authority's validity window in the trusted root,
both ends inclusive (the spec's ``TimeRange`` is closed). A timestamp that verifies with no TSA is not an
error by itself (sigstore-go and sigstore-python skip it too): it just adds no time, and a signature that
needs a time and has none fails later for that reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from rfc3161_client import TimeStampResponse, VerificationError, VerifierBuilder, decode_timestamp_response

from verifier.base import VerificationError as TrtguardVerificationError
from verifier.signatures._trust import CertificateAuthority

#: sigstore-go's limit, against bundles that make verification expensive.
MAX_TIMESTAMPS: Final = 32


def _time(response: TimeStampResponse) -> datetime:
    moment = response.tst_info.gen_time
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _verified_by(response: TimeStampResponse, signature: bytes, authority: CertificateAuthority) -> bool:
    certificates = authority.certificates
    if len(certificates) < 2:  # the TSA's own certificate and at least a root
        return False
    builder = VerifierBuilder().tsa_certificate(certificates[0]).add_root_certificate(certificates[-1])
    for intermediate in certificates[1:-1]:
        builder = builder.add_intermediate_certificate(intermediate)
    try:
        builder.build().verify_message(response, signature)
    except (VerificationError, ValueError):  # ValueError: a part of the token rfc3161-client reads late
        return False
    return authority.covers(_time(response))


@dataclass(frozen=True, slots=True)
class SignedTimes:
    """The times trusted TSAs signed, and why each other timestamp adds none (for messages)."""

    times: tuple[datetime, ...]
    unverified: tuple[str, ...]


def verify_timestamps(
    timestamps: Sequence[bytes], signature: bytes, authorities: Sequence[CertificateAuthority]
) -> SignedTimes:
    """The generation times of the ``timestamps`` that a trusted TSA signed over ``signature``."""
    if len(timestamps) > MAX_TIMESTAMPS:
        raise TrtguardVerificationError(
            f"the bundle carries {len(timestamps)} signed timestamps; at most {MAX_TIMESTAMPS} are checked"
        )
    if len(set(timestamps)) != len(timestamps):
        raise TrtguardVerificationError("the bundle carries the same signed timestamp twice")
    times, unverified = [], []
    for index, raw in enumerate(timestamps):
        try:
            response = decode_timestamp_response(raw)
            moment = _time(response)  # TSTInfo is decoded here, on first access
        except ValueError as error:
            unverified.append(f"timestamp {index} does not decode ({error})")
            continue
        if any(_verified_by(response, signature, authority) for authority in authorities):
            times.append(moment)
        else:
            unverified.append(
                f"timestamp {index} ({moment.isoformat()}) is not signed over this signature by a"
                " timestamp authority of the trusted root valid then"
            )
    return SignedTimes(times=tuple(times), unverified=tuple(unverified))
