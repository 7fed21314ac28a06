"""Names of ``verifier.crypto`` (its ``_keys``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.crypto import PublicKey

__all__ = [
    "PublicKey",
]
