"""How the decision log names the image signatures that counted: :class:`VerifiedSignatures` and its records.

Verification is :mod:`verifier.verification`'s; this only writes down, in the decision record's terms
(:class:`~policies.results.SignatureRecord`), what it returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from policies.results import SignatureFormat, SignatureRecord, SignerRecord
from verifier.base import sha256_bytes
from verifier.verification import statement_digest

if TYPE_CHECKING:
    from verifier.evidence import ImageSignatures
    from verifier.verification import CountedSignature, SignerMatch, VerificationResult


@dataclass(frozen=True, slots=True)
class VerifiedSignatures:
    """An image's signatures that met a rule, and each one that counted, as the decision log records it."""

    result: VerificationResult
    counted: tuple[SignatureRecord, ...]

    @property
    def valid_until(self) -> datetime | None:
        """When a counted signature stops verifying (a certificate's notAfter, a signature's expiry)."""
        return self.result.valid_until


_FORMATS: dict[str, SignatureFormat] = {
    "classic": "cosign-classic",
    "bundle": "sigstore-bundle",
    "envelope": "dsse",
    "notation": "notation",
}


def signature_record(counted: CountedSignature, material: ImageSignatures) -> SignatureRecord:
    """How the decision log names a signature that counted: its format, object digest and signers."""
    if counted.source == "classic":
        digest = f"sha256:{sha256_bytes(material.classic[counted.index].payload)}"
    elif counted.source == "bundle":
        digest = f"sha256:{sha256_bytes(material.bundles[counted.index])}"
    elif counted.source == "notation":
        digest = f"sha256:{sha256_bytes(material.notation[counted.index].envelope)}"
    else:
        digest = statement_digest(material.statements[counted.index].envelope.payload)
    return SignatureRecord(
        format=_FORMATS[counted.source],
        digest=digest,
        signers=tuple(signer_record(match) for match in counted.signers),
        tlog_index=counted.log_index,
        logged=counted.logged,
    )


def signer_record(match: SignerMatch) -> SignerRecord:
    """A signer that matched, as the decision log records it (key name and id, or identity and issuer)."""
    if match.kind == "key":
        return SignerRecord(key=match.label, key_id=match.signer_id.removeprefix("key:"))
    if match.kind == "notation":
        # "name (certificate subject)": the trust policy's signer name, and the subject under its anchor.
        return SignerRecord(key=match.label.partition(" (")[0], key_id=match.signer_id)
    # A keyless label is "subject (issuer)"; an issuer is a URL, which holds no " (".
    subject, _, issuer = match.label.rpartition(" (")
    return SignerRecord(identity=subject, issuer=issuer.removesuffix(")"))
