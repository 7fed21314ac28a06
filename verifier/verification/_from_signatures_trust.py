"""Names of ``verifier.signatures`` (its ``_trust``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.signatures import TrustRoot

__all__ = [
    "TrustRoot",
]
