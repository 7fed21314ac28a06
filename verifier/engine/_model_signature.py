"""A model-signing signature of the engine file given with ``--model-signature`` (OpenSSF Model Signing, as
``model_signing sign`` makes it over the engine file or a folder that holds it): signed by a trusted signer,
and listing a file whose SHA-256 is the engine's.

The signature is about the engine's bytes, not the manifest's claims, so it is checked with or without a
manifest. The model-signing verifier loads only when a signature is given (a slim GPU environment needs
cryptography, which the manifest check loads anyway; keyless signers load the Sigstore verifier too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verifier.base import InputError, VerificationError, read_limited
from verifier.engine._report import Check, failed, passed

if TYPE_CHECKING:
    from verifier.model_signing import ModelSigningTrust


@dataclass(frozen=True, slots=True)
class ModelSignatureRequest:
    """A model signature to check the engine file with, and who may have made it (name → trust)."""

    signature: Path
    trusted: Mapping[str, ModelSigningTrust]


def model_signature_checks(engine_sha256: str, request: ModelSignatureRequest | None) -> list[Check]:
    """``model_signature.signers`` and ``model_signature.engine``; none without a signature. Raises
    :class:`InputError` only when the file cannot be read at all."""
    if request is None:
        return []
    from verifier.model_signing import read_signature, signing_key  # noqa: PLC0415 - see the docstring

    path = request.signature
    raw = read_limited(path, "the model signature", hint="give the model_signing signature (model.sig)")
    names = sorted(request.trusted)
    try:
        signature = read_signature(raw, str(path))
    except InputError as error:
        return [failed("model_signature.signers", f"not a model signature: {error.message}", names, None)]
    signed: list[str] = []
    problems: list[str] = []
    for name, trust in request.trusted.items():
        try:
            signing_key(signature, trust)
            signed.append(name)
        except (InputError, VerificationError) as error:
            problems.append(f"{name}: {error.message}")
    if not signed:
        why = "; ".join(problems)
        checks = [failed("model_signature.signers", f"signed by no trusted signer ({why})", names, [])]
    else:
        checks = [passed("model_signature.signers", f"{path} signed by {', '.join(signed)}", names, signed)]
    files = signature.covers(engine_sha256)
    listed = sorted(signature.resources)
    if files:
        shown = [signature.model_name if f == "." else f for f in files]
        checks.append(
            passed(
                "model_signature.engine",
                f"the engine file is {', '.join(shown)} of the signed model",
                engine_sha256,
                listed,
            )
        )
    else:
        checks.append(
            failed(
                "model_signature.engine",
                "the signature lists no file with the engine's SHA-256: it signs other files (or another "
                "build of this engine)",
                engine_sha256,
                listed,
            )
        )
    return checks
