"""Typed loaders: build manifests, predicates (SBOMs and scans), change approvals and GPU verifications, each
returned as a verified fact or refused with :class:`~verifier.verification.StatementRefused`.

The evaluator, the evidence-package checker and ``verify-engine`` load them alike. A build manifest is valid
when its statement verifies, its predicate is a valid engine build manifest, and the engine it describes
(``output_engine.sha256``) is among the statement's subjects (:func:`verify_manifest`); where it is used
(an artifact's engine layer, its ONNX and calibration files) is each caller's own question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from verifier.attestations import ChangeApproval, EngineVerification, load_approval, load_verification
from verifier.base import InputError
from verifier.manifest import EngineBuildManifest, load_manifest
from verifier.model_signing import MODEL_SIGNING, read_signature
from verifier.scans import read_scan
from verifier.verification._statement import (
    StatementRefused,
    StatementTrust,
    UnreadableEvidence,
    VerifiedStatement,
    verify_statement,
)

if TYPE_CHECKING:
    from verifier.evidence import Attestation
    from verifier.scans.model import ScanDocument


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
    #: When a counted signature stops verifying (None: none does on its own).
    valid_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class VerifiedPredicate:
    """An attestation whose signature verified: its predicate, read as an SBOM or scan where asked."""

    predicate: dict[str, Any]
    scan: ScanDocument | None
    signers: tuple[str, ...]
    origin: str
    #: SHA-256 of the attestation's in-toto statement (the DSSE payload), as the decision log names it.
    digest: str
    valid_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class VerifiedApproval:
    """A change approval whose signature verified, with the names of the keys that signed it."""

    approval: ChangeApproval
    signers: tuple[str, ...]
    origin: str
    #: SHA-256 of the approval's in-toto statement (the DSSE payload), as the decision log names it.
    digest: str = ""
    valid_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class VerifiedAttestation:
    """An attestation that met a rule: the names of the keys that signed it and its statement digest."""

    signers: tuple[str, ...]
    digest: str
    valid_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class VerifiedVerification:
    """A passing GPU verification of an engine, with its signers and statement digest."""

    verification: EngineVerification
    signers: tuple[str, ...]
    digest: str
    valid_until: datetime | None = None


def dsse_trust(signers: Mapping[str, Any], threshold: int = 1) -> StatementTrust:
    """The public keys among ``signers``: attestations other than build manifests and approvals are DSSE."""
    trust = StatementTrust.of(signers, threshold, formats=("DSSE",))
    if trust.empty:
        raise StatementRefused(
            f"none of {', '.join(signers)} is a public key; keyless signers cannot sign attestations here",
            hint="name public-key signers for attestations",
        )
    return trust


def by_statement(attestations: Sequence[Attestation]) -> list[list[Attestation]]:
    """The attestations grouped by the statement they carry (its exact bytes), in the order found."""
    groups: dict[bytes, list[Attestation]] = {}
    for attestation in attestations:
        groups.setdefault(attestation.envelope.payload, []).append(attestation)
    return list(groups.values())


def verify_manifest(copies: Sequence[Attestation], trust: StatementTrust) -> VerifiedManifest:
    """A signed build manifest as a fact: its statement verifies with ``trust`` and it is a valid build
    manifest (:func:`manifest_of`). :class:`StatementRefused` else."""
    try:
        verified = verify_statement(copies, trust)
    except UnreadableEvidence as error:
        raise UnreadableEvidence(f"the signed build manifest is invalid: {error.message}") from error
    return manifest_of(verified)


def manifest_of(verified: VerifiedStatement) -> VerifiedManifest:
    """The one rule for a valid build manifest, once its statement verified: the predicate is an engine build
    manifest and its ``output_engine.sha256`` is among the statement's subjects (admission, the
    evidence-package checker and ``verify-engine`` alike). :class:`StatementRefused` else."""
    try:
        manifest = load_manifest(verified.statement, verified.origin)
    except InputError as error:
        # Signed but malformed is a definitive answer, cached like a bad signature; "cannot tell" to rules.
        raise UnreadableEvidence(f"the signed build manifest is invalid: {error.message}") from error
    engine_digest = f"sha256:{manifest.output_engine.sha256}"
    subjects = verified.statement.subject_digests()
    if engine_digest not in subjects:
        raise StatementRefused(
            f"the manifest's output_engine.sha256 {engine_digest} is not the statement's subject",
            hint="re-create the manifest for the engine it describes",
        )
    return VerifiedManifest(
        manifest=manifest,
        as_json=manifest.model_dump(mode="json"),
        subjects=subjects,
        signers=verified.signers,
        origin=verified.origin,
        # verifier.manifest.manifest_digest: the statement's digest, how approvals and successors name it.
        digest=verified.digest,
        valid_until=verified.valid_until,
    )


def verify_predicate(
    copies: Sequence[Attestation], trust: StatementTrust, *, scans: bool
) -> VerifiedPredicate:
    """A signed attestation as a fact, its predicate read as an SBOM or scan when ``scans``."""
    try:
        verified = verify_statement(copies, trust)
    except UnreadableEvidence as error:
        raise UnreadableEvidence(f"the signed document is invalid: {error.message}") from error
    statement = verified.statement
    try:  # signed but unreadable is a definitive answer, cached like a bad signature; "cannot tell" to rules
        scan = read_scan(statement.predicate_type, statement.predicate, verified.origin) if scans else None
    except InputError as error:
        raise UnreadableEvidence(f"the signed document is invalid: {error.message}") from error
    if scan is not None and scan.about and not set(scan.about) & statement.subject_digests():
        # signed for this image, but its content is a scan or SBOM of another one (docs/scans.md)
        raise StatementRefused(
            f"the signed document's content is about {', '.join(scan.about)}, not its statement's subject "
            f"{', '.join(sorted(statement.subject_digests()))}",
            hint="attest the scan of this image (or add the digest the scanner reports as a subject)",
        )
    return VerifiedPredicate(
        statement.predicate, scan, verified.signers, verified.origin, verified.digest, verified.valid_until
    )


def verify_approval(copies: Sequence[Attestation], trust: StatementTrust) -> VerifiedApproval:
    """A signed change approval as a fact (:class:`InputError` when its predicate is not one)."""
    verified = verify_statement(copies, trust)
    approval = load_approval(verified.statement, verified.origin)
    return VerifiedApproval(
        approval, verified.signers, verified.origin, verified.digest, verified.valid_until
    )


def verify_verification(attestation: Attestation, trust: StatementTrust) -> VerifiedVerification:
    """A signed GPU verification as a fact (passing or not: the caller judges its result)."""
    verified = verify_statement([attestation], trust)
    try:
        verification = load_verification(verified.statement, verified.origin)
    except InputError as error:
        raise StatementRefused(f"the signed verification attestation is invalid: {error.message}") from error
    return VerifiedVerification(verification, verified.signers, verified.digest, verified.valid_until)


def verify_attestation(attestation: Attestation, trust: StatementTrust) -> VerifiedAttestation:
    """A signed attestation of any type as a fact: who signed it and its statement digest."""
    verified = verify_statement([attestation], trust)
    return VerifiedAttestation(verified.signers, verified.digest, verified.valid_until)


@dataclass(frozen=True, slots=True)
class VerifiedModelStatement:
    """A model-signing statement found as evidence whose signatures met its trust, and the files it signs."""

    signers: tuple[str, ...]
    distinct_keys: int
    origin: str
    model_name: str
    #: Every signed file's name → SHA-256 hex.
    files: Mapping[str, str]

    def covers(self, sha256_hex: str) -> tuple[str, ...]:
        """The names of the signed files whose digest is ``sha256_hex`` (empty: none)."""
        return tuple(sorted(name for name, digest in self.files.items() if digest == sha256_hex))

    def described(self, name: str) -> str:
        """A signed file as people name it: ``model/file``, or the model's name for a one-file model (whose
        one file upstream names ``.``)."""
        if name == ".":
            return self.model_name or name
        return f"{self.model_name}/{name}" if self.model_name else name


def verify_model_statement(copies: Sequence[Attestation], trust: StatementTrust) -> VerifiedModelStatement:
    """A model signature found as evidence (copies of one statement, from Sigstore bundles), verified by the
    verification room against ``trust`` in the model-signing format alone; :class:`StatementRefused` or
    :class:`InputError` saying why it does not count."""
    only = StatementTrust(
        {MODEL_SIGNING.label: trust.material.get(MODEL_SIGNING.label, {})},
        trust.names,
        trust.threshold,
        trust.now,
    )
    verified = verify_statement(copies, only)
    bundle = copies[0].bundle
    if bundle is None:  # verify_statement counted a model-signing signature: it came in a bundle
        raise StatementRefused("the model signature came without its bundle", location=copies[0].origin)
    signature = read_signature(bundle, copies[0].origin)
    return VerifiedModelStatement(
        verified.signers, verified.distinct_keys, verified.origin, signature.model_name, signature.resources
    )
