"""The state of one evaluation, shared by every rule family: what is judged, and each question asked once.

References are parsed once, and each evidence question (a digest, a verified signature, build manifest,
attestation, approval or GPU verification) is asked at most once per evaluation, however many policies and
rules need its answer; with a registry behind the evidence, :meth:`Evaluation.prefetch` asks them all at once
before the rules run one after another.

What each rule is handed besides the state is a subject (:class:`WorkloadSubject`, :class:`ImageSubject`,
:class:`EngineSubject`): the rule contract of :mod:`policies.rules._findings` judges one of them.

One module on purpose: the state and its once-per-evaluation questions are one concern (every rule family
reads both through one object), and a split would spread the memo over modules that only each other use.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from policies.cel.sandbox import CelSandbox
from policies.identity import WorkloadIdentity
from policies.loader import CompiledAttestation, CompiledPolicy
from policies.matching import selects, selects_by_requester
from policies.requesters import Requester
from policies.results import (
    AdmittedEngine,
    ArtifactRecord,
    AttestationRecord,
    BuildManifestRecord,
    ChangeControlRecord,
    SignatureRecord,
    SignerRecord,
    VerificationRecord,
)
from policies.schema import (
    AttestationRule,
    BuildManifestRule,
    ModelsRule,
    SignatureRule,
    SignersRule,
    VerificationRule,
)
from policies.verified import (
    Documents,
    VerifiedApproval,
    VerifiedAttestation,
    VerifiedEvidence,
    VerifiedManifest,
    VerifiedModelStatement,
    VerifiedPredicate,
    VerifiedSignatures,
    VerifiedVerification,
)
from policies.workload_model import UNLIMITED, Budget, EngineUse, ImageUse, Workload, within
from verifier.base import (
    Deadline,
    EvidenceUnavailable,
    ImageReference,
    InvalidReference,
    VerificationError,
    quick_init,
)
from verifier.evidence import ArtifactAttestations, EvidenceSource
from verifier.scans import is_scan_predicate_type

__all__ = [
    "CLOCK_SKEW",
    "LAST_APPLIED",
    "AdmissionHistory",
    "Changes",
    "Counted",
    "EngineSubject",
    "Evaluation",
    "ImageSubject",
    "VerifiedBuild",
    "WorkloadSubject",
]

T = TypeVar("T")

#: How far signed evidence (a build manifest, a scan) may be dated ahead of :attr:`Evaluation.clock`:
#: the clocks of build machines and scanners drift. Anything dated further ahead is refused.
CLOCK_SKEW = timedelta(minutes=5)

#: kubectl's copy of the applied object: large, and no rule reads it.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class AdmissionHistory(Protocol):
    """What was admitted before: the webhook answers from its decision log, for change control."""

    async def last_engines(
        self, workload: WorkloadIdentity, deadline: Deadline, policy: str | None
    ) -> Sequence[AdmittedEngine]:
        """For a policy: of each ONNX model (``ArtifactRecord.model``; an engine recorded without one is its
        own), the engine ``policy`` last confirmed (``ArtifactRecord.confirmed_by``) in a real (not dry-run),
        delivered admission of ``workload`` (API group, kind, namespace and name), newest first (records
        without confirmations: confirmed by every policy), so that a model left out of some admissions keeps
        its baseline; for None, every engine of the workload's newest such admission that named any
        (policies/README.md, "Change control")."""
        ...


@dataclass
class Counted:
    """The evidence the rules counted for one image or engine (as written in the object), for its record.

    Each object is kept once, however many policies counted it; the signers of one object found by several
    rules are merged.
    """

    signatures: dict[str, SignatureRecord] = field(default_factory=dict)
    attestations: dict[tuple[str, str], AttestationRecord] = field(default_factory=dict)
    build_manifests: dict[str, BuildManifestRecord] = field(default_factory=dict)
    change_control: list[ChangeControlRecord] = field(default_factory=list)
    verifications: dict[str, VerificationRecord] = field(default_factory=dict)
    #: The change-control policies that confirmed the engine, in the order they did (a dict: each once).
    confirmed_by: dict[str, None] = field(default_factory=dict)
    #: Of each change-control policy that judged the engine (or carried it unchanged), the ONNX model and
    #: the build manifest it judged it by: its own, as each policy reads the manifests its own signers
    #: signed; what it keeps this engine's model by once it confirms it (``ArtifactRecord.confirmed``).
    judged_as: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def signature(self, found: SignatureRecord) -> None:
        """An image signature that counted (what several rules' levels only logged of it, kept once)."""
        kept = _counted_once(self.signatures.get(found.digest), found)
        logged = tuple(dict.fromkeys((*kept.logged, *found.logged)))
        self.signatures[found.digest] = kept if logged == kept.logged else replace(kept, logged=logged)

    def attestation(self, found: AttestationRecord) -> None:
        """An image attestation that counted."""
        key = (found.predicate_type, found.digest)
        self.attestations[key] = _counted_once(self.attestations.get(key), found)

    def build_manifest(self, found: BuildManifestRecord) -> None:
        """The build manifest an engine was judged by."""
        self.build_manifests[found.digest] = _counted_once(self.build_manifests.get(found.digest), found)

    def changes(self, found: ChangeControlRecord) -> None:
        """One policy's change control of an engine."""
        if found not in self.change_control:
            self.change_control.append(found)

    def verification(self, found: VerificationRecord) -> None:
        """A GPU verification that counted."""
        self.verifications[found.digest] = _counted_once(self.verifications.get(found.digest), found)


_Record = TypeVar("_Record", SignatureRecord, AttestationRecord, BuildManifestRecord, VerificationRecord)


def _counted_once(known: _Record | None, found: _Record) -> _Record:
    """``found``, or the record already kept for the same object with the signers of both (the one kept
    as it is when ``found`` adds none: several policies counting one object is the common case)."""
    if known is None:
        return found
    kept: _Record = known
    signers: tuple[SignerRecord, ...] = tuple(dict.fromkeys((*kept.signers, *found.signers)))
    return kept if signers == kept.signers else replace(kept, signers=signers)


@dataclass(frozen=True, slots=True)
class Changes:
    """What an UPDATE changed besides its images and engines (a CREATE: everything)."""

    spec: bool
    """Labels, annotations or anything but status and bookkeeping (see :func:`_cel_view`)."""
    placement: bool
    """The ``nodeSelector`` or ``affinity`` of any pod template (or the templates themselves)."""

    @classmethod
    def between(cls, previous: Workload | None, current: Workload) -> Changes:
        """The changes from ``previous`` (None: a CREATE) to ``current``; walks both objects, so callers
        compute it off the event loop (:func:`policies.workload_model._budget.offload`)."""
        if previous is None:
            return cls(spec=True, placement=True)
        return cls(
            spec=_cel_view(previous.obj) != _cel_view(current.obj),
            placement=previous.placements() != current.placements(),
        )


@quick_init
@dataclass(frozen=True, slots=True)
class WorkloadSubject:
    """What a workload rule judges for one policy: the workload itself."""

    workload: Workload
    """What the policy judges of it (on an UPDATE: what is new or changed, :meth:`Evaluation.view`)."""
    unchanged: tuple[EngineUse, ...]
    """The policy's engines an UPDATE left as they were (none on a CREATE): judged by no engine rule."""


@quick_init
@dataclass(frozen=True, slots=True)
class ImageSubject:
    """What an image rule judges: one image of the workload, its reference parsed."""

    use: ImageUse
    ref: ImageReference
    counted: Counted
    """Where the rule notes the evidence it counted (:meth:`Evaluation.counted`)."""


@quick_init
@dataclass(frozen=True, slots=True)
class VerifiedBuild:
    """An engine's build manifest, verified under the policy's ``buildManifest`` rule."""

    rule: BuildManifestRule
    manifest: VerifiedManifest


@quick_init
@dataclass(frozen=True, slots=True)
class EngineSubject:
    """What an engine rule judges: one engine of the workload, referred to by digest."""

    use: EngineUse
    ref: ImageReference
    """The engine's reference, pinned by digest (an engine without one is judged by no rule)."""
    models: ModelsRule
    """The policy's ``models`` section."""
    counted: Counted
    """Where the rule notes the evidence it counted (:meth:`Evaluation.counted`)."""
    build: VerifiedBuild | None = None
    """The verified build manifest, once the ``buildManifest`` rule found one; None without that rule (the
    rules over a manifest then have none to judge)."""


def _copy(error: BaseException) -> BaseException:
    """A new exception equal to ``error`` (class, arguments, attributes, the chain it was raised in), without
    its traceback; built without calling ``__init__``, whose signature differs between error classes."""
    clone = type(error).__new__(type(error), *error.args)
    clone.__dict__.update(vars(error))
    clone.__cause__, clone.__context__ = error.__cause__, error.__context__
    clone.__suppress_context__ = error.__suppress_context__
    return clone


@dataclass
class Evaluation:
    """State of one evaluation: parsed references and evidence look-ups shared by every policy.

    ``workload`` holds what is judged (on an UPDATE, only new or changed images and engines); ``context`` is
    the whole object, which rules about the running containers read (the runtime image of an engine);
    ``previous`` is the old object of an UPDATE, ``changes`` what it changed (computed when first asked
    unless given). :meth:`view` says what one policy judges. The rest comes from the
    :class:`~policies.evaluator.PolicyEvaluator`: where evidence comes from, the verified-evidence cache, the
    admission history, the clock and the CEL sandbox; ``budget`` is the CPU the evaluation's pure work
    may spend (:mod:`policies.workload_model._budget`).
    """

    workload: Workload
    context: Workload
    previous: Workload | None
    deadline: Deadline
    evidence: EvidenceSource
    verified: VerifiedEvidence
    history: AdmissionHistory | None
    clock: Callable[[], datetime]
    cel: CelSandbox
    requester: Requester | None = None
    changes: Changes | None = None
    budget: Budget = UNLIMITED
    #: Judging for the mutating webhook (or ``check --fix``): a ``pinDigest`` rule pins what it verified
    #: (:meth:`pin`) instead of denying a reference by tag.
    pinning: bool = False
    #: What the rules want said about the decision that is neither a violation nor evidence (``note``).
    notes: list[str] = field(default_factory=list)
    _refs: dict[str, ImageReference | InvalidReference] = field(default_factory=dict)
    #: Each question's answer (:meth:`once`), shared by both passes of a pinning evaluation (one resolve).
    lookups: dict[tuple[object, ...], asyncio.Future[Any]] = field(default_factory=dict)
    _digests: dict[ImageReference, str] = field(default_factory=dict)
    _cel_workload: dict[str, Any] | None = None
    _counted: dict[str, Counted] = field(default_factory=dict)
    _pins: dict[str, str] = field(default_factory=dict)
    _computed: dict[tuple[object, ...], Any] = field(default_factory=dict)
    _judged: set[tuple[object, ...]] = field(default_factory=set)

    def counted(self, reference: str) -> Counted:
        """Where the rules note the evidence they counted for the image or engine written as ``reference``."""
        found = self._counted.get(reference)
        if found is None:
            found = self._counted[reference] = Counted()
        return found

    def pin(self, path: str, digest: str) -> None:
        """Pin the image at ``path`` to ``digest``, which a ``pinDigest`` rule verified there."""
        self._pins[path] = digest

    def note(self, text: str) -> None:
        """Say ``text`` with the decision (once, however many policies or engines say it)."""
        if text not in self.notes:
            self.notes.append(text)

    def view(self, policy: CompiledPolicy) -> tuple[Workload, Workload | None]:
        """What ``policy`` judges, and the old object it compares against (None: judge everything).

        A policy that did not select the old object (a label that excluded it was removed, or the policy is
        new since) judges the whole object: what it never checked cannot count as unchanged; so does a
        policy that selects by requester (the old object may have been admitted for a requester it left
        alone). A policy whose CEL expressions read the workload judges every engine again when the part of
        the object they read (labels, annotations, spec) changed, and one that judges GPU fit when the
        node selection of any pod template changed (or a template was added, removed or moved).
        """
        previous = self.previous
        if previous is None or not selects(policy, previous) or selects_by_requester(policy):
            return self.context, None
        rereads = (policy.expressions_read_workload and self.changed()) or (
            policy.judges_scheduling and self._changes().placement
        )
        if rereads:
            return replace(self.workload, engines=self.context.engines), previous
        return self.workload, previous

    def changed(self) -> bool:
        """Whether this is a CREATE, or an UPDATE that changed labels, annotations or the spec (not only
        status, finalizers or other bookkeeping)."""
        return self._changes().spec

    def _changes(self) -> Changes:
        if self.changes is None:
            self.changes = Changes.between(self.previous, self.context)
        return self.changes

    def reference(self, text: str) -> ImageReference | InvalidReference:
        """``text`` parsed, or why it is not a reference."""
        found = self._refs.get(text)
        if found is None:
            try:
                found = ImageReference.parse(text)
            except InvalidReference as error:
                found = error
            self._refs[text] = found
        return found

    async def once(self, key: tuple[object, ...], call: Callable[[], Awaitable[T]]) -> T:
        """One evidence question per key per evaluation, shared by concurrent askers (failures included)."""
        future = self.lookups.get(key)
        if future is None:
            if not self.evidence.concurrent_lookups:
                # Answers come from memory: awaiting directly spares a task and several loop turns.
                future = asyncio.get_running_loop().create_future()
                self.lookups[key] = future
                try:
                    future.set_result(await call())
                except (EvidenceUnavailable, VerificationError) as error:
                    # Kept without its traceback, and raised as a copy: the traceback's frames hold this
                    # evaluation, which holds the failure, a cycle only the collector would free (half the
                    # resources of a check are denied on such an answer).
                    future.set_exception(error.with_traceback(None))
                except BaseException:
                    del self.lookups[key]  # a bug or a cancellation is not an answer to keep
                    raise
            else:
                future = asyncio.ensure_future(call())
                self.lookups[key] = future
        if future.done():  # the common case once prefetched: no scheduling at all
            failure = future.exception()
            if failure is not None and failure.__traceback__ is None:  # kept from memory, as above
                raise _copy(failure)
            done: T = future.result()
            return done
        result: T = await asyncio.shield(future)
        return result

    async def computed(self, key: tuple[object, ...], call: Callable[[], T], *data: object) -> T:
        """``call()``, pure work several engines or policies ask for, once per ``key``, charged to the budget:
        in a thread unless ``data`` is small (:func:`~policies.workload_model._budget.within`); BudgetExceeded
        past it."""
        if key not in self._computed:
            self._computed[key] = await within(self.budget, call, *data)
        found: T = self._computed[key]
        return found

    def first(self, key: tuple[object, ...]) -> bool:
        """Whether ``key`` (what a policy judges: rule, engine digest, image) is judged for the first time in
        this evaluation; each later use of the same engine finds it said already, so a hundred volumes of
        one engine read by hundreds of images give each finding once, not once per volume."""
        if key in self._judged:
            return False
        self._judged.add(key)
        return True

    async def digest(self, reference: ImageReference) -> str:
        """The digest ``reference`` names, resolving a tag."""
        if reference.digest is not None:
            return reference.digest
        evidence = self.evidence
        digest = await self.once(
            ("digest", reference), lambda: evidence.resolve_digest(reference, self.deadline)
        )
        self._digests[reference] = digest
        return digest

    def attestations(self, reference: ImageReference) -> Callable[[], Awaitable[ArtifactAttestations]]:
        """A fetch of the artifact's attestations and subjects, made at most once per evaluation."""
        evidence = self.evidence

        async def fetch() -> ArtifactAttestations:
            return await evidence.attestations(reference, self.deadline)

        return lambda: self.once(("attestations", reference), fetch)

    async def signatures(self, reference: ImageReference, rule: SignatureRule) -> VerifiedSignatures:
        """The image's signatures verified against ``rule``'s signers."""
        verified, keys, threshold = self.verified, rule.keys, rule.threshold
        return await self.once(
            ("signatures", reference, tuple(keys), threshold),
            lambda: verified.image_signatures(reference, keys, threshold, self.deadline),
        )

    async def image_attestation(
        self, reference: ImageReference, rule: AttestationRule
    ) -> VerifiedAttestation:
        """The image's attestation of ``rule``'s predicate type, verified against its signers."""
        verified = self.verified
        return await self.once(
            ("attestation", reference, rule.predicate_type, tuple(rule.keys), rule.threshold),
            lambda: verified.attestation(
                reference, rule.predicate_type, rule.keys, rule.threshold, self.attestations(reference)
            ),
        )

    async def image_predicates(
        self, reference: ImageReference, rule: AttestationRule, *, scans: bool
    ) -> Documents[VerifiedPredicate]:
        """Every attestation of ``rule``'s predicate type about the image signed by its signers, read as
        SBOMs or scans when ``scans`` (and those that could not count)."""
        verified = self.verified
        return await self.once(
            ("predicates", reference, rule.predicate_type, tuple(rule.keys), rule.threshold, scans),
            lambda: verified.predicates(
                reference,
                rule.predicate_type,
                rule.keys,
                rule.threshold,
                self.attestations(reference),
                scans=scans,
            ),
        )

    async def build_manifests(
        self, reference: ImageReference, rule: BuildManifestRule
    ) -> Documents[VerifiedManifest]:
        """Every build manifest of the engine signed by ``rule``'s signers (and those that did not count)."""
        verified, keys, threshold = self.verified, rule.keys, rule.threshold
        return await self.once(
            ("manifests", reference, tuple(keys), threshold),
            lambda: verified.build_manifests(reference, keys, threshold, self.attestations(reference)),
        )

    async def model_signatures(
        self, ref: ImageReference, rule: SignersRule
    ) -> Documents[VerifiedModelStatement]:
        """The model-signing signatures found beside the engine, signed by ``rule``'s signers."""
        verified = self.verified
        return await self.once(
            ("model signatures", ref, tuple(rule.keys), rule.threshold),
            lambda: verified.model_signatures(rule.keys, rule.threshold, self.attestations(ref)),
        )

    async def approvals(
        self, reference: ImageReference, keys: Sequence[str], *, fresh: bool = False
    ) -> tuple[VerifiedApproval, ...]:
        """The change approvals attached to the engine, signed by any of ``keys``.

        ``fresh`` asks the evidence source again instead of the verified-evidence cache (once per
        evaluation): for approvals that did not suffice, since one may have been pushed since.
        """
        verified = self.verified
        return await self.once(
            ("approvals", reference, tuple(keys), fresh),
            lambda: verified.approvals(reference, keys, self.attestations(reference), fresh=fresh),
        )

    async def ignored_approvals(self, reference: ImageReference, keys: Sequence[str]) -> tuple[str, ...]:
        """Why each change approval found about the engine counts for nothing (for a denial's message)."""
        return await self.verified.ignored_approvals(reference, keys, self.attestations(reference))

    async def gpu_verification(
        self, reference: ImageReference, rule: VerificationRule, engine_sha256: str | None
    ) -> VerifiedVerification:
        """The engine's GPU verification, verified against ``rule`` (and the engine file of its manifest)."""
        verified = self.verified
        return await self.once(
            ("verification", reference, tuple(rule.keys), rule.threshold, engine_sha256),
            lambda: verified.gpu_verification(
                reference, rule.keys, rule.threshold, engine_sha256, self.attestations(reference)
            ),
        )

    async def prefetch(self, policies: Iterable[CompiledPolicy]) -> None:
        """Start every evidence question the matched rules will ask, all at once.

        The rules are then evaluated one after another; without this, a registry would be asked one
        question at a time. Failures stay in the shared futures for the rules to report.
        """
        if not self.evidence.concurrent_lookups:
            return
        questions: list[Callable[[], Awaitable[object]]] = []
        for policy in policies:
            judged, _ = self.view(policy)
            for image_use in judged.images:
                ref = self.reference(image_use.reference)
                if isinstance(ref, InvalidReference):
                    continue
                for compiled in policy.image_rules:
                    rule = compiled.rule
                    if not compiled.applies_to(ref, image_use.field):
                        continue
                    if rule.signatures is not None:
                        questions.append(functools.partial(self._pinned_signatures, ref, rule.signatures))
                    questions += [
                        functools.partial(self._pinned_attestation, ref, a)
                        for alternatives in compiled.attestations
                        for a in alternatives
                    ]
                    if rule.digests is not None:
                        questions.append(functools.partial(self.digest, ref))
            models = policy.spec.models
            if models is not None and models.build_manifest is not None:
                for engine_use in judged.engines:
                    engine = self.reference(engine_use.reference)
                    if isinstance(engine, ImageReference) and engine.digest is not None:
                        questions.append(
                            functools.partial(self.build_manifests, engine, models.build_manifest)
                        )
        if len(questions) > 1:
            await asyncio.gather(*(q() for q in questions), return_exceptions=True)

    async def _pinned_signatures(self, reference: ImageReference, rule: SignatureRule) -> VerifiedSignatures:
        return await self.signatures(reference.with_digest(await self.digest(reference)), rule)

    async def _pinned_attestation(self, reference: ImageReference, compiled: CompiledAttestation) -> object:
        pinned = reference.with_digest(await self.digest(reference))
        rule = compiled.rule
        if compiled.reads_documents:
            return await self.image_predicates(
                pinned, rule, scans=is_scan_predicate_type(rule.predicate_type)
            )
        return await self.image_attestation(pinned, rule)

    def cel_workload(self) -> dict[str, Any]:
        """The object for CEL, without the bookkeeping that only makes it large (kept per evaluation)."""
        if self._cel_workload is None:
            obj = dict(self.context.obj)
            metadata = obj.get("metadata")
            if isinstance(metadata, dict):
                metadata = {k: v for k, v in metadata.items() if k != "managedFields"}
                annotations = metadata.get("annotations")
                if isinstance(annotations, dict) and LAST_APPLIED in annotations:
                    metadata["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
                obj["metadata"] = metadata
            self._cel_workload = obj
        return self._cel_workload

    def image_records(self) -> Iterable[ArtifactRecord]:
        """Every image of the object, with the digest it resolved to where one was looked up, and the
        signatures and attestations its rules counted."""
        for use in self.context.images:
            ref = self._refs.get(use.reference) or self.reference(use.reference)
            digest = None
            if isinstance(ref, ImageReference):
                digest = ref.digest or self._digests.get(ref)
            counted = self._counted.get(use.reference) or Counted()
            pinned = self._pins.get(use.path)
            yield ArtifactRecord(
                reference=use.reference,
                digest=digest,
                path=use.path,
                container=use.container,
                pinned=f"{use.reference}@{pinned}" if pinned is not None else None,
                signatures=tuple(counted.signatures.values()),
                attestations=tuple(counted.attestations.values()),
            )

    def engine_records(self) -> Iterable[ArtifactRecord]:
        """Every engine of the object, with its name, the containers that may run it, and what its model
        rules counted."""
        for use in self.context.engines:
            ref = self._refs.get(use.reference) or self.reference(use.reference)
            digest = ref.digest if isinstance(ref, ImageReference) else None
            counted = self._counted.get(use.reference) or Counted()
            # The first judge's model for people; each confirming policy's own in ``confirmed``.
            model, manifest = next(iter(counted.judged_as.values()), (None, None))
            yield ArtifactRecord(
                reference=use.reference,
                digest=digest,
                path=use.path,
                name=use.name,
                containers=use.containers,
                engine=True,
                build_manifests=tuple(counted.build_manifests.values()),
                change_control=tuple(counted.change_control),
                verifications=tuple(counted.verifications.values()),
                confirmed_by=tuple(counted.confirmed_by),
                model=model,
                manifest=manifest,
                confirmed=tuple(
                    (policy, *counted.judged_as.get(policy, (None, None))) for policy in counted.confirmed_by
                ),
            )


def _cel_view(obj: Mapping[str, Any]) -> tuple[object, ...]:
    """The parts of an object whose change makes CEL expressions over the workload worth asking again.

    Status, finalizers and other bookkeeping are left out, so that a controller's UPDATE (removing a
    finalizer) is not judged as a new workload; so is kubectl's last-applied annotation, and an empty map of
    labels or annotations is the same as none (adding only the last-applied annotation to an object that had
    none changes nothing). Every other top-level field counts, not only ``spec``: a PodTemplate keeps its
    pod at ``template``, and a WorkloadKind may name any path.
    """
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping):
        annotations = {k: v for k, v in annotations.items() if k != LAST_APPLIED} or None
    labels = metadata.get("labels")
    if isinstance(labels, Mapping) and not labels:
        labels = None
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    return labels, annotations, rest
