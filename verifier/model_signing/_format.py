"""Model-signing signatures as a statement signature format of the verification room (``MODEL_SIGNING``).

A copy carries one when it came from a Sigstore bundle (:attr:`verifier.evidence.Attestation.bundle`) whose
statement is a model-signing one. The bundle is parsed once per copy, whatever the number of trusted
signers; each signer that verified is reported with the key that signed (``key:<id>``), so that the room's
threshold counts signing keys, not certificate authorities.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from verifier.base import InputError, VerificationError

if TYPE_CHECKING:
    from verifier.model_signing._trust import ModelSigningTrust


class _Copy(Protocol):
    """What this format reads of a found copy (:class:`verifier.evidence.Attestation`), typed structurally
    so that the format imports nothing of the evidence room."""

    @property
    def bundle(self) -> bytes | None: ...
    @property
    def predicate_type(self) -> str: ...
    @property
    def origin(self) -> str: ...


class _ModelSigning:
    label = "model-signing"

    def material(self, signer: Any) -> object | None:
        return getattr(signer, "model_signing", None)

    def identity(self, material: ModelSigningTrust) -> str:
        return material.identity

    def carries(self, copy: _Copy) -> bool:
        from verifier.model_signing._signature import PREDICATE_TYPE  # noqa: PLC0415

        return copy.bundle is not None and copy.predicate_type == PREDICATE_TYPE

    def check(
        self, copy: _Copy, trusted: Mapping[str, ModelSigningTrust], now: datetime | None
    ) -> tuple[list[tuple[str, datetime | None, str]], list[str]]:
        del now  # the certificate is judged at its own notBefore, as upstream judges it
        from verifier.model_signing._signature import read_signature  # noqa: PLC0415
        from verifier.model_signing._trust import signing_key  # noqa: PLC0415

        if copy.bundle is None:
            return [], []
        try:
            signature = read_signature(copy.bundle, copy.origin)
        except InputError as error:
            return [], [error.message]
        signed: list[tuple[str, datetime | None, str]] = []
        problems: list[str] = []
        for name, trust in trusted.items():
            try:
                signed.append((name, None, signing_key(signature, trust)))
            except (InputError, VerificationError) as error:
                problems.append(f"{name}: {error.message}")
        return signed, problems


MODEL_SIGNING = _ModelSigning()
