"""What signature verification returns, and the classic cosign signature it takes (shared by every path)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final, Literal

from verifier.base import VerificationError
from verifier.crypto import Statement

if TYPE_CHECKING:  # the results load without the verifiers (X.509, Notation): start-up time, issue 15
    from verifier.signatures._policy import SignerMatch

#: The payload type of a classic cosign signature (a simple-signing document).
SIMPLE_SIGNING_MEDIA_TYPE: Final = "application/vnd.dev.cosign.simplesigning.v1+json"

#: Layer annotation holding the base64 signature (note cosign's old ``cosignproject`` prefix).
SIGNATURE_ANNOTATION: Final = "dev.cosignproject.cosign/signature"
#: Layer annotation holding the PEM signing certificate of a keyless signature.
CERTIFICATE_ANNOTATION: Final = "dev.sigstore.cosign/certificate"
#: Layer annotation holding the PEM intermediate (and root) certificates.
CHAIN_ANNOTATION: Final = "dev.sigstore.cosign/chain"
#: Layer annotation holding the Rekor bundle ``{SignedEntryTimestamp, Payload}``.
BUNDLE_ANNOTATION: Final = "dev.sigstore.cosign/bundle"
#: Predicate type of cosign v3 image signatures.
COSIGN_SIGN_PREDICATE: Final = "https://sigstore.dev/cosign/sign/v1"
#: Media type (and OCI artifactType) of Sigstore bundle v0.3.
BUNDLE_MEDIA_TYPE: Final = "application/vnd.dev.sigstore.bundle.v0.3+json"


class NoSignatures(VerificationError):
    """There was no signature at all to verify (as opposed to signatures that failed)."""


@dataclass(frozen=True, slots=True)
class CosignSignature:
    """One classic cosign signature: a layer of the ``.sig`` manifest and the payload blob it points at.

    ``payload`` must be the blob exactly as stored (its digest checked against the layer descriptor by
    whoever fetched it): the signature is over these bytes.
    """

    payload: bytes
    signature: str  # base64, from the dev.cosignproject.cosign/signature annotation
    media_type: str = SIMPLE_SIGNING_MEDIA_TYPE
    certificate: str | None = None
    chain: str | None = None
    rekor_bundle: str | None = None

    @classmethod
    def from_layer(cls, payload: bytes, media_type: str, annotations: Mapping[str, str]) -> CosignSignature:
        """Build from a layer's media type and annotations, as found in the ``.sig`` manifest."""
        return cls(
            payload=payload,
            signature=annotations.get(SIGNATURE_ANNOTATION, ""),
            media_type=media_type,
            certificate=annotations.get(CERTIFICATE_ANNOTATION),
            chain=annotations.get(CHAIN_ANNOTATION),
            rekor_bundle=annotations.get(BUNDLE_ANNOTATION),
        )


#: Which list of :func:`verify_image_signatures` a signature came from.
SignatureSource = Literal["classic", "bundle", "envelope", "notation"]


@dataclass(frozen=True, slots=True)
class LoggedCheck:
    """A check of a signature that counted which failed, and which its verification level only logs
    (Notation's ``permissive`` and ``audit`` levels: expiry, authentic timestamp). Reported, never hidden."""

    signer: str  # the Notation signer's name in the policies
    check: str  # Notation's name of the check: expiry, authenticTimestamp
    level: str  # the verification level that only logs it
    message: str

    def to_json(self) -> dict[str, str]:
        """``{"signer", "check", "level", "message"}``."""
        return {"signer": self.signer, "check": self.check, "level": self.level, "message": self.message}


@dataclass(frozen=True, slots=True)
class CountedSignature:
    """One signature that counted towards the threshold: where it was handed in, and who made it.

    ``index`` is its position (from 0) in the ``source`` list given to :func:`verify_image_signatures`, so
    that the caller can name the object it verified; ``log_index`` is the transparency-log index of its
    verified entry (None when no entry was checked); ``logged`` what its verification level only logged.
    """

    source: SignatureSource
    index: int
    signers: tuple[SignerMatch, ...]
    log_index: int | None = None
    logged: tuple[LoggedCheck, ...] = ()


@dataclass(frozen=True, slots=True)
class VerificationResult:
    """Who verified: trusted key names and keyless identities, counted against the threshold."""

    keys: tuple[str, ...]
    identities: tuple[str, ...]  # "subject (issuer)" of verified keyless signers
    verified: int  # distinct signers: keys by key, identities by subject and issuer
    threshold: int
    tlog_verified: bool  # every counted signature's transparency log entry was verified offline
    statement: Statement | None = None  # the in-toto statement, for attestations and DSSE bundles
    counted: tuple[CountedSignature, ...] = ()  # every signature that counted (image signatures)
    #: When a counted signature stops verifying at a later time (a Notation certificate's notAfter or
    #: signature expiry); None when none does (key and keyless signatures are judged at their signing).
    valid_until: datetime | None = None

    def summary(self) -> str:
        """One line for people: ``2 of 2 required signers: keys [a, b]``."""
        parts = []
        if self.keys:
            parts.append(f"keys [{', '.join(self.keys)}]")
        if self.identities:
            parts.append(f"identities [{', '.join(self.identities)}]")
        return f"{self.verified} of {self.threshold} required signers: {'; '.join(parts)}"
