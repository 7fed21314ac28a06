"""Evaluate a workload against a :class:`~policies.loader.PolicySet`.

For every policy that matches the resource, every image must match at least one of the policy's image rules
(an unmatched image is a violation) and satisfy each rule it matches; every engine must satisfy the
policy's ``models`` rules (a build manifest signed by its keys, when ``buildManifest`` is set, and the
rules over that manifest). A rule that cannot be checked (offline, a
registry that fails, time running out) is a violation with ``error=True`` whose action is the policy's
``onError``: a failure to check is never a silent pass.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from policies.cel import CelEvaluationError, prepare_activation
from policies.cel.sandbox import CelSandbox, shared_sandbox
from policies.change_control import Baseline, describe, judge
from policies.loader import CompiledPolicy, PolicySet
from policies.patterns import matches_any
from policies.results import Action, AdmittedEngine, ArtifactRecord, Decision, Violation
from policies.schema import (
    AttestationRule,
    BuildManifestRule,
    ChangeControl,
    ImageRule,
    LabelSelector,
    ModelsRule,
    ResourceFilter,
    SignatureRule,
    ToolchainRule,
    VerificationRule,
)
from policies.verified import CacheSettings, VerifiedEvidence, VerifiedManifest
from policies.workload import EngineUse, ImageUse, NotAWorkload, Workload, changed_since, extract
from verifier.deadline import Deadline
from verifier.errors import EvidenceUnavailable, InputError, TrtguardError, VerificationError
from verifier.evidence import ArtifactAttestations, EvidenceSource
from verifier.references import ImageReference, InvalidReference

__all__ = ["AdmissionHistory", "CacheSettings", "PolicyEngine", "VerifiedManifest"]

T = TypeVar("T")

#: Name used for violations that belong to no single policy (a resource that cannot be read at all).
ENGINE_NAME = "trtguard"
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: How far a build manifest may be dated ahead of this clock (build machines' clocks drift).
_CLOCK_SKEW = timedelta(minutes=5)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class AdmissionHistory(Protocol):
    """What was admitted before: the webhook answers from its decision log, for change control."""

    async def last_engines(
        self, namespace: str, kind: str, name: str, deadline: Deadline
    ) -> Sequence[AdmittedEngine]:
        """The engines of the newest real (not dry-run) admission of the workload that named any."""
        ...


class PolicyEngine:
    """Evaluates workloads against one policy set with one evidence source.

    An engine is immutable with respect to its policy set; a reload makes a new engine. Verified evidence
    (signatures, build manifests, attestations) is cached for ``cache.ttl`` seconds by everything its
    verdict depends on (registry, repository and digest, key set, question), so repeated admissions of the
    same image or engine touch neither the registry nor the cryptography, and no verdict depends on what
    was asked before. CEL expressions not proven cheap at load time run in ``cel`` (the process's shared
    sandbox unless given), under its time and memory limits.
    """

    def __init__(
        self,
        policy_set: PolicySet,
        evidence: EvidenceSource,
        *,
        clock: Callable[[], datetime] = _utcnow,
        cache: CacheSettings | None = None,
        history: AdmissionHistory | None = None,
        cel: CelSandbox | None = None,
    ) -> None:
        self.policy_set = policy_set
        self.evidence = evidence
        self.clock = clock
        self.history = history
        self.cel = cel or shared_sandbox()
        self.verified = VerifiedEvidence(policy_set, evidence, cache or CacheSettings())

    @property
    def revision(self) -> str:
        """Digest of the loaded policy files."""
        return self.policy_set.revision

    def matching(self, workload: Workload) -> list[CompiledPolicy]:
        """Policies whose match selects the workload and whose exclude does not."""
        return [p for p in self.policy_set.policies if _selected(p, workload)]

    async def evaluate(
        self,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        kind: str | None = None,
        old: Mapping[str, Any] | None = None,
        deadline: Deadline | None = None,
    ) -> Decision:
        """The decision for ``obj``.

        ``namespace`` and ``kind`` come from the request (they fill in what the object leaves out). ``old``
        is the previous version of the object (an UPDATE): only images and engines that are new or changed
        are judged. Raises :class:`~policies.workload.NotAWorkload` for kinds without a pod spec.
        """
        deadline = deadline or Deadline.never()
        try:
            workload = extract(obj, namespace=namespace, kind=kind)
        except NotAWorkload:
            raise
        except InputError as error:
            return self._unreadable(obj, namespace, error)
        judged, previous = workload, None
        if old is not None:
            try:
                previous = extract(old, namespace=namespace, kind=kind)
                judged = changed_since(workload, previous)
            except InputError:
                pass  # an unreadable old object means everything counts as new
        policies = self.matching(workload)
        run = _Run(self, judged, workload, previous, deadline)
        await run.prefetch(policies)
        violations = tuple([v for p in policies for v in await run.policy(p)])
        return Decision(
            kind=workload.kind,
            namespace=workload.namespace,
            name=workload.name,
            policy_revision=self.revision,
            matched_policies=tuple(p.name for p in policies),
            violations=violations,
            images=tuple(run.image_records()),
            engines=tuple(run.engine_records()),
            notes=("only new or changed images and engines were judged",) if previous is not None else (),
        )

    def error_decision(self, obj: Mapping[str, Any], *, namespace: str | None, message: str) -> Decision:
        """The decision when evaluation could not finish: each matching policy's ``onError`` applies.

        With no policy readable or matching, the answer is still a denial: not knowing is never an allow.
        """
        try:
            workload = extract(obj, namespace=namespace)
            policies = self.matching(workload)
        except InputError:
            policies = list(self.policy_set.policies)
            workload = None
        violations = tuple(
            Violation(
                policy=p.name,
                rule="evaluation",
                message=message,
                fix="retry; if it persists, check the registry and the webhook's logs",
                action=p.document.spec.on_error,
                error=True,
            )
            for p in policies
        ) or (
            Violation(
                policy=ENGINE_NAME,
                rule="evaluation",
                message=message,
                fix="retry; if it persists, check the webhook's logs",
                action=Action.DENY,
                error=True,
            ),
        )
        return Decision(
            kind=str(obj.get("kind", "")),
            namespace=workload.namespace if workload else namespace,
            name=workload.name if workload else None,
            policy_revision=self.revision,
            matched_policies=tuple(p.name for p in policies),
            violations=violations,
        )

    def _unreadable(self, obj: Mapping[str, Any], namespace: str | None, error: InputError) -> Decision:
        metadata = obj.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        return Decision(
            kind=str(obj.get("kind", "")),
            namespace=namespace,
            name=name if isinstance(name, str) else None,
            policy_revision=self.revision,
            violations=(
                Violation(
                    policy=ENGINE_NAME,
                    rule="workload",
                    message=f"the resource cannot be read: {error}",
                    fix="send a well-formed object with a pod spec",
                    action=Action.DENY,
                    path=error.location,
                ),
            ),
        )


# --- matching ----------------------------------------------------------------------------------------------


def _glob_any(patterns: Iterable[str], value: str) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _labels_match(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for expression in selector.match_expressions:
        present = expression.key in labels
        value = labels.get(expression.key)
        ok = {
            "In": present and value in expression.values,
            "NotIn": not present or value not in expression.values,
            "Exists": present,
            "DoesNotExist": not present,
        }[expression.operator]
        if not ok:
            return False
    return True


def _filter_selects(
    selection: ResourceFilter, namespaces: tuple[str, ...] | None, workload: Workload, *, empty: bool
) -> bool:
    """Whether a match/exclude filter selects the workload; ``empty`` answers for a filter with no terms."""
    terms = 0
    if namespaces is not None:
        terms += 1
        if not _glob_any(namespaces, workload.namespace or "default"):
            return False
    if selection.kinds is not None:
        terms += 1
        if workload.kind not in selection.kinds:
            return False
    if selection.labels is not None:
        terms += 1
        if not _labels_match(selection.labels, workload.labels):
            return False
    return empty if terms == 0 else True


def _selected(policy: CompiledPolicy, workload: Workload) -> bool:
    spec = policy.document.spec
    if not _filter_selects(spec.match, policy.namespace_patterns, workload, empty=True):
        return False
    exclude = spec.exclude
    return exclude is None or not _filter_selects(
        exclude, policy.exclude_namespace_patterns, workload, empty=False
    )


def _cel_view(obj: Mapping[str, Any]) -> tuple[object, ...]:
    """The parts of an object whose change makes CEL expressions over the workload worth asking again.

    Status, finalizers and other bookkeeping are left out, so that a controller's UPDATE (removing a
    finalizer) is not judged as a new workload.
    """
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping):
        annotations = {k: v for k, v in annotations.items() if k != _LAST_APPLIED}
    return metadata.get("labels"), annotations, obj.get("spec")


# --- one evaluation ----------------------------------------------------------------------------------------


@dataclass
class _Run:
    """State of one evaluation: parsed references and evidence look-ups shared by every policy.

    ``workload`` holds what is judged (on an UPDATE, only new or changed images and engines); ``context`` is
    the whole object, which rules about the running containers read (the runtime image of an engine);
    ``previous`` is the old object of an UPDATE. :meth:`view` says what one policy judges.
    """

    engine: PolicyEngine
    workload: Workload
    context: Workload
    previous: Workload | None
    deadline: Deadline
    _refs: dict[str, ImageReference | InvalidReference] = field(default_factory=dict)
    _lookups: dict[tuple[object, ...], asyncio.Future[Any]] = field(default_factory=dict)
    _digests: dict[ImageReference, str] = field(default_factory=dict)
    _cel_workload: dict[str, Any] | None = None

    def view(self, policy: CompiledPolicy) -> tuple[Workload, Workload | None]:
        """What ``policy`` judges, and the old object it compares against (None: judge everything).

        A policy that did not select the old object (a label that excluded it was removed, or the policy is
        new since) judges the whole object: what it never checked cannot count as unchanged. A policy
        whose CEL expressions read the workload judges every engine again when the part of the object
        they read (labels, annotations, spec) changed.
        """
        previous = self.previous
        if previous is None or not _selected(policy, previous):
            return self.context, None
        if policy.expressions_read_workload and _cel_view(previous.obj) != _cel_view(self.context.obj):
            return replace(self.workload, engines=self.context.engines), previous
        return self.workload, previous

    def reference(self, text: str) -> ImageReference | InvalidReference:
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
        future = self._lookups.get(key)
        if future is None:
            if not self.engine.evidence.concurrent_lookups:
                # Answers come from memory: awaiting directly spares a task and several loop turns.
                future = asyncio.get_running_loop().create_future()
                self._lookups[key] = future
                try:
                    future.set_result(await call())
                except (EvidenceUnavailable, VerificationError) as error:
                    future.set_exception(error)
                except BaseException:
                    del self._lookups[key]  # a bug or a cancellation is not an answer to keep
                    raise
            else:
                future = asyncio.ensure_future(call())
                self._lookups[key] = future
        if future.done():  # the common case once prefetched: no scheduling at all
            done: T = future.result()
            return done
        result: T = await asyncio.shield(future)
        return result

    async def digest(self, reference: ImageReference) -> str:
        if reference.digest is not None:
            return reference.digest
        evidence = self.engine.evidence
        digest = await self.once(
            ("digest", reference), lambda: evidence.resolve_digest(reference, self.deadline)
        )
        self._digests[reference] = digest
        return digest

    def attestations(self, reference: ImageReference) -> Callable[[], Awaitable[ArtifactAttestations]]:
        """A fetch of the artifact's attestations and subjects, made at most once per evaluation."""
        evidence = self.engine.evidence

        async def fetch() -> ArtifactAttestations:
            return await evidence.attestations(reference, self.deadline)

        return lambda: self.once(("attestations", reference), fetch)

    async def signatures(self, reference: ImageReference, rule: SignatureRule) -> object:
        verified = self.engine.verified
        return await self.once(
            ("signatures", reference, tuple(rule.keys), rule.threshold),
            lambda: verified.image_signatures(reference, rule.keys, rule.threshold, self.deadline),
        )

    async def image_attestation(self, reference: ImageReference, rule: AttestationRule) -> object:
        verified = self.engine.verified
        return await self.once(
            ("attestation", reference, rule.predicate_type, tuple(rule.keys), rule.threshold),
            lambda: verified.attestation(
                reference, rule.predicate_type, rule.keys, rule.threshold, self.attestations(reference)
            ),
        )

    async def build_manifest(self, reference: ImageReference, rule: BuildManifestRule) -> VerifiedManifest:
        verified = self.engine.verified
        return await self.once(
            ("manifest", reference, tuple(rule.keys), rule.threshold),
            lambda: verified.build_manifest(
                reference, rule.keys, rule.threshold, self.attestations(reference)
            ),
        )

    async def prefetch(self, policies: Iterable[CompiledPolicy]) -> None:
        """Start every evidence question the matched rules will ask, all at once.

        The rules are then evaluated one after another; without this, a registry would be asked one
        question at a time. Failures stay in the shared futures for the rules to report.
        """
        if not self.engine.evidence.concurrent_lookups:
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
                        functools.partial(self._pinned_attestation, ref, a) for a in rule.attestations
                    ]
                    if rule.digests is not None:
                        questions.append(functools.partial(self.digest, ref))
            models = policy.document.spec.models
            if models is not None and models.build_manifest is not None:
                for engine_use in judged.engines:
                    engine = self.reference(engine_use.reference)
                    if isinstance(engine, ImageReference) and engine.digest is not None:
                        questions.append(
                            functools.partial(self.build_manifest, engine, models.build_manifest)
                        )
        if len(questions) > 1:
            await asyncio.gather(*(q() for q in questions), return_exceptions=True)

    async def _pinned_signatures(self, reference: ImageReference, rule: SignatureRule) -> object:
        return await self.signatures(reference.with_digest(await self.digest(reference)), rule)

    async def _pinned_attestation(self, reference: ImageReference, rule: AttestationRule) -> object:
        return await self.image_attestation(reference.with_digest(await self.digest(reference)), rule)

    def cel_workload(self) -> dict[str, Any]:
        """The object for CEL, without the bookkeeping that only makes it large (kept per evaluation)."""
        if self._cel_workload is None:
            obj = dict(self.context.obj)
            metadata = obj.get("metadata")
            if isinstance(metadata, dict):
                metadata = {k: v for k, v in metadata.items() if k != "managedFields"}
                annotations = metadata.get("annotations")
                if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
                    metadata["annotations"] = {k: v for k, v in annotations.items() if k != _LAST_APPLIED}
                obj["metadata"] = metadata
            self._cel_workload = obj
        return self._cel_workload

    def image_records(self) -> Iterable[ArtifactRecord]:
        for use in self.context.images:
            ref = self._refs.get(use.reference) or self.reference(use.reference)
            digest = None
            if isinstance(ref, ImageReference):
                digest = ref.digest or self._digests.get(ref)
            yield ArtifactRecord(reference=use.reference, digest=digest, path=use.path)

    def engine_records(self) -> Iterable[ArtifactRecord]:
        for use in self.context.engines:
            ref = self._refs.get(use.reference) or self.reference(use.reference)
            digest = ref.digest if isinstance(ref, ImageReference) else None
            yield ArtifactRecord(
                reference=use.reference,
                digest=digest,
                path=use.path,
                name=use.name,
                containers=use.containers,
            )

    # --- per policy ---

    async def policy(self, policy: CompiledPolicy) -> list[Violation]:
        spec = policy.document.spec
        judged, previous = self.view(policy)
        found: list[Violation] = [
            _violation(policy, "workload", problem.message, "fix the resource", path=problem.path)
            for problem in judged.problems
        ]
        if policy.image_rules:
            # Nothing to check is never a pass; on an UPDATE only when it is new (the images were removed).
            if not self.context.images and (previous is None or previous.images):
                found.append(
                    _violation(
                        policy,
                        "workload",
                        "no image could be found in the resource, so nothing can be checked",
                        "give every container an image",
                        path=judged.pod_spec_path,
                    )
                )
            for image_use in judged.images:
                try:
                    found += await self.image(policy, image_use)
                except TrtguardError as error:  # a check that failed in an unforeseen way: onError decides
                    found.append(
                        _unavailable(policy, "images", error, image=image_use.reference, path=image_use.path)
                    )
        if spec.models is not None:
            if spec.models.required and not self.context.engines and (previous is None or previous.engines):
                found.append(
                    _violation(
                        policy,
                        "models.required",
                        "the workload declares no TensorRT engine",
                        "name the engine by digest in an image volume or the trtguard.dev/engines annotation",
                        path=f"{judged.pod_spec_path}.volumes",
                    )
                )
            for engine_use in judged.engines:
                try:
                    found += await self.engine_use(policy, spec.models, engine_use)
                except TrtguardError as error:
                    found.append(
                        _unavailable(
                            policy, "models", error, engine=engine_use.reference, path=engine_use.path
                        )
                    )
        return found

    # --- images ---

    async def image(self, policy: CompiledPolicy, use: ImageUse) -> list[Violation]:
        ref = self.reference(use.reference)
        if isinstance(ref, InvalidReference):
            return [
                _violation(
                    policy,
                    "images",
                    f"invalid image reference: {ref.message}",
                    ref.hint or "fix the reference",
                    image=use.reference,
                    path=use.path,
                )
            ]
        rules = [r for r in policy.image_rules if r.applies_to(ref, use.field)]
        if not rules:
            allowed = ", ".join(p.text for r in policy.image_rules if r.judges(use.field) for p in r.patterns)
            other_fields = sorted(
                {f for r in policy.image_rules if r.selects(ref) for f in r.rule.fields or ()}
            )
            scope = f"; rules for it judge only {', '.join(other_fields)} images" if other_fields else ""
            return [
                _violation(
                    policy,
                    "images",
                    f"{use.field} image is not allowed by any image rule (allowed there: {allowed or 'none'})"
                    + scope,
                    "use an allowed image, or add a rule for it to the policy",
                    image=str(ref),
                    path=use.path,
                )
            ]
        found: list[Violation] = []
        for compiled in rules:
            found += await self.image_rule(policy, compiled.rule, ref, use)
        return found

    async def image_rule(
        self, policy: CompiledPolicy, rule: ImageRule, ref: ImageReference, use: ImageUse
    ) -> list[Violation]:
        rule_id = f"images.{rule.name}"
        found: list[Violation] = []

        def add(suffix: str, message: str, fix: str, image: ImageReference) -> None:
            found.append(
                _violation(policy, f"{rule_id}.{suffix}", message, fix, image=str(image), path=use.path)
            )

        def unavailable(suffix: str, error: EvidenceUnavailable, image: ImageReference) -> None:
            found.append(_unavailable(policy, f"{rule_id}.{suffix}", error, image=str(image), path=use.path))

        if rule.require_digest and ref.digest is None:
            add(
                "requireDigest",
                "image is not pinned by digest",
                f"pin it: {ref.name}@sha256:<digest> (e.g. from `crane digest {ref}`)",
                ref,
            )
        # The checks below judge the digest that actually runs, so a tag must be resolved first.
        needs_digest = [
            name
            for name, needed in (
                ("digests", rule.digests is not None),
                ("signatures", rule.signatures is not None),
                ("attestations", bool(rule.attestations)),
            )
            if needed
        ]
        if not needs_digest:
            return found
        try:
            pinned = ref.with_digest(await self.digest(ref))
        except EvidenceUnavailable as error:
            for name in needs_digest:
                unavailable(name, error, ref)
            return found
        if rule.digests is not None and pinned.digest not in rule.digests:
            add(
                "digests",
                f"digest {pinned.digest} is not in the allow-list",
                "use one of the digests the policy allows, or have the allow-list extended",
                pinned,
            )
        if rule.signatures is not None:
            try:
                await self.signatures(pinned, rule.signatures)
            except EvidenceUnavailable as error:
                unavailable("signatures", error, pinned)
            except VerificationError as error:
                keys = " or ".join(rule.signatures.keys)
                add("signatures", error.message, f"sign the image with {keys} (`trtguard sign`)", pinned)
        for attestation_rule in rule.attestations:
            suffix = f"attestations[{attestation_rule.predicate_type}]"
            try:
                await self.image_attestation(pinned, attestation_rule)
            except EvidenceUnavailable as error:
                unavailable(suffix, error, pinned)
            except VerificationError as error:
                fix = "attach the attestation to the image digest (`trtguard attest --push`)"
                add(suffix, error.message, fix, pinned)
        return found

    # --- engines ---

    async def engine_use(self, policy: CompiledPolicy, models: ModelsRule, use: EngineUse) -> list[Violation]:
        ref = self.reference(use.reference)
        if isinstance(ref, InvalidReference):
            return [
                _violation(
                    policy,
                    "models.reference",
                    f"invalid engine reference: {ref.message}",
                    ref.hint or "fix the reference",
                    engine=use.reference,
                    path=use.path,
                )
            ]
        if ref.digest is None:
            return [
                _violation(
                    policy,
                    "models.reference",
                    "engine reference is not pinned by digest",
                    f"refer to the engine as {ref.name}@sha256:<digest> (printed by `trtguard push-engine`)",
                    engine=str(ref),
                    path=use.path,
                )
            ]
        found: list[Violation] = []
        manifest: VerifiedManifest | None = None
        if models.build_manifest is not None:
            rule = models.build_manifest
            try:
                manifest = await self.build_manifest(ref, rule)
            except EvidenceUnavailable as error:
                return [_unavailable(policy, "models.buildManifest", error, engine=str(ref), path=use.path)]
            except VerificationError as error:
                return [
                    _violation(
                        policy,
                        "models.buildManifest",
                        error.message,
                        # A manifest about another engine file says what to attach instead.
                        error.hint
                        or f"sign the build manifest with {' or '.join(rule.keys)} and attach it to the "
                        "engine (`trtguard attest --type https://trtguard.dev/attestations/engine-build/v1 "
                        "--push`)",
                        engine=str(ref),
                        path=use.path,
                    )
                ]
            found += self.max_age(policy, rule, ref, use, manifest)
            found += await self.model_rules(policy, models, ref, use, manifest)
            if models.rules.toolchain is not None:
                found += await self.toolchain(policy, models.rules.toolchain, ref, use, manifest)
            change_control = policy.document.spec.change_control
            if change_control is not None:
                found += await self.change_control(policy, change_control, rule, ref, use, manifest)
        if models.verification is not None:
            found += await self.verification(policy, models.verification, ref, use, manifest)
        return found

    async def manifests_of(
        self, reference: ImageReference, rule: BuildManifestRule
    ) -> tuple[VerifiedManifest, ...]:
        verified = self.engine.verified
        return await self.once(
            ("manifests", reference, tuple(rule.keys), rule.threshold),
            lambda: verified.build_manifests(
                reference, rule.keys, rule.threshold, self.attestations(reference)
            ),
        )

    async def baselines(
        self,
        policy: CompiledPolicy,
        rule: BuildManifestRule,
        ref: ImageReference,
        use: EngineUse,
        verified: VerifiedManifest,
    ) -> tuple[list[Baseline], list[Violation]]:
        """What the engine is compared with: its declared previous manifest and the last admitted engine."""
        manifest = verified.manifest
        declared = manifest.previous_manifest_digest
        baselines: list[Baseline] = []
        found: list[Violation] = []
        declared_found = False

        def add(candidates: Sequence[VerifiedManifest], source: str) -> None:
            nonlocal declared_found
            matching = [c for c in candidates if c.digest == declared]
            if matching:
                declared_found = True
                baselines.append(Baseline(matching[0].manifest, f"declared previous manifest {declared}"))
            else:
                newest = max(candidates, key=lambda c: c.manifest.build_timestamp)
                baselines.append(Baseline(newest.manifest, source))

        def problem(message: str, fix: str) -> None:
            found.append(
                _violation(policy, "changeControl", message, fix, engine=str(ref), path=use.path, error=True)
            )

        def unavailable(error: EvidenceUnavailable) -> None:
            found.append(_unavailable(policy, "changeControl", error, engine=str(ref), path=use.path))

        if manifest.previous_engine is not None:
            previous = self.reference(manifest.previous_engine)
            if isinstance(previous, ImageReference):
                try:
                    add(await self.manifests_of(previous, rule), f"previous engine {previous}")
                except EvidenceUnavailable as error:
                    unavailable(error)
                except VerificationError as error:
                    problem(
                        f"the declared previous engine {previous} has no usable build manifest: "
                        f"{error.message}",
                        "attach the previous engine's signed build manifest to it",
                    )
        history, workload = self.engine.history, self.context
        if history is not None and workload.name and workload.namespace:
            try:
                admitted = await history.last_engines(
                    workload.namespace, workload.kind, workload.name, self.deadline
                )
                for last in _predecessors(use, ref, admitted, self.reference):
                    add(await self.manifests_of(last, rule), f"last admitted engine {last}")
            except EvidenceUnavailable as error:
                unavailable(error)
            except VerificationError as error:
                problem(
                    f"the engine last admitted here has no usable build manifest: {error.message}",
                    "attach the previous engine's signed build manifest, or have the change reviewed",
                )
        if declared is not None and not declared_found:
            problem(
                f"the declared previous manifest {declared} cannot be found, so the changes against it "
                "cannot be computed",
                "record where it is attached (`trtguard manifest create --previous-engine REF`)",
            )
        return baselines, found

    async def change_control(
        self,
        policy: CompiledPolicy,
        rule: ChangeControl,
        manifest_rule: BuildManifestRule,
        ref: ImageReference,
        use: EngineUse,
        verified: VerifiedManifest,
    ) -> list[Violation]:
        baselines, found = await self.baselines(policy, manifest_rule, ref, use, verified)
        verdict = judge(rule, verified, baselines, (), self.engine.clock())
        if verdict.gated:
            try:
                approvals = await self.once(
                    ("approvals", ref, tuple(rule.approvals.keys)),
                    lambda: self.engine.verified.approvals(ref, rule.approvals.keys, self.attestations(ref)),
                )
            except EvidenceUnavailable as error:
                return [*found, _unavailable(policy, "changeControl", error, engine=str(ref), path=use.path)]
            verdict = judge(rule, verified, baselines, approvals, self.engine.clock())
        if not verdict.satisfied:
            message, fix = describe(rule, verified, verdict)
            found.append(_violation(policy, "changeControl", message, fix, engine=str(ref), path=use.path))
        return found

    def max_age(
        self,
        policy: CompiledPolicy,
        rule: BuildManifestRule,
        ref: ImageReference,
        use: EngineUse,
        verified: VerifiedManifest,
    ) -> list[Violation]:
        if policy.manifest_max_age is None:
            return []
        age = self.engine.clock() - verified.manifest.build_timestamp
        if age < -_CLOCK_SKEW:  # a manifest dated in the future would never expire
            built = verified.manifest.build_timestamp
            message = f"the build manifest is dated {_duration(-age)} in the future ({built})"
            fix = "record the build time from a synchronised clock and sign the manifest again"
        elif age > policy.manifest_max_age:
            message = f"the engine was built {_duration(age)} ago, more than the {rule.max_age} allowed"
            fix = "rebuild the engine and record a fresh build manifest"
        else:
            return []
        return [
            _violation(policy, "models.buildManifest.maxAge", message, fix, engine=str(ref), path=use.path)
        ]

    async def model_rules(
        self,
        policy: CompiledPolicy,
        models: ModelsRule,
        ref: ImageReference,
        use: EngineUse,
        verified: VerifiedManifest,
    ) -> list[Violation]:
        rules = models.rules
        manifest = verified.manifest
        found: list[Violation] = []

        def add(rule: str, message: str, fix: str) -> None:
            found.append(_violation(policy, rule, message, fix, engine=str(ref), path=use.path))

        if rules.precisions is not None:
            extra = sorted(manifest.precisions() - set(rules.precisions))
            if extra:
                add(
                    "models.rules.precisions",
                    f"engine uses precision {', '.join(extra)}, allowed: {', '.join(rules.precisions)}",
                    "rebuild without those precisions, or have the policy extended after review",
                )
        if (
            rules.int8_requires_calibration
            and manifest.uses_int8()
            and not manifest.has_calibration_evidence()
        ):
            add(
                "models.rules.int8RequiresCalibration",
                "engine uses INT8 but its build manifest records no calibration evidence",
                "record the calibration dataset and cache hashes (`trtguard manifest create`)",
            )
        for metric, floor in rules.min_accuracy.items():
            value = manifest.accuracy_value(metric)
            if value is None:
                add(
                    f"models.rules.minAccuracy.{metric}",
                    f"build manifest records no accuracy metric {metric!r}",
                    f"measure {metric} on the release dataset and record it in the manifest",
                )
            elif value < floor:
                add(
                    f"models.rules.minAccuracy.{metric}",
                    f"{metric} is {value:g}, below the required {floor:g}",
                    "improve the engine's accuracy (recalibrate, or use a higher precision)",
                )
        if rules.plugins_allowed is not None:
            allowed = set(rules.plugins_allowed)
            for plugin in manifest.builder_config.plugins:
                if f"sha256:{plugin.library_sha256}" not in allowed:
                    add(
                        "models.rules.pluginsAllowed",
                        f"plugin {plugin.name} library sha256:{plugin.library_sha256} is not allowed",
                        "build without the plugin, or have its library digest reviewed and allowed",
                    )
        if policy.expressions:
            try:
                # Checked against the limits and converted once for all of this policy's expressions.
                activation = prepare_activation(
                    {
                        "manifest": verified.as_json,
                        "workload": self.cel_workload() if policy.expressions_read_workload else {},
                        "engine": {"name": use.name, "reference": str(ref), "digest": ref.digest},
                    }
                )
            except CelEvaluationError as error:
                add(
                    "models.rules.expressions",
                    f"the workload or manifest cannot be handed to CEL: {error.message}",
                    error.hint or "shrink the object",
                )
                return found
            outcomes = await self.engine.cel.evaluate_bools(
                [expression.program for expression in policy.expressions],
                activation,
                seconds=self.deadline.remaining(),
            )
            for expression, outcome in zip(policy.expressions, outcomes, strict=True):
                rule_id = f"models.rules.expressions.{expression.name}"
                if outcome is True:
                    continue
                if outcome is False:
                    add(rule_id, expression.message, "change the engine or workload so that the rule holds")
                elif outcome.resource:  # stopped by a bound on time or memory: it could not be checked
                    stopped = (
                        f"{expression.message} (the expression could not be evaluated: {outcome.message})"
                    )
                    found.append(
                        _violation(
                            policy,
                            rule_id,
                            stopped,
                            outcome.hint or "simplify the expression",
                            engine=str(ref),
                            path=use.path,
                            error=True,
                        )
                    )
                else:
                    add(
                        rule_id,
                        f"{expression.message} (the expression failed: {outcome.message})",
                        "fix the manifest field the expression reads, or the expression",
                    )
        return found

    async def toolchain(
        self,
        policy: CompiledPolicy,
        rule: ToolchainRule,
        ref: ImageReference,
        use: EngineUse,
        verified: VerifiedManifest,
    ) -> list[Violation]:
        rule_id = "models.rules.toolchain"
        builder_text = verified.manifest.toolchain.image
        builder = self.reference(builder_text)
        if isinstance(builder, InvalidReference):
            return [
                _violation(
                    policy,
                    rule_id,
                    f"builder image in the manifest is invalid: {builder.message}",
                    "record the builder image as registry/repo@sha256:<digest>",
                    engine=str(ref),
                    path=use.path,
                )
            ]
        found: list[Violation] = []
        if policy.toolchain_patterns and not matches_any(policy.toolchain_patterns, builder):
            allowed = ", ".join(p.text for p in policy.toolchain_patterns)
            found.append(
                _violation(
                    policy,
                    rule_id,
                    f"engine was built with {builder}, not an allowed toolchain ({allowed})",
                    "rebuild the engine with an allowed TensorRT image",
                    engine=str(ref),
                    path=use.path,
                )
            )
        if rule.same_as_runtime_image:
            found += await self.same_toolchain(policy, builder, ref, use)
        return found

    async def same_toolchain(
        self, policy: CompiledPolicy, builder: ImageReference, ref: ImageReference, use: EngineUse
    ) -> list[Violation]:
        """``sameAsRuntimeImage``: every container that may run the engine runs the builder image.

        One matching container is not enough: the engine runs wherever it is mounted (or handed on by an
        init container, see :attr:`EngineUse.containers`), so each of those containers is checked.
        """
        rule_id = "models.rules.toolchain"
        found: list[Violation] = []

        def add(message: str, fix: str, *, error: bool = False) -> None:
            found.append(
                _violation(policy, rule_id, message, fix, engine=str(ref), path=use.path, error=error)
            )

        runners = [u for u in self.context.images if u.field != "volume" and u.container in use.containers]
        if not runners:
            add(
                f"no container runs the engine, so its builder image {builder} cannot be compared",
                "mount the engine's image volume in the container that serves it, or name that container "
                "in the trtguard.dev/engines annotation",
            )
        for image in runners:
            where = f"{image.field} {image.container!r} ({image.path})"
            image_ref = self.reference(image.reference)
            if isinstance(image_ref, InvalidReference):
                add(
                    f"{where} runs an invalid image reference, so it cannot be compared with the builder "
                    f"image {builder}: {image_ref.message}",
                    "fix the container's image reference",
                )
                continue
            try:
                digest = await self.digest(image_ref)
            except EvidenceUnavailable as error:
                add(
                    f"cannot compare the builder image {builder} with {where} {image_ref}: {error.message}",
                    "pin the container's image by digest",
                    error=True,
                )
                continue
            if digest != builder.digest:
                running = str(image_ref) if image_ref.digest else f"{image_ref} ({digest})"
                add(
                    f"engine was built with {builder} but {where} runs {running}",
                    "run the engine only in the TensorRT image it was built with (every container that "
                    "mounts it, or gets a copy from an init container), or rebuild it there",
                )
        return found

    async def verification(
        self,
        policy: CompiledPolicy,
        rule: VerificationRule,
        ref: ImageReference,
        use: EngineUse,
        manifest: VerifiedManifest | None,
    ) -> list[Violation]:
        verified = self.engine.verified
        engine_sha256 = manifest.manifest.output_engine.sha256 if manifest is not None else None
        try:
            await self.once(
                ("verification", ref, tuple(rule.keys), rule.threshold, engine_sha256),
                lambda: verified.gpu_verification(
                    ref, rule.keys, rule.threshold, engine_sha256, self.attestations(ref)
                ),
            )
        except EvidenceUnavailable as error:
            return [_unavailable(policy, "models.verification", error, engine=str(ref), path=use.path)]
        except VerificationError as error:
            return [
                _violation(
                    policy,
                    "models.verification",
                    error.message,
                    error.hint
                    or "run `trtguard verify-engine --gpu --attest` on a GPU node and attach the attestation",
                    engine=str(ref),
                    path=use.path,
                )
            ]
        return []


def _predecessors(
    use: EngineUse,
    ref: ImageReference,
    admitted: Sequence[AdmittedEngine],
    parse: Callable[[str], ImageReference | InvalidReference],
) -> list[ImageReference]:
    """The engines of the workload's last admission that ``use`` replaces: its baselines from history.

    The same engine name (volume or annotation entry) first; else the engines that ran in one of the same
    containers; else every engine admitted last, so that renaming the engine, its repository and its volume
    at once still cannot leave a change without a baseline (changes against each are counted). None when
    the engine is among them unchanged.
    """
    candidates = [e for e in admitted if e.name == use.name] or [
        e for e in admitted if set(e.containers) & set(use.containers)
    ]
    found: list[ImageReference] = []
    for engine in candidates or admitted:
        parsed = parse(engine.reference)
        if parsed == ref:
            return []
        if isinstance(parsed, ImageReference) and parsed not in found:
            found.append(parsed)
    return found


def _duration(delta: timedelta) -> str:
    """``3 days 4 h``, ``5 h 12 min``, ``40 s``: enough to read a max-age violation."""
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return f"{days} days {hours} h"
    if hours:
        return f"{hours} h {rest // 60} min"
    return f"{rest // 60} min {rest % 60} s" if rest >= 60 else f"{rest} s"


def _violation(
    policy: CompiledPolicy,
    rule: str,
    message: str,
    fix: str,
    *,
    image: str | None = None,
    engine: str | None = None,
    path: str | None = None,
    error: bool = False,
) -> Violation:
    spec = policy.document.spec
    return Violation(
        policy=policy.name,
        rule=rule,
        message=message,
        fix=fix,
        action=spec.on_error if error else spec.action,
        image=image,
        engine=engine,
        path=path,
        error=error,
    )


def _unavailable(
    policy: CompiledPolicy,
    rule: str,
    error: TrtguardError,
    *,
    image: str | None = None,
    engine: str | None = None,
    path: str | None = None,
) -> Violation:
    return _violation(
        policy,
        rule,
        f"could not be checked: {error.message}",
        error.hint or "retry when the registry is reachable",
        image=image,
        engine=engine,
        path=path,
        error=True,
    )
