"""Names of ``verifier.signatures`` (its ``_openpgp``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.signatures import OpenPGPKey

__all__ = [
    "OpenPGPKey",
]
