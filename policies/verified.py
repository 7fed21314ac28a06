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
statement was found (:func:`verifier.verification.verify_statement`, which does all the verifying: this
module keeps the cache and asks). Results are kept with
:class:`~verifier.base.ResultCache`: a verified result for ``ttl`` seconds, a definitive failure (no
signature, a wrong key) for ``negative_ttl``, a transient failure (a registry that is down) never. A cache
hit skips the registry and the cryptography; the evaluator still runs every other check on each admission.
Verification runs in a worker thread (keyless signatures cost ~10 ms of certificate checks), never on the
event loop.

The image signatures that counted are written down here too, in the decision record's terms
(:class:`VerifiedSignatures`, :func:`signature_record`): what :mod:`verifier.verification` returned, named as
the decision log names it.

One module on purpose: :class:`VerifiedEvidence` is one object, every cache of verified evidence with the
cache keys and per-rule trust its methods share; splitting it by evidence kind would spread that state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from policies.cel import CelActivation, prepare_activation
from policies.loader import PolicySet
from policies.results import SignatureFormat, SignatureRecord, SignerRecord
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
)
from verifier.base import (
    Deadline,
    ImageReference,
    ResultCache,
    TrtguardError,
    VerificationError,
    sha256_bytes,
)
from verifier.evidence import ArtifactAttestations, EvidenceSource
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE
from verifier.scans import same_predicate_type
from verifier.verification import (
    MODEL_SIGNING_PREDICATE,
    NoSignatures,
    StatementTrust,
    UnreadableEvidence,
    VerifiedApproval,
    VerifiedAttestation,
    VerifiedManifest,
    VerifiedModelStatement,
    VerifiedPredicate,
    VerifiedVerification,
    by_statement,
    dsse_trust,
    image_trust,
    statement_digest,
    verify_approval,
    verify_attestation,
    verify_image,
    verify_manifest,
    verify_model_statement,
    verify_predicate,
    verify_verification,
)

if TYPE_CHECKING:
    from verifier.evidence import ImageSignatures
    from verifier.verification import CountedSignature, SignerMatch, TrustPolicy, VerificationResult

__all__ = [
    "CacheSettings",
    "Documents",
    "Fetch",
    "VerifiedApproval",
    "VerifiedAttestation",
    "VerifiedEvidence",
    "VerifiedManifest",
    "VerifiedModelStatement",
    "VerifiedPredicate",
    "VerifiedSignatures",
    "VerifiedVerification",
]

_log = logging.getLogger(__name__)

Fetch = Callable[[], Awaitable[ArtifactAttestations]]
"""Fetches the attestations of an artifact with its subjects (shared by the checks of one evaluation)."""


_Document = TypeVar("_Document", VerifiedPredicate, VerifiedManifest, VerifiedModelStatement)


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


@dataclass(frozen=True, slots=True)
class Documents(Generic[_Document]):
    """The signed documents of one kind about an artifact, with those that could not be counted.

    A document that does not verify (another key, a bad signature, about another engine file) fails only
    itself; one signed by the rule's keys whose content cannot be read cannot tell what it says nor when it
    was made, so the rules judge it "cannot tell" (``onError``) rather than let an older one speak for it.
    Each of ``unreadable`` and ``refused`` is ``"where: why"``.
    """

    readable: tuple[_Document, ...]
    unreadable: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """Lifetimes of cached verification results, in seconds."""

    ttl: float = 600.0
    negative_ttl: float = 30.0
    max_entries: int = 10_000


def _valid_until(value: object) -> datetime | None:
    """When a cached answer stops being true: the earliest ``valid_until`` of the facts it holds."""
    facts = value if isinstance(value, tuple) else (value,)
    ends = [end for fact in facts if (end := getattr(fact, "valid_until", None)) is not None]
    return min(ends, default=None)


#: How many manifests' CEL data :class:`VerifiedEvidence` keeps (emptied when full).
_MANIFEST_ACTIVATIONS = 256
#: How many answers each table of answers by key names keeps (emptied when full).
_BY_KEYS_MAX = 1024

K = TypeVar("K")
V = TypeVar("V")


def _remember(table: dict[K, V], key: K, value: V) -> None:
    """Keep ``value`` in ``table``, emptied first when full (the names come from the policy set, but a
    manifest's signers may be any subset of them)."""
    if len(table) >= _BY_KEYS_MAX:
        table.clear()
    table[key] = value


class VerifiedEvidence:
    """Verified answers about artifacts for one policy set, cached across admissions."""

    def __init__(
        self,
        policy_set: PolicySet,
        source: EvidenceSource,
        settings: CacheSettings,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """``clock`` is the engine's: signatures whose verdict depends on the time are verified at it."""
        self._policy_set = policy_set
        self._source = source
        self._clock = clock
        self._trust_policies: dict[tuple[tuple[str, ...], int], TrustPolicy] = {}
        self._signer_keys: dict[tuple[str, ...], tuple[tuple[str, str, str], ...]] = {}
        # ``signer_records`` and ``signing_fix`` answers by key names: fixed by the policy set and source.
        self._signer_records: dict[tuple[str, ...], tuple[SignerRecord, ...]] = {}
        self._signing_fixes: dict[tuple[str, ...], str] = {}

        def cache() -> ResultCache[tuple[object, ...], Any]:
            return ResultCache(
                ttl=settings.ttl,
                negative_ttl=settings.negative_ttl,
                max_entries=settings.max_entries,
                valid_until=_valid_until,
            )

        self.signatures_cache: ResultCache[tuple[object, ...], VerifiedSignatures] = cache()
        self.manifests_cache: ResultCache[tuple[object, ...], Documents[VerifiedManifest]] = cache()
        self.approvals_cache: ResultCache[tuple[object, ...], tuple[VerifiedApproval, ...]] = cache()
        self.attestations_cache: ResultCache[tuple[object, ...], VerifiedAttestation] = cache()
        self.predicates_cache: ResultCache[tuple[object, ...], Documents[VerifiedPredicate]] = cache()
        self.verifications_cache: ResultCache[tuple[object, ...], VerifiedVerification] = cache()
        # CEL data over a manifest and its engine, by the manifest's envelope digest and the engine.
        self._manifest_activations: dict[tuple[str | None, ...], CelActivation] = {}

    def manifest_activation(
        self, verified: VerifiedManifest, name: str | None, reference: str, digest: str | None
    ) -> CelActivation:
        """The CEL data of expressions that read a manifest and its engine but not the workload.

        Checked against the limits and handed to cel-cpp once per manifest and engine rather than on every
        admission: cel-cpp converts the manifest on first use, which costs several times what an expression
        does. The data depends on nothing else (the envelope's digest fixes the manifest), and inline
        expressions run one at a time on the event loop's thread. Raises :class:`CelEvaluationError` as
        :func:`~policies.cel.prepare_activation` does (nothing is kept then).
        """
        key = (verified.digest, name, reference, digest)
        found = self._manifest_activations.get(key)
        if found is None:
            if len(self._manifest_activations) >= _MANIFEST_ACTIVATIONS:
                self._manifest_activations.clear()
            engine = {"name": name, "reference": reference, "digest": digest}
            found = prepare_activation({"manifest": verified.as_json, "workload": {}, "engine": engine})
            self._manifest_activations[key] = found
        return found

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
        """Each signer's name, format and trust material, for cache keys: a verdict depends on all three.

        Fixed by the policy set, so made once per list of keys (it is part of every cache key asked)."""
        names = tuple(keys)
        found = self._signer_keys.get(names)
        if found is None:
            signers = self._policy_set.signers_for(names)
            found = self._signer_keys[names] = tuple(
                (ref, s.kind, s.fingerprint) for ref, s in signers.items()
            )
        return found

    async def model_signatures(
        self, keys: Sequence[str], threshold: int, fetch: Fetch
    ) -> Documents[VerifiedModelStatement]:
        """Every model-signing signature found beside the artifact signed by ``threshold`` of ``keys`` (the
        models a build read: a signature is about the model's files, never the engine, so it is found among
        the statements about other digests); those that did not count are ``refused``."""
        fetched = await fetch()
        candidates = [
            a
            for a in (*fetched.attestations, *fetched.elsewhere)
            if a.predicate_type == MODEL_SIGNING_PREDICATE and a.bundle is not None
        ]
        trust = StatementTrust.of(
            self._policy_set.signers_for(keys), threshold, formats=["model-signing"], now=self._clock()
        )
        verified: list[VerifiedModelStatement] = []
        refused: list[str] = []
        for copies in by_statement(candidates):
            try:
                verified.append(await asyncio.to_thread(verify_model_statement, copies, trust))
            except TrtguardError as error:
                refused.append(f"{copies[0].origin}: {error.message}")
        return Documents(tuple(verified), refused=tuple(refused))

    def _statement_trust(self, keys: Sequence[str], threshold: int) -> StatementTrust:
        """Who may sign a statement for a rule: its signers in every statement format, and its threshold."""
        return StatementTrust.of(self._policy_set.signers_for(keys), threshold, now=self._clock())

    def trust_policy(self, keys: Sequence[str], threshold: int) -> TrustPolicy:
        """The signature policy for a rule's keys and threshold (built once per rule)."""
        found = self._trust_policies.get((tuple(keys), threshold))
        if found is None:
            found = image_trust(self._policy_set.signers_for(keys), threshold)
            self._trust_policies[(tuple(keys), threshold)] = found
        return found

    def signer_records(self, names: Sequence[str]) -> tuple[SignerRecord, ...]:
        """The named signers of the policies as the decision log records them (key name and key id)."""
        key = tuple(names)
        found = self._signer_records.get(key)
        if found is None:
            signers = self._policy_set.signers
            found = tuple(
                SignerRecord(key=name, key_id=signer.public_key.key_id if signer.public_key else None)
                for name in key
                if (signer := signers.get(name)) is not None
            )
            _remember(self._signer_records, key, found)
        return found

    async def image_signatures(
        self, reference: ImageReference, keys: Sequence[str], threshold: int, deadline: Deadline
    ) -> VerifiedSignatures:
        """Signatures over the (pinned) image, verified; raises VerificationError below the threshold."""

        async def compute() -> VerifiedSignatures:
            material = await self._source.image_signatures(reference, deadline)
            where = material.origin or self._source.description
            if not material.count:
                raise NoSignatures(f"no signature found (looked in {where})", hint=self.signing_fix(keys))
            policy = self.trust_policy(keys, threshold)
            result = await asyncio.to_thread(
                verify_image,
                material,
                policy,
                # A classic signature names the repository it was made for; one copied to another
                # repository (or registry) is not a signature of this image there.
                repository=reference.name,
                location=where,
                now=self._clock(),
                deadline=deadline,
            )
            return VerifiedSignatures(result, tuple(signature_record(c, material) for c in result.counted))

        key = self._key("signatures", reference, tuple(keys), threshold, self._signers(keys))
        return await self.signatures_cache.get_or_compute(key, compute, now=self._clock())

    def signing_fix(self, keys: Sequence[str]) -> str:
        """How to make a signature ``keys`` would verify: the tools of their formats (Notation's for Notation
        signers), and, offline, how the folder gets it."""
        key = tuple(keys)
        found = self._signing_fixes.get(key)
        if found is None:
            found = self._signing_fix(key)
            _remember(self._signing_fixes, key, found)
        return found

    def _signing_fix(self, keys: tuple[str, ...]) -> str:
        kinds = {signer.kind for name in keys if (signer := self._policy_set.signers.get(name)) is not None}
        tools = []
        if kinds - {"notation"}:
            tools.append("`trtguard sign`")
        if "notation" in kinds:
            tools.append("`notation sign` or `trtguard sign --format notation`")
        offline = (
            "; offline, copy it into the folder with `trtguard fetch-attestations`"
            if not self._source.concurrent_lookups
            else ""
        )
        return f"sign the image with {' or '.join(keys)} ({'; '.join(tools) or '`trtguard sign`'}){offline}"

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
            fetched = await fetch()
            candidates = [a for a in fetched.attestations if a.predicate_type == predicate_type]
            if not candidates:
                elsewhere = fetched.about_other_digests(predicate_type)
                raise VerificationError(f"no attestation of type {predicate_type}{elsewhere}")
            trust = dsse_trust(self._policy_set.signers_for(keys), threshold)
            reasons = []
            for attestation in candidates:
                try:
                    return await asyncio.to_thread(verify_attestation, attestation, trust)
                except VerificationError as error:
                    reasons.append(error.message)
            raise VerificationError(
                f"no attestation of type {predicate_type} signed by [{', '.join(keys)}]: {reasons[0]}"
            )

        key = self._key("attestation", reference, predicate_type, tuple(keys), threshold)
        return await self.attestations_cache.get_or_compute(key, compute, now=self._clock())

    async def predicates(
        self,
        reference: ImageReference,
        predicate_type: str,
        keys: Sequence[str],
        threshold: int,
        fetch: Fetch,
        *,
        scans: bool,
    ) -> Documents[VerifiedPredicate]:
        """Every attestation of ``predicate_type`` about the artifact signed by ``threshold`` of ``keys``,
        read as an SBOM or scan when ``scans``; raises :class:`VerificationError` when none is signed so."""

        async def compute() -> Documents[VerifiedPredicate]:
            fetched = await fetch()
            # SBOM and scan types match their family (https://cyclonedx.org/bom and .../bom/v1.6): a rule
            # naming one version must not miss a newer document attested under another (docs/scans.md).
            counts = partial(same_predicate_type, predicate_type) if scans else predicate_type.__eq__
            candidates = [a for a in fetched.attestations if counts(a.predicate_type)]
            trust = self._statement_trust(keys, threshold)
            verified: list[VerifiedPredicate] = []
            unreadable: list[str] = []
            refused: list[str] = []
            for copies in by_statement(candidates):
                try:
                    verified.append(await asyncio.to_thread(verify_predicate, copies, trust, scans=scans))
                except UnreadableEvidence as error:
                    unreadable.append(f"{copies[0].origin}: {error.message}")
                except TrtguardError as error:
                    refused.append(f"{copies[0].origin}: {error.message}")
            # too large or deep to check, perhaps the newest: cannot tell, never judged as if absent
            unreadable += [
                u.describe()
                for u in fetched.unchecked
                if u.predicate_type is None or counts(u.predicate_type)
            ]
            if verified or unreadable:
                return Documents(tuple(verified), tuple(unreadable), tuple(refused))
            why = f" signed by [{', '.join(keys)}]: {'; '.join(refused)}" if refused else ""
            elsewhere = fetched.about_other_digests(predicate_type, counts=counts)
            raise VerificationError(f"no attestation of type {predicate_type}{why}{elsewhere}")

        key = self._key("predicates", reference, predicate_type, tuple(keys), threshold, scans)
        return await self.predicates_cache.get_or_compute(key, compute, now=self._clock())

    async def build_manifests(
        self, reference: ImageReference, keys: Sequence[str], threshold: int, fetch: Fetch
    ) -> Documents[VerifiedManifest]:
        """Every build manifest of the engine signed by ``threshold`` of ``keys``; raises
        :class:`VerificationError` when none is signed so."""

        async def compute() -> Documents[VerifiedManifest]:
            fetched = await fetch()
            candidates = [a for a in fetched.attestations if a.predicate_type == ENGINE_BUILD_PREDICATE_TYPE]
            if not candidates:
                raise fetched.subjects.not_found("build manifest attestation", self._source.description)
            trust = self._statement_trust(keys, threshold)
            verified: list[VerifiedManifest] = []
            unreadable: list[str] = []
            reasons: list[str] = []
            elsewhere: list[VerificationError] = []  # signed, but about another engine file
            for copies in by_statement(candidates):
                origin = copies[0].origin
                try:
                    found = await asyncio.to_thread(verify_manifest, copies, trust)
                except UnreadableEvidence as error:
                    unreadable.append(f"{origin}: {error.message}")
                    continue
                except TrtguardError as error:
                    reasons.append(f"{origin}: {error.message}")
                    continue
                try:
                    fetched.subjects.require_build_manifest(found.manifest, found.subjects)
                except VerificationError as error:
                    elsewhere.append(VerificationError(f"{error.message} ({origin})", hint=error.hint))
                    continue
                verified.append(found)
            if verified or unreadable:
                refused = (*reasons, *(e.message for e in elsewhere))
                return Documents(tuple(verified), tuple(unreadable), refused)
            if elsewhere:
                first = elsewhere[0]
                raise VerificationError(
                    f"no build manifest signed by [{', '.join(keys)}] describes this engine: {first.message}",
                    hint=first.hint,
                )
            raise VerificationError(f"build manifest not signed by [{', '.join(keys)}]: {'; '.join(reasons)}")

        key = self._key("manifest", reference, tuple(keys), threshold, self._signers(keys))
        return await self.manifests_cache.get_or_compute(key, compute, now=self._clock())

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
            trust = self._statement_trust(keys, 1)
            found = []
            for copies in by_statement(candidates):
                try:
                    approval = await asyncio.to_thread(verify_approval, copies, trust)
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
        return await self.approvals_cache.get_or_compute(key, compute, now=self._clock())

    async def ignored_approvals(
        self, reference: ImageReference, keys: Sequence[str], fetch: Fetch
    ) -> tuple[str, ...]:
        """Why each change approval found about the artifact counts for nothing, worded for a denial: signed
        by none of ``keys``, invalid, or about another file than the engine (the artifact digest, say).

        Never cached and never part of a verdict (:meth:`approvals` decides): a denial lists them so that an
        approver who named the wrong digest learns it. What an approval that did not verify claims is shown
        as its claim only.
        """
        fetched = await fetch()
        trust = self._statement_trust(keys, 1)
        subjects = fetched.subjects
        reasons = []
        for copies in by_statement(
            [a for a in fetched.attestations if a.predicate_type == CHANGE_APPROVAL_PREDICATE_TYPE]
        ):
            origin = copies[0].origin
            try:
                found = await asyncio.to_thread(verify_approval, copies, trust)
            except TrtguardError as error:
                reasons.append(
                    f"the approval at {origin} is not signed by [{', '.join(keys)}]: {error.message}"
                )
                continue
            named = found.approval.engine_digest
            who = f"{found.approval.approver}'s approval ({', '.join(found.signers)})"
            if named == subjects.artifact and subjects.engine_file is not None:
                reasons.append(
                    f"{who} names {named}, the digest of the artifact {reference} (its OCI manifest), not "
                    f"the engine file {subjects.engine_file} that approvals must name"
                )
                continue
            try:
                subjects.require_describes(named, copies[0].subjects, "it")
            except TrtguardError as error:
                reasons.append(f"{who}: {error.message}")
        return tuple(reasons)

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
            trust = dsse_trust(self._policy_set.signers_for(keys), threshold)
            reasons = []
            for attestation in candidates:
                try:
                    found = await asyncio.to_thread(verify_verification, attestation, trust)
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
        return await self.verifications_cache.get_or_compute(key, compute, now=self._clock())
