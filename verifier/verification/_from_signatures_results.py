"""Names of ``verifier.signatures`` (its ``_results``) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.signatures import CountedSignature, LoggedCheck, NoSignatures, VerificationResult

__all__ = [
    "CountedSignature",
    "LoggedCheck",
    "NoSignatures",
    "VerificationResult",
]
