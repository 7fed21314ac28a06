"""Names of ``verifier.crypto`` (its ``_dsse``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.crypto import MAX_SIGNATURES

__all__ = [
    "MAX_SIGNATURES",
]
