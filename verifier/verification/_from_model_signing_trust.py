"""Names of ``verifier.model_signing`` (its ``_trust``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.model_signing import (
    ModelSigningCertificates,
    ModelSigningKey,
    ModelSigningKeyless,
    ModelSigningTrust,
)

__all__ = [
    "ModelSigningCertificates",
    "ModelSigningKey",
    "ModelSigningKeyless",
    "ModelSigningTrust",
]
