"""Names of ``verifier.signatures`` (its ``_policy``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.signatures import KeylessIdentity, SignerMatch, TrustPolicy

__all__ = [
    "KeylessIdentity",
    "SignerMatch",
    "TrustPolicy",
]
