"""Checking evidence fetched for one artifact against a rule's signers, and what a check returns.

Pure functions that verify one fetched statement or signature set (they run in a worker thread: keyless
signatures cost ~10 ms of certificate checks), and the result types that
:class:`~policies.verified.VerifiedEvidence` caches. A statement about an engine counts only when it
describes the artifact's engine layer, and a threshold counts distinct keys across DSSE and OpenPGP
signatures (:func:`signed_by`); the docstring of :mod:`policies.verified` says what every answer is cached by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from policies.results import SignatureFormat, SignatureRecord, SignerRecord
from policies.signers import Signer
from verifier.attestations import (
    ChangeApproval,
    EngineVerification,
    load_approval,
    load_verification,
)
from verifier.base import InputError, VerificationError, sha256_bytes
from verifier.dsse import verify_envelope
from verifier.evidence import Attestation, ImageSignatures
from verifier.intoto import statement_from_envelope
from verifier.keys import PublicKey
from verifier.manifest import EngineBuildManifest, load_manifest, manifest_digest
from verifier.scans import read_scan
from verifier.signatures.results import CountedSignature, VerificationResult

if TYPE_CHECKING:  # the verifiers load with the first signature checked (start-up time, issue 15)
    from verifier.scans.model import ScanDocument
    from verifier.signatures.policy import SignerMatch


class UnreadableEvidence(VerificationError):
    """A statement signed by the rule's keys whose content cannot be read (not a statement, not a document
    of its type): it cannot tell what it says, nor, for the newest-wins families, whether it is the newest."""


@dataclass(frozen=True, slots=True)
class VerifiedManifest:
    """A build manifest whose signature verified, with its JSON form for CEL and the subjects it covers."""

    manifest: EngineBuildManifest
    as_json: dict[str, Any]
    subjects: frozenset[str]
    signers: tuple[str, ...]
    origin: str
    #: :func:`verifier.manifest.manifest_digest` of the envelope: how approvals and successors name it.
    digest: str


@dataclass(frozen=True, slots=True)
class VerifiedPredicate:
    """An attestation whose signature verified: its predicate, read as an SBOM or scan where asked."""

    predicate: dict[str, Any]
    scan: ScanDocument | None
    signers: tuple[str, ...]
    origin: str
    #: SHA-256 of the attestation's in-toto statement (the DSSE payload), as the decision log names it.
    digest: str


@dataclass(frozen=True, slots=True)
class VerifiedApproval:
    """A change approval whose signature verified, with the names of the keys that signed it."""

    approval: ChangeApproval
    signers: tuple[str, ...]
    origin: str
    #: SHA-256 of the approval's in-toto statement (the DSSE payload), as the decision log names it.
    digest: str = ""


@dataclass(frozen=True, slots=True)
class VerifiedSignatures:
    """An image's signatures that met a rule, and each one that counted, as the decision log records it."""

    result: VerificationResult
    counted: tuple[SignatureRecord, ...]


@dataclass(frozen=True, slots=True)
class VerifiedAttestation:
    """An attestation that met a rule: the names of the keys that signed it and its statement digest."""

    signers: tuple[str, ...]
    digest: str


@dataclass(frozen=True, slots=True)
class VerifiedVerification:
    """A passing GPU verification of an engine, with its signers and statement digest."""

    verification: EngineVerification
    signers: tuple[str, ...]
    digest: str


def statement_digest(payload: bytes) -> str:
    """How the decision log names a DSSE attestation: ``sha256:`` of its statement (the envelope's payload),
    which stays the same when the envelope is re-serialised (:func:`verifier.manifest.manifest_digest`)."""
    return f"sha256:{sha256_bytes(payload)}"


def signed_by(
    attestations: Sequence[Attestation], signers: Mapping[str, Signer], *, now: datetime | None = None
) -> tuple[str, ...]:
    """Names of the ``signers`` whose DSSE or OpenPGP signature over the statement verifies, in any of
    ``attestations`` (copies of one statement: the same payload bytes); OpenPGP signatures are judged at
    ``now`` (the engine's clock). Raises :class:`VerificationError` saying why when none does."""
    keys = {ref: s.public_key for ref, s in signers.items() if s.public_key is not None}
    openpgp = {ref: s.openpgp for ref, s in signers.items() if s.openpgp is not None}
    names: dict[str, None] = {}
    reasons: list[str] = []
    for attestation in attestations:
        if attestation.envelope.signatures and keys:
            try:
                names.update(dict.fromkeys(verify_envelope(attestation.envelope, keys, threshold=1)))
            except VerificationError as error:
                reasons.append(error.message)
        for signature in attestation.openpgp_signatures if openpgp else ():
            from verifier.signatures.openpgp import verify_detached  # noqa: PLC0415 - see TYPE_CHECKING

            try:
                payload = attestation.envelope.payload
                names.update(dict.fromkeys(verify_detached(payload, signature, openpgp, now=now)))
            except VerificationError as error:
                reasons.append(error.message)
    if not names:
        formats = [f for f, present in (("DSSE", keys), ("OpenPGP", openpgp)) if present]
        raise VerificationError(
            reasons[0]
            if reasons
            else f"it carries no {' or '.join(formats)} signature, which [{', '.join(signers)}] sign in"
        )
    return tuple(names)


def public_keys(signers: Mapping[str, Signer]) -> dict[str, PublicKey]:
    """The public keys among ``signers``; attestations (DSSE) are verified with keys only."""
    keys = {ref: s.public_key for ref, s in signers.items() if s.public_key is not None}
    if not keys:
        raise VerificationError(
            f"none of {', '.join(signers)} is a public key; keyless signers cannot sign attestations here",
            hint="name public-key signers for attestations",
        )
    return keys


def by_statement(attestations: Sequence[Attestation]) -> list[list[Attestation]]:
    """The attestations grouped by the statement they carry (its exact bytes), in the order found."""
    groups: dict[bytes, list[Attestation]] = {}
    for attestation in attestations:
        groups.setdefault(attestation.envelope.payload, []).append(attestation)
    return list(groups.values())


def verify_manifest(
    copies: Sequence[Attestation],
    signers: Mapping[str, Signer],
    threshold: int,
    *,
    now: datetime | None = None,
) -> VerifiedManifest:
    attestation = copies[0]
    verified = signed_by(copies, signers, now=now)
    if len(verified) < threshold:
        raise VerificationError(
            f"signed by {len(verified)} of the {threshold} required distinct keys ([{', '.join(verified)}])"
        )
    try:
        statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
        manifest = load_manifest(statement, attestation.origin)
    except (InputError, VerificationError) as error:
        # Signed but malformed is a definitive answer, cached like a bad signature.
        raise UnreadableEvidence(f"the signed build manifest is invalid: {error.message}") from error
    engine_digest = f"sha256:{manifest.output_engine.sha256}"
    if engine_digest not in statement.subject_digests():
        raise VerificationError(
            f"the manifest's output_engine.sha256 {engine_digest} is not the statement's subject",
            hint="re-create the manifest for the engine it describes",
        )
    return VerifiedManifest(
        manifest=manifest,
        as_json=manifest.model_dump(mode="json"),
        subjects=statement.subject_digests(),
        signers=verified,
        origin=attestation.origin,
        digest=manifest_digest(attestation.envelope),
    )


def verify_predicate(
    copies: Sequence[Attestation],
    signers: Mapping[str, Signer],
    threshold: int,
    scans: bool,
    *,
    now: datetime | None = None,
) -> VerifiedPredicate:
    names = signed_by(copies, signers, now=now)
    if len(names) < threshold:
        raise VerificationError(f"signed by {len(names)} of the {threshold} required distinct keys")
    try:  # signed but unreadable is a definitive answer, cached like a bad signature
        statement = statement_from_envelope(copies[0].envelope, location=copies[0].origin)
        scan = read_scan(statement.predicate_type, statement.predicate, copies[0].origin) if scans else None
    except (InputError, VerificationError) as error:
        raise UnreadableEvidence(f"the signed document is invalid: {error.message}") from error
    return VerifiedPredicate(
        statement.predicate, scan, names, copies[0].origin, statement_digest(copies[0].envelope.payload)
    )


def verify_approval(
    copies: Sequence[Attestation], signers: Mapping[str, Signer], *, now: datetime | None = None
) -> VerifiedApproval:
    attestation = copies[0]
    names = signed_by(copies, signers, now=now)
    statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
    return VerifiedApproval(
        load_approval(statement, attestation.origin),
        names,
        attestation.origin,
        statement_digest(attestation.envelope.payload),
    )


def verify_verification(
    attestation: Attestation, signers: Mapping[str, PublicKey], threshold: int
) -> VerifiedVerification:
    names = verify_envelope(attestation.envelope, signers, threshold=threshold)
    statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
    try:
        verification = load_verification(statement, attestation.origin)
    except InputError as error:
        raise VerificationError(f"the signed verification attestation is invalid: {error.message}") from error
    return VerifiedVerification(verification, names, statement_digest(attestation.envelope.payload))


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
    if match.kind == "key":
        return SignerRecord(key=match.label, key_id=match.signer_id.removeprefix("key:"))
    if match.kind == "notation":
        # "name (certificate subject)": the trust policy's signer name, and the subject under its anchor.
        return SignerRecord(key=match.label.partition(" (")[0], key_id=match.signer_id)
    # A keyless label is "subject (issuer)"; an issuer is a URL, which holds no " (".
    subject, _, issuer = match.label.rpartition(" (")
    return SignerRecord(identity=subject, issuer=issuer.removesuffix(")"))
