"""Detached OpenPGP signatures over a statement's exact bytes (``gpg --detach-sign``): their signature check.

A signature's own expiry is when it stops verifying (its ``valid_until``); a key's expiry or soft revocation
cuts off only signatures made after it (:mod:`verifier.signatures._openpgp`), so it ends nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from verifier.base import VerificationError

if TYPE_CHECKING:  # pysequoia loads with the first OpenPGP signature checked (start-up time, issue 15)
    from verifier.evidence import Attestation
    from verifier.signatures import OpenPGPKey


class _OpenPgp:
    label = "OpenPGP"

    def material(self, signer: Any) -> object | None:
        return getattr(signer, "openpgp", None)

    def identity(self, material: OpenPGPKey) -> str:
        return f"openpgp:{material.fingerprint.upper()}"

    def carries(self, copy: Attestation) -> bool:
        return bool(copy.openpgp_signatures)

    def check(
        self, copy: Attestation, trusted: Mapping[str, OpenPGPKey], now: datetime | None
    ) -> tuple[list[tuple[str, datetime | None]], list[str]]:
        from verifier.signatures import verify_detached  # noqa: PLC0415 - see TYPE_CHECKING

        signers: list[tuple[str, datetime | None]] = []
        problems: list[str] = []
        for signature in copy.openpgp_signatures:
            try:
                names = verify_detached(copy.envelope.payload, signature, trusted, now=now)
            except VerificationError as error:
                problems.append(error.message)
                continue
            until = _expiry(signature)
            signers += [(name, until) for name in names]
        return signers, problems


def _expiry(signature: bytes) -> datetime | None:
    """The earliest expiry among the signatures of a detached signature file (None: none expires)."""
    from verifier.signatures import read_signatures  # noqa: PLC0415 - see TYPE_CHECKING

    ends = []
    for parsed in read_signatures(signature):
        try:
            end = parsed.expiration
        except (RuntimeError, ValueError):  # Sequoia cannot say: the verdict is kept no longer than the TTL
            continue
        if isinstance(end, datetime):
            ends.append(end)
    return min(ends, default=None)


OPENPGP = _OpenPgp()
