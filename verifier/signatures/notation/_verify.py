"""Verifying one Notary Project signature of an OCI artifact against one :class:`NotationTrust`.

The checks, in Notation's order and with its names (``specs/trust-store-trust-policy.md``):

1. **scope**: the artifact's repository is in the trust's registry scopes;
2. **integrity** (always enforced): the envelope verifies with its leaf certificate under the algorithm the
   key calls for, its critical headers are understood, its payload's target descriptor is this artifact's
   (media type, digest and size, as notation-go's ``content.Equal``), and its chain has the Notary shape and
   certificate profile;
3. **authenticity**: a certificate of the chain is in the trust store of the signing scheme's type (``ca``
   for ``notary.x509``, ``signingAuthority`` for ``notary.x509.signingAuthority``, never the other), and the
   leaf's subject matches a trusted identity. A signature that fails here never counts, at any level;
4. **expiry**: the signer's ``io.cncf.notary.expiry`` has not passed;
5. **authentic timestamp**: ``notary.x509``: the chain was valid at the time an RFC 3161 countersignature by a
   ``tsa`` store's TSA vouches for (required when the trust has a ``tsa`` store), else at the claimed signing
   time and still now; ``notary.x509.signingAuthority``: at the authentic signing time.

Checks 4 and 5 are enforced at ``strict`` and only logged at ``permissive`` and ``audit``. Revocation (OCSP,
CRL) is not checked: docs/signatures.md says why.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from cryptography.hazmat.primitives.serialization import Encoding

from verifier.base import VerificationError
from verifier.signatures.notation._chain import check_chain, invalid_at, subject_text
from verifier.signatures.notation._envelope import SCHEME_X509, SignerInfo, TargetArtifact, read_envelope
from verifier.signatures.notation._trust import Check, NotationTrust, StoreType, certificate_subject
from verifier.signatures.notation._tstoken import timestamp_range
from verifier.signatures.notation.config import NotationPolicy

__all__ = [
    "ArtifactDescriptor",
    "EnvelopeSigner",
    "NotationSignature",
    "NotationVerified",
    "TargetArtifact",
    "read_signer",
    "verify_notation",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NotationSignature:
    """One signature envelope as found (an OCI referrer's layer): its bytes as stored, and its media type.

    The envelope is read and its integrity checked once, however many trusts it is verified against (the
    outcome, either way, is kept with the object: :func:`_intact`).
    """

    envelope: bytes
    media_type: str
    origin: str = ""
    _outcome: list[SignerInfo | str] = field(default_factory=list, init=False, compare=False, repr=False)


class ArtifactDescriptor(Protocol):
    """What is known of the artifact a signature is checked for (an OCI descriptor: what the registry served,
    or the manifest an attestation folder holds)."""

    @property
    def media_type(self) -> str:
        """The manifest's media type."""
        ...

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the manifest's bytes."""
        ...

    @property
    def size(self) -> int:
        """The manifest's length in bytes."""
        ...


def _require_target(signed: TargetArtifact, artifact: ArtifactDescriptor) -> None:
    """Refuse a payload whose descriptor is not the artifact's in every field Notation compares."""
    if signed.digest != artifact.digest:
        raise VerificationError(f"the signature is for {signed.digest}, not {artifact.digest}")
    differences = [
        f"{name} {mine!r} (the artifact's is {theirs!r})"
        for name, mine, theirs in (
            ("media type", signed.media_type, artifact.media_type),
            ("size", signed.size, artifact.size),
        )
        if mine != theirs
    ]
    if differences:
        raise VerificationError(
            f"the signed descriptor of {signed.digest} says {' and '.join(differences)}: the signature is "
            "not for the artifact as the registry serves it"
        )


@dataclass(frozen=True, slots=True)
class NotationVerified:
    """A signature whose integrity and authenticity hold under a trust; ``logged`` lists what the level only
    logged (an expiry or timestamp failure under ``permissive`` or ``audit``)."""

    subject: str  # the leaf certificate's subject, RFC 4514
    signer_id: str  # what a threshold counts: the subject under the trusted anchor
    scheme: str
    logged: tuple[str, ...]
    logged_checks: tuple[Check, ...] = ()  # the check of each entry of ``logged``, in its order
    level: str = "strict"  # the verification level of the trust that applied (a statement's, by scope)
    #: When the verdict may change without the signature changing: its expiry or a certificate's notAfter.
    valid_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class EnvelopeSigner:
    """What an intact envelope says, before any trust is decided: its target and its chain's thumbprints."""

    target: TargetArtifact
    thumbprints: tuple[str, ...]  # SHA-256 of each certificate's DER, leaf first


def read_signer(envelope: bytes, media_type: str) -> EnvelopeSigner:
    """Read an envelope and check its integrity with its own leaf (:class:`VerificationError` else)."""
    info = read_envelope(envelope, media_type)
    check_chain(info.certificates)
    thumbprints = tuple(hashlib.sha256(c.public_bytes(Encoding.DER)).hexdigest() for c in info.certificates)
    return EnvelopeSigner(info.target, thumbprints)


def _intact(signature: NotationSignature) -> SignerInfo:
    """The envelope read, its signature and chain shape checked (what no trust changes), once per object;
    :class:`VerificationError` (the same message each time) when it is not intact."""
    if not signature._outcome:
        try:
            info = read_envelope(signature.envelope, signature.media_type)
            check_chain(info.certificates)
        except VerificationError as error:
            signature._outcome.append(error.message)
        else:
            signature._outcome.append(info)
    found = signature._outcome[0]
    if isinstance(found, str):
        raise VerificationError(found)
    return found


def _authenticity(info: SignerInfo, trust: NotationTrust) -> str:
    kind: StoreType = "ca" if info.scheme == SCHEME_X509 else "signingAuthority"
    anchors = {c.public_bytes(Encoding.DER) for c in trust.stores.get(kind, ())}
    trusted = [c for c in info.certificates if c.public_bytes(Encoding.DER) in anchors]
    if not trusted:
        other: StoreType = "signingAuthority" if kind == "ca" else "ca"
        raise VerificationError(
            f"the certificate chain ({info.scheme}) contains no certificate of the signer's {kind!r} trust "
            "store"
            + (
                f" ({info.scheme} signatures are never anchored in a {other!r} store)"
                if trust.stores.get(other)
                else ""
            )
        )
    leaf = info.certificates[0]
    if any(identity.attributes is not None for identity in trust.identities):  # "*" matches any subject
        try:
            subject = certificate_subject(leaf)
        except ValueError as error:
            raise VerificationError(
                f"the signing certificate's subject cannot be matched: {error}"
            ) from error
        if not any(identity.admits(subject) for identity in trust.identities):
            raise VerificationError(
                f"the signing certificate {subject_text(leaf)!r} matches none of the trusted "
                f"identities [{'; '.join(i.text for i in trust.identities)}]"
            )
    # One signer per leaf subject under its chain's root, whichever entry's store admitted it: two entries
    # trusting the root and an intermediate of one chain must not count one signature twice.
    root = hashlib.sha256(info.certificates[-1].public_bytes(Encoding.DER)).hexdigest()
    return f"notation:{root}:{subject_text(leaf)}"


def _timestamp_problem(info: SignerInfo, trust: NotationTrust, now: datetime) -> str | None:
    """Why no authentic time shows the chain valid (Notation's "authentic timestamp" check), or None."""
    chain = info.certificates
    if info.scheme != SCHEME_X509:
        problem = invalid_at(chain, info.signing_time)
        return (
            f"at the authentic signing time {info.signing_time.isoformat()}, {problem}" if problem else None
        )
    tsa = trust.stores.get("tsa", ())
    if tsa:
        if info.timestamp_token is None:
            return (
                "the signer's trust has a tsa store, but the signature carries no timestamp countersignature"
            )
        try:
            earliest, latest = timestamp_range(info.timestamp_token, info.signature, tsa)
        except VerificationError as error:
            return error.message
        problem = invalid_at(chain, earliest) or invalid_at(chain, latest)
        return f"at the timestamp {earliest.isoformat()}, {problem}" if problem else None
    problem = invalid_at(chain, info.signing_time)
    if problem:
        return f"at the claimed signing time {info.signing_time.isoformat()}, {problem}"
    problem = invalid_at(chain, now)
    return f"now, and no authentic timestamp covers the signing: {problem}" if problem else None


def verify_notation(
    signature: NotationSignature,
    trust: NotationTrust | NotationPolicy,
    *,
    descriptor: ArtifactDescriptor,
    repository: str | None,
    now: datetime,
) -> NotationVerified:
    """Verify ``signature`` of the artifact ``descriptor`` in ``repository`` under ``trust`` at time ``now``.

    A :class:`NotationPolicy` (Notation's own trust policy document) gives the trust of the statement that
    applies to ``repository``, as ``notation verify`` chooses it. Raises :class:`VerificationError` for a
    failed enforced check (integrity and authenticity always).
    """
    if isinstance(trust, NotationPolicy):
        trust = trust.trust_for(repository)
    if not trust.covers(repository):
        raise VerificationError(
            f"{repository or 'this artifact'} is outside the signer's registry scopes {list(trust.scopes)}"
        )
    info = _intact(signature)
    _require_target(info.target, descriptor)
    signer_id = _authenticity(info, trust)
    logged = []
    failures: list[tuple[Check, str]] = []
    if info.expiry is not None and now > info.expiry:
        failures.append(("expiry", f"the signature expired at {info.expiry.isoformat()}"))
    problem = _timestamp_problem(info, trust, now)
    if problem is not None:
        failures.append(("authenticTimestamp", problem))
    for check, message in failures:
        if trust.enforces(check):
            raise VerificationError(f"{message} ({check}, enforced at level {trust.level})")
        logged.append(f"{message} ({check}, only logged at level {trust.level})")
        _log.warning("Notation signature %s: %s", signature.origin or "", logged[-1])
    # Verified at ``now``: the verdict may differ once the signature or a certificate of its chain expires.
    ends = [c.not_valid_after_utc for c in info.certificates] + ([info.expiry] if info.expiry else [])
    return NotationVerified(
        subject=subject_text(info.certificates[0]),
        signer_id=signer_id,
        scheme=info.scheme,
        logged=tuple(logged),
        logged_checks=tuple(check for check, _ in failures),
        level=trust.level,
        valid_until=min(ends, default=None),
    )
