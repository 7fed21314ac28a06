"""A model on disk against its signature: :func:`verify_model`, as ``model_signing verify`` decides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from verifier.base import VerificationError, read_limited
from verifier.model_signing._files import model_mismatch
from verifier.model_signing._signature import ModelSignature, read_signature
from verifier.model_signing._trust import ModelSigningTrust, signing_key

__all__ = ["VerifiedModel", "verify_model"]


@dataclass(frozen=True, slots=True)
class VerifiedModel:
    """A model on disk whose signature verified: who signed it, and the files it lists."""

    signers: tuple[str, ...]
    distinct_keys: int
    signature: ModelSignature


def verify_model(
    model: Path,
    signature_file: Path,
    trusted: Mapping[str, ModelSigningTrust],
    *,
    threshold: int = 1,
    ignore_paths: Iterable[str | Path] = (),
    ignore_git_paths: bool = True,
) -> VerifiedModel:
    """Verify that ``model`` (a file or folder) is what ``signature_file`` signs, by ``threshold`` distinct
    keys among ``trusted`` (name → trust), as ``model_signing verify`` decides.

    The signature file is ignored when it lies in the model. Raises :class:`VerificationError` naming the
    files added, missing or changed, or why no trusted signer signed; :class:`InputError` for a file that is
    not a model signature.
    """
    signature = read_signature(read_limited(signature_file, "the model signature"), str(signature_file))
    signed: dict[str, str] = {}
    problems = []
    for name, trust in trusted.items():
        try:
            signed[name] = signing_key(signature, trust)
        except VerificationError as error:
            problems.append(f"{name}: {error.message}")
    keys = set(signed.values())
    if len(keys) < threshold:
        why = f" ({'; '.join(problems)})" if problems else ""
        raise VerificationError(
            f"signed by {len(keys)} of the {threshold} required distinct keys{why}",
            location=str(signature_file),
            hint="verify with the publisher's key or certificate chain",
        )
    mismatch = model_mismatch(
        model, signature, ignore_paths=[*ignore_paths, signature_file], ignore_git_paths=ignore_git_paths
    )
    if mismatch:
        raise VerificationError(
            f"{model} is not the model signed: {'; '.join(mismatch)}",
            location=str(signature_file),
            hint="fetch the model again from its publisher, or sign the model you mean to use",
        )
    return VerifiedModel(tuple(signed), len(keys), signature)
