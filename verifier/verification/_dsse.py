"""DSSE statements signed with public keys (cosign key pairs, ``trtguard attest``): their signature check."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from verifier.base import VerificationError
from verifier.crypto import verify_envelope

if TYPE_CHECKING:
    from verifier.crypto import PublicKey
    from verifier.evidence import Attestation


class _Dsse:
    label = "DSSE"

    def material(self, signer: Any) -> object | None:
        return getattr(signer, "public_key", None)

    def identity(self, material: PublicKey) -> str:
        return f"key:{material.key_id}"

    def carries(self, copy: Attestation) -> bool:
        return bool(copy.envelope.signatures)

    def check(
        self, copy: Attestation, trusted: Mapping[str, PublicKey], now: datetime | None
    ) -> tuple[list[tuple[str, datetime | None]], list[str]]:
        del now  # a DSSE signature has no time of its own
        try:
            names = verify_envelope(copy.envelope, trusted, threshold=1)
        except VerificationError as error:
            return [], [error.message]
        return [(name, None) for name in names], []


DSSE = _Dsse()
