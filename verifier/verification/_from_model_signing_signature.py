"""Names of ``verifier.model_signing`` (its ``_signature``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.model_signing import MODEL_SIGNING_PREDICATE

__all__ = [
    "MODEL_SIGNING_PREDICATE",
]
