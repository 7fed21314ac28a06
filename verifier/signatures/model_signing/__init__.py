"""OpenSSF Model Signing (``model_signing`` 1.x, sigstore/model-transparency): signatures of model files.

* :func:`read_signature` parses a signature (``model.sig``, a Sigstore bundle) into a
  :class:`ModelSignature`: the files it lists and their SHA-256 digests (``files`` serialization only);
* :func:`signing_key` verifies it with a :class:`ModelSigningKey` (key method) or
  :class:`ModelSigningCertificates` (certificate method);
* :func:`verify_model` checks both, and that a file or folder on disk is the one signed;
* :data:`MODEL_SIGNING` is the format registered in ``verifier/verification/_table.py``, through which
  policies verify model signatures found as evidence (``models.buildManifest.onnxSignedBy``).

Keyless (Sigstore identity) signatures are not verified yet: they are refused as signed with no trusted key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from verifier.base import VerificationError, read_limited
from verifier.signatures.model_signing._files import GIT_PATHS, model_mismatch
from verifier.signatures.model_signing._format import MODEL_SIGNING
from verifier.signatures.model_signing._signature import PREDICATE_TYPE, ModelSignature, read_signature
from verifier.signatures.model_signing._trust import (
    ModelSigningCertificates,
    ModelSigningKey,
    ModelSigningTrust,
    signing_key,
)

__all__ = [
    "GIT_PATHS",
    "MODEL_SIGNING",
    "PREDICATE_TYPE",
    "ModelSignature",
    "ModelSigningCertificates",
    "ModelSigningKey",
    "ModelSigningTrust",
    "VerifiedModel",
    "read_signature",
    "signing_key",
    "verify_model",
]


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
