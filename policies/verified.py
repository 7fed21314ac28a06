"""Evidence for one artifact, fetched from an evidence source and verified against a policy's signers.

A statement about an engine counts only when it describes the artifact's engine layer
(:class:`~verifier.evidence.ArtifactSubjects`): a build manifest's ``output_engine.sha256``, a GPU
verification's ``engine.sha256`` and a change approval's ``engine_digest`` must be the engine layer's digest
L whichever subject found them (D or L); where L is unknown only a statement naming the artifact digest D
itself counts. A build manifest must also record the artifact's ONNX and calibration-cache files.

Each answer is cached by everything its verdict depends on (``VerifiedEvidence._key``): the
evidence source, the policy revision (a digest over every policy and key file), the registry, repository and
digest of the artifact (evidence is read from that repository, and a classic signature names it), the
signers' formats and trust material (key ids, OpenPGP fingerprints, Notation trust stores, identities,
scopes and levels: :meth:`VerifiedEvidence._signers`), and the question (kind, key names, threshold,
predicate type, expected engine).

A build manifest or change approval may be signed in DSSE (keys) and with detached OpenPGP signatures over
the same statement bytes; a threshold counts distinct keys across both formats and across every place the
statement was found (:func:`signed_by`). Results are kept with
:class:`~verifier.cache.ResultCache`: a verified result for ``ttl`` seconds, a definitive failure (no
signature, a wrong key) for ``negative_ttl``, a transient failure (a registry that is down) never. A cache
hit skips the registry and the cryptography; the evaluator still runs every other check on each admission.
Verification runs in a worker thread (keyless signatures cost ~10 ms of certificate checks), never on the
event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.loader import PolicySet
from policies.results import SignatureFormat, SignatureRecord, SignerRecord
from policies.signers import Signer
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    ChangeApproval,
    EngineVerification,
    load_approval,
    load_verification,
)
from verifier.cache import ResultCache
from verifier.deadline import Deadline
from verifier.digests import sha256_bytes
from verifier.dsse import verify_envelope
from verifier.errors import InputError, TrtguardError, VerificationError
from verifier.evidence import ArtifactAttestations, Attestation, EvidenceSource, ImageSignatures
from verifier.intoto import statement_from_envelope
from verifier.keys import PublicKey
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, EngineBuildManifest, load_manifest, manifest_digest
from verifier.references import ImageReference
from verifier.scans import ScanDocument, read_scan
from verifier.signatures import (
    CountedSignature,
    NoSignatures,
    SignerMatch,
    TrustPolicy,
    VerificationResult,
    verify_image_signatures,
)
from verifier.signatures.openpgp import verify_detached

_log = logging.getLogger(__name__)

Fetch = Callable[[], Awaitable[ArtifactAttestations]]
"""Fetches the attestations of an artifact with its subjects (shared by the checks of one evaluation)."""


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """Lifetimes of cached verification results, in seconds."""

    ttl: float = 600.0
    negative_ttl: float = 30.0
    max_entries: int = 10_000


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


def signed_by(attestations: Sequence[Attestation], signers: Mapping[str, Signer]) -> tuple[str, ...]:
    """Names of the ``signers`` whose DSSE or OpenPGP signature over the statement verifies, in any of
    ``attestations`` (copies of one statement: the same payload bytes). Raises :class:`VerificationError`
    saying why when none does."""
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
            try:
                names.update(dict.fromkeys(verify_detached(attestation.envelope.payload, signature, openpgp)))
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


class VerifiedEvidence:
    """Verified answers about artifacts for one policy set, cached across admissions."""

    def __init__(self, policy_set: PolicySet, source: EvidenceSource, settings: CacheSettings) -> None:
        self._policy_set = policy_set
        self._source = source
        self._trust_policies: dict[tuple[tuple[str, ...], int], TrustPolicy] = {}

        def cache() -> ResultCache[tuple[object, ...], Any]:
            return ResultCache(
                ttl=settings.ttl, negative_ttl=settings.negative_ttl, max_entries=settings.max_entries
            )

        self.signatures_cache: ResultCache[tuple[object, ...], VerifiedSignatures] = cache()
        self.manifests_cache: ResultCache[tuple[object, ...], tuple[VerifiedManifest, ...]] = cache()
        self.approvals_cache: ResultCache[tuple[object, ...], tuple[VerifiedApproval, ...]] = cache()
        self.attestations_cache: ResultCache[tuple[object, ...], VerifiedAttestation] = cache()
        self.predicates_cache: ResultCache[tuple[object, ...], tuple[VerifiedPredicate, ...]] = cache()
        self.verifications_cache: ResultCache[tuple[object, ...], VerifiedVerification] = cache()

    def _key(self, kind: str, reference: ImageReference, *parts: object) -> tuple[object, ...]:
        """The key of a cached answer: everything its verdict depends on.

        ``parts`` are the question's own terms (key names, threshold, predicate type, expected engine). The
        repository matters even for one digest: evidence is read from the reference's repository, and a
        classic signature is valid only for the repository it names, so a result for ``a/signed@D`` must
        not answer for ``a/unsigned@D``. ``reference`` is pinned by the callers; a tag would stand in for
        its digest only until the tag moves, so it is kept in the key if one ever arrives.
        """
        return (
            kind,
            id(self._source),  # the source lives as long as this object: its id cannot be reused meanwhile
            self._policy_set.revision,
            reference.registry,
            reference.repository,
            reference.digest or f"tag:{reference.tag}",
            *parts,
        )

    def _signers(self, keys: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
        """Each signer's name, format and trust material, for cache keys: a verdict depends on all three."""
        return tuple((ref, s.kind, s.fingerprint) for ref, s in self._policy_set.signers_for(keys).items())

    def trust_policy(self, keys: Sequence[str], threshold: int) -> TrustPolicy:
        """The signature policy for a rule's keys and threshold (built once per rule)."""
        found = self._trust_policies.get((tuple(keys), threshold))
        if found is None:
            signers = self._policy_set.signers_for(keys)
            roots = {
                s.trust_root.fingerprint: s.trust_root for s in signers.values() if s.trust_root is not None
            }
            if len(roots) > 1:
                raise InputError(
                    f"keyless signers [{', '.join(keys)}] use different trusted roots",
                    hint="list keyless signers of one Sigstore instance per rule",
                )
            found = TrustPolicy(
                keys={ref: s.public_key for ref, s in signers.items() if s.public_key is not None},
                identities=tuple(s.identity for s in signers.values() if s.identity is not None),
                notation={ref: s.notation for ref, s in signers.items() if s.notation is not None},
                threshold=threshold,
                trust_root=next(iter(roots.values()), None),
                rekor_keys=tuple(s.rekor_key for s in signers.values() if s.rekor_key is not None),
                require_tlog=any(s.rekor_key is not None for s in signers.values()),
            )
            self._trust_policies[(tuple(keys), threshold)] = found
        return found

    def signer_records(self, names: Sequence[str]) -> tuple[SignerRecord, ...]:
        """The named signers of the policies as the decision log records them (key name and key id)."""
        signers = self._policy_set.signers
        return tuple(
            SignerRecord(key=name, key_id=signer.public_key.key_id if signer.public_key else None)
            for name in names
            if (signer := signers.get(name)) is not None
        )

    async def image_signatures(
        self, reference: ImageReference, keys: Sequence[str], threshold: int, deadline: Deadline
    ) -> VerifiedSignatures:
        """Signatures over the (pinned) image, verified; raises VerificationError below the threshold."""

        async def compute() -> VerifiedSignatures:
            material = await self._source.image_signatures(reference, deadline)
            where = material.origin or self._source.description
            if not material.count:
                raise NoSignatures(
                    f"no signature found (looked in {where})",
                    hint="sign the image (`trtguard sign`, `cosign sign`) and push the signature",
                )
            policy = self.trust_policy(keys, threshold)
            result = await asyncio.to_thread(
                verify_image_signatures,
                material.digest,
                policy,
                classic=material.classic,
                bundles=material.bundles,
                envelopes=tuple(s.envelope for s in material.statements),
                notation=material.notation,
                # A classic signature names the repository it was made for; one copied to another
                # repository (or registry) is not a signature of this image there.
                repository=reference.name,
                location=where,
            )
            return VerifiedSignatures(result, tuple(_signature_record(c, material) for c in result.counted))

        key = self._key("signatures", reference, tuple(keys), threshold, self._signers(keys))
        return await self.signatures_cache.get_or_compute(key, compute)

    async def attestation(
        self,
        reference: ImageReference,
        predicate_type: str,
        keys: Sequence[str],
        threshold: int,
        fetch: Fetch,
    ) -> VerifiedAttestation:
        """The attestation of ``predicate_type`` about the artifact that ``threshold`` of ``keys`` signed."""

        async def compute() -> VerifiedAttestation:
            candidates = [a for a in (await fetch()).attestations if a.predicate_type == predicate_type]
            if not candidates:
                raise VerificationError(f"no attestation of type {predicate_type}")
            signers = public_keys(self._policy_set.signers_for(keys))
            reasons = []
            for attestation in candidates:
                try:
                    names = await asyncio.to_thread(
                        verify_envelope, attestation.envelope, signers, threshold=threshold
                    )
                except VerificationError as error:
                    reasons.append(error.message)
                    continue
                return VerifiedAttestation(names, statement_digest(attestation.envelope.payload))
            raise VerificationError(
                f"no attestation of type {predicate_type} signed by [{', '.join(keys)}]: {reasons[0]}"
            )

        key = self._key("attestation", reference, predicate_type, tuple(keys), threshold)
        return await self.attestations_cache.get_or_compute(key, compute)

    async def predicates(
        self,
        reference: ImageReference,
        predicate_type: str,
        keys: Sequence[str],
        threshold: int,
        fetch: Fetch,
        *,
        scans: bool,
    ) -> tuple[VerifiedPredicate, ...]:
        """Every attestation of ``predicate_type`` about the artifact signed by ``threshold`` of ``keys`` (at
        least one), read as an SBOM or scan when ``scans`` (one that is not is refused like a bad one)."""

        async def compute() -> tuple[VerifiedPredicate, ...]:
            candidates = [a for a in (await fetch()).attestations if a.predicate_type == predicate_type]
            signers = self._policy_set.signers_for(keys)
            verified: list[VerifiedPredicate] = []
            reasons: list[str] = []
            for copies in _by_statement(candidates):
                try:
                    verified.append(
                        await asyncio.to_thread(_verify_predicate, copies, signers, threshold, scans)
                    )
                except TrtguardError as error:
                    reasons.append(error.message)
            if verified:
                return tuple(verified)
            why = f" signed by [{', '.join(keys)}]: {reasons[0]}" if reasons else ""
            raise VerificationError(f"no attestation of type {predicate_type}{why}")

        key = self._key("predicates", reference, predicate_type, tuple(keys), threshold, scans)
        return await self.predicates_cache.get_or_compute(key, compute)

    async def build_manifest(
        self, reference: ImageReference, keys: Sequence[str], threshold: int, fetch: Fetch
    ) -> VerifiedManifest:
        """The newest build manifest of the engine signed by ``threshold`` of ``keys``."""
        manifests = await self.build_manifests(reference, keys, threshold, fetch)
        # Several signed manifests for one engine: the newest build is the one that describes it.
        return max(manifests, key=lambda v: v.manifest.build_timestamp)

    async def build_manifests(
        self, reference: ImageReference, keys: Sequence[str], threshold: int, fetch: Fetch
    ) -> tuple[VerifiedManifest, ...]:
        """Every build manifest of the engine signed by ``threshold`` of ``keys`` (at least one)."""

        async def compute() -> tuple[VerifiedManifest, ...]:
            fetched = await fetch()
            candidates = [a for a in fetched.attestations if a.predicate_type == ENGINE_BUILD_PREDICATE_TYPE]
            if not candidates:
                raise fetched.subjects.not_found("build manifest attestation", self._source.description)
            signers = self._policy_set.signers_for(keys)
            verified: list[VerifiedManifest] = []
            reasons: list[str] = []
            elsewhere: list[VerificationError] = []  # signed, but about another engine file
            for copies in _by_statement(candidates):
                origin = copies[0].origin
                try:
                    found = await asyncio.to_thread(_verify_manifest, copies, signers, threshold)
                except TrtguardError as error:
                    reasons.append(f"{origin}: {error.message}")
                    continue
                try:
                    fetched.subjects.require_build_manifest(found.manifest, found.subjects)
                except VerificationError as error:
                    elsewhere.append(VerificationError(f"{error.message} ({origin})", hint=error.hint))
                    continue
                verified.append(found)
            if verified:
                return tuple(verified)
            if elsewhere:
                first = elsewhere[0]
                raise VerificationError(
                    f"no build manifest signed by [{', '.join(keys)}] describes this engine: {first.message}",
                    hint=first.hint,
                )
            raise VerificationError(f"build manifest not signed by [{', '.join(keys)}]: {reasons[0]}")

        key = self._key("manifest", reference, tuple(keys), threshold, self._signers(keys))
        return await self.manifests_cache.get_or_compute(key, compute)

    async def approvals(
        self, reference: ImageReference, keys: Sequence[str], fetch: Fetch, *, fresh: bool = False
    ) -> tuple[VerifiedApproval, ...]:
        """Every change approval about the artifact signed by one of ``keys`` (possibly none).

        ``fresh`` looks again rather than answer from the cache: change control asks so when the cached
        approvals do not suffice, so that an approval pushed since is seen by the very next admission.
        """

        async def compute() -> tuple[VerifiedApproval, ...]:
            fetched = await fetch()
            candidates = [
                a for a in fetched.attestations if a.predicate_type == CHANGE_APPROVAL_PREDICATE_TYPE
            ]
            signers = self._policy_set.signers_for(keys)
            found = []
            for copies in _by_statement(candidates):
                try:
                    approval = await asyncio.to_thread(_verify_approval, copies, signers)
                    fetched.subjects.require_describes(
                        approval.approval.engine_digest, copies[0].subjects, "the change approval"
                    )
                except TrtguardError as error:
                    _log.info("approval %s ignored: %s", copies[0].origin, error.message)
                    continue
                found.append(approval)
            return tuple(found)

        key = self._key("approvals", reference, tuple(keys), self._signers(keys))
        if fresh:
            self.approvals_cache.invalidate(key)
        return await self.approvals_cache.get_or_compute(key, compute)

    async def gpu_verification(
        self,
        reference: ImageReference,
        keys: Sequence[str],
        threshold: int,
        engine_sha256: str | None,
        fetch: Fetch,
    ) -> VerifiedVerification:
        """A passing GPU verification of the engine signed by ``threshold`` of ``keys``.

        It must be about the artifact's engine layer
        (:meth:`~verifier.evidence.ArtifactSubjects.require_describes`) and, when
        the build manifest is known, about the engine file ``engine_sha256`` that manifest describes.
        """

        async def compute() -> VerifiedVerification:
            fetched = await fetch()
            candidates = [
                a for a in fetched.attestations if a.predicate_type == ENGINE_VERIFICATION_PREDICATE_TYPE
            ]
            if not candidates:
                raise fetched.subjects.not_found("GPU verification attestation")
            signers = public_keys(self._policy_set.signers_for(keys))
            reasons = []
            for attestation in candidates:
                try:
                    found = await asyncio.to_thread(_verify_verification, attestation, signers, threshold)
                    observed = found.verification
                    fetched.subjects.require_describes(
                        observed.engine.sha256, attestation.subjects, "the GPU verification"
                    )
                except TrtguardError as error:
                    reasons.append(error.message)
                    continue
                if engine_sha256 is not None and observed.engine.sha256 != engine_sha256:
                    reasons.append(f"it is about engine file sha256:{observed.engine.sha256}, not this one")
                elif observed.result != "pass":
                    failed = ", ".join(c.field for c in observed.checks if c.status == "fail")
                    reasons.append(f"the GPU verifier reported failed checks: {failed}")
                else:
                    return found
            raise VerificationError(
                f"no passing GPU verification signed by [{', '.join(keys)}]: {reasons[0]}"
            )

        key = self._key("verification", reference, tuple(keys), threshold, engine_sha256)
        return await self.verifications_cache.get_or_compute(key, compute)


def _by_statement(attestations: Sequence[Attestation]) -> list[list[Attestation]]:
    """The attestations grouped by the statement they carry (its exact bytes), in the order found."""
    groups: dict[bytes, list[Attestation]] = {}
    for attestation in attestations:
        groups.setdefault(attestation.envelope.payload, []).append(attestation)
    return list(groups.values())


def _verify_manifest(
    copies: Sequence[Attestation], signers: Mapping[str, Signer], threshold: int
) -> VerifiedManifest:
    attestation = copies[0]
    verified = signed_by(copies, signers)
    if len(verified) < threshold:
        raise VerificationError(
            f"signed by {len(verified)} of the {threshold} required distinct keys ([{', '.join(verified)}])"
        )
    statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
    try:
        manifest = load_manifest(statement, attestation.origin)
    except InputError as error:
        # Signed but malformed is a definitive answer, cached like a bad signature.
        raise VerificationError(f"the signed build manifest is invalid: {error.message}") from error
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


def _verify_predicate(
    copies: Sequence[Attestation], signers: Mapping[str, Signer], threshold: int, scans: bool
) -> VerifiedPredicate:
    names = signed_by(copies, signers)
    if len(names) < threshold:
        raise VerificationError(f"signed by {len(names)} of the {threshold} required distinct keys")
    statement = statement_from_envelope(copies[0].envelope, location=copies[0].origin)
    try:  # signed but unreadable is a definitive answer, cached like a bad signature
        scan = read_scan(statement.predicate_type, statement.predicate, copies[0].origin) if scans else None
    except InputError as error:
        raise VerificationError(f"the signed document is invalid: {error.message}") from error
    return VerifiedPredicate(
        statement.predicate, scan, names, copies[0].origin, statement_digest(copies[0].envelope.payload)
    )


def _verify_approval(copies: Sequence[Attestation], signers: Mapping[str, Signer]) -> VerifiedApproval:
    attestation = copies[0]
    names = signed_by(copies, signers)
    statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
    return VerifiedApproval(
        load_approval(statement, attestation.origin),
        names,
        attestation.origin,
        statement_digest(attestation.envelope.payload),
    )


def _verify_verification(
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


def _signature_record(counted: CountedSignature, material: ImageSignatures) -> SignatureRecord:
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
        signers=tuple(_signer(match) for match in counted.signers),
        tlog_index=counted.log_index,
    )


def _signer(match: SignerMatch) -> SignerRecord:
    if match.kind == "key":
        return SignerRecord(key=match.label, key_id=match.signer_id.removeprefix("key:"))
    if match.kind == "notation":
        # "name (certificate subject)": the trust policy's signer name, and the subject under its anchor.
        return SignerRecord(key=match.label.partition(" (")[0], key_id=match.signer_id)
    # A keyless label is "subject (issuer)"; an issuer is a URL, which holds no " (".
    subject, _, issuer = match.label.rpartition(" (")
    return SignerRecord(identity=subject, issuer=issuer.removesuffix(")"))
