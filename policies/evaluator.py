"""Evaluate a workload against a :class:`~policies.loader.PolicySet`.

For every policy that matches the resource, every image must match at least one of the policy's image rules
(an unmatched image is a violation) and satisfy each rule it matches; every engine must come with a build
manifest signed by the policy's keys and satisfy the model rules. A rule that cannot be checked (offline, a
registry that fails, time running out) is a violation with ``error=True`` whose action is the policy's
``onError``: a failure to check is never a silent pass.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from policies._private.cel import CelEvaluationError, prepare_activation
from policies._private.patterns import matches_any
from policies.loader import CompiledPolicy, PolicySet, Signer
from policies.results import Action, ArtifactRecord, Decision, Violation
from policies.schema import (
    AttestationRule,
    BuildManifestRule,
    LabelSelector,
    ModelsRule,
    ResourceFilter,
    SignatureRule,
    ToolchainRule,
    VerificationRule,
)
from policies.workload import EngineUse, ImageUse, NotAWorkload, Workload, changed_since, extract
from verifier.attestations import ENGINE_VERIFICATION_PREDICATE_TYPE, load_verification
from verifier.deadline import Deadline
from verifier.dsse import verify_envelope
from verifier.errors import EvidenceUnavailable, InputError, TrtguardError, VerificationError
from verifier.evidence import Attestation, EvidenceSource
from verifier.intoto import statement_from_envelope
from verifier.keys import PublicKey
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, EngineBuildManifest, load_manifest
from verifier.references import ImageReference, InvalidReference

T = TypeVar("T")

#: Name used for violations that belong to no single policy (a resource that cannot be read at all).
ENGINE_NAME = "trtguard"


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class VerifiedManifest:
    """A build manifest whose signature verified, with its JSON form for CEL and the subjects it covers."""

    manifest: EngineBuildManifest
    as_json: dict[str, Any]
    subjects: frozenset[str]
    signers: tuple[str, ...]
    origin: str


class PolicyEngine:
    """Evaluates workloads against one policy set with one evidence source.

    An engine is immutable with respect to its policy set; a reload makes a new engine. It memoises verified
    build manifests per (envelope, key set), so repeated admissions of the same engine cost little.
    """

    def __init__(
        self,
        policy_set: PolicySet,
        evidence: EvidenceSource,
        *,
        clock: Callable[[], datetime] = _utcnow,
        memo_size: int = 4096,
    ) -> None:
        self.policy_set = policy_set
        self.evidence = evidence
        self.clock = clock
        self._memo_size = memo_size
        # Verification of given bytes against given keys always ends the same way, so results (failures
        # included) are kept: repeated admissions of the same image or engine cost a dictionary look-up.
        self._memo: dict[tuple[object, ...], object] = {}

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
        old: Mapping[str, Any] | None = None,
        deadline: Deadline | None = None,
    ) -> Decision:
        """The decision for ``obj``.

        ``old`` is the previous version of the object (an UPDATE): only images and engines that are new or
        changed are judged. Raises :class:`~policies.workload.NotAWorkload` for kinds without a pod spec.
        """
        deadline = deadline or Deadline.never()
        try:
            workload = extract(obj, namespace=namespace)
        except NotAWorkload:
            raise
        except InputError as error:
            return self._unreadable(obj, namespace, error)
        updating = False
        if old is not None:
            try:
                workload = changed_since(workload, extract(old, namespace=namespace))
                updating = True
            except InputError:
                pass  # an unreadable old object means everything counts as new
        policies = self.matching(workload)
        run = _Run(self, workload, deadline)
        per_policy = await asyncio.gather(*(run.policy(p, updating=updating) for p in policies))
        violations = tuple(v for found in per_policy for v in found)
        return Decision(
            kind=workload.kind,
            namespace=workload.namespace,
            name=workload.name,
            policy_revision=self.revision,
            matched_policies=tuple(p.name for p in policies),
            violations=violations,
            images=tuple(run.image_records()),
            engines=tuple(run.engine_records()),
            notes=("only new or changed images and engines were judged",) if updating else (),
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

    def _memoised(self, key: tuple[object, ...], compute: Callable[[], T]) -> T:
        found = self._memo.get(key)
        if found is None:
            try:
                found = compute()
            except TrtguardError as error:
                found = error
            if len(self._memo) >= self._memo_size:
                self._memo.clear()
            self._memo[key] = found
        if isinstance(found, TrtguardError):
            raise found
        result: T = found  # type: ignore[assignment]
        return result

    def verified_signers(
        self, attestation: Attestation, signers: Mapping[str, Signer], threshold: int
    ) -> tuple[str, ...]:
        """Names of ``signers`` that signed ``attestation`` (at least ``threshold``; memoised).

        Raises :class:`VerificationError` below the threshold.
        """
        envelope = attestation.envelope
        key = (
            "signers",
            envelope.payload,
            tuple(s.sig for s in envelope.signatures),
            tuple(signers),
            threshold,
        )
        return self._memoised(
            key, lambda: verify_envelope(envelope, _public_keys(signers), threshold=threshold)
        )

    def verified_manifest(
        self, attestation: Attestation, signers: Mapping[str, Signer], threshold: int
    ) -> VerifiedManifest:
        """Verify ``attestation`` as a build manifest signed by ``threshold`` of ``signers`` (memoised).

        Raises :class:`VerificationError` (bad or missing signature) or :class:`InputError` (not a manifest).
        """
        envelope = attestation.envelope
        key = (
            "manifest",
            envelope.payload,
            tuple(s.sig for s in envelope.signatures),
            tuple(signers),
            threshold,
        )
        return self._memoised(key, lambda: self._verify_manifest(attestation, signers, threshold))

    def _verify_manifest(
        self, attestation: Attestation, signers: Mapping[str, Signer], threshold: int
    ) -> VerifiedManifest:
        verified = self.verified_signers(attestation, signers, threshold)
        statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
        manifest = load_manifest(statement, attestation.origin)
        engine_digest = f"sha256:{manifest.output_engine.sha256}"
        if engine_digest not in statement.subject_digests():
            raise VerificationError(
                f"the manifest's output_engine.sha256 {engine_digest} is not the statement's subject",
                location=attestation.origin,
                hint="re-create the manifest for the engine it describes",
            )
        return VerifiedManifest(
            manifest=manifest,
            as_json=manifest.model_dump(mode="json"),
            subjects=statement.subject_digests(),
            signers=verified,
            origin=attestation.origin,
        )


def _public_keys(signers: Mapping[str, Signer]) -> dict[str, PublicKey]:
    keys = {ref: s.public_key for ref, s in signers.items() if s.public_key is not None}
    if not keys:
        raise VerificationError(
            f"none of {', '.join(signers)} is a public key; keyless signers cannot sign attestations here",
            hint="name public-key signers for attestations",
        )
    return keys


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


# --- one evaluation ----------------------------------------------------------------------------------------


@dataclass
class _Run:
    """State of one evaluation: memoised look-ups shared by every policy."""

    engine: PolicyEngine
    workload: Workload
    deadline: Deadline
    _refs: dict[str, ImageReference | InvalidReference] = field(default_factory=dict)
    _lookups: dict[tuple[str, str], asyncio.Future[Any]] = field(default_factory=dict)
    _digests: dict[str, str] = field(default_factory=dict)

    def reference(self, text: str) -> ImageReference | InvalidReference:
        found = self._refs.get(text)
        if found is None:
            try:
                found = ImageReference.parse(text)
            except InvalidReference as error:
                found = error
            self._refs[text] = found
        return found

    async def lookup(self, kind: str, reference: ImageReference, call: Callable[[], Awaitable[T]]) -> T:
        """One evidence call per (kind, reference) per evaluation, shared by concurrent callers."""
        key = (kind, str(reference))
        future = self._lookups.get(key)
        if future is None:
            future = asyncio.ensure_future(call())
            self._lookups[key] = future
        result: T = await asyncio.shield(future)
        return result

    async def digest(self, reference: ImageReference) -> str:
        if reference.digest is not None:
            return reference.digest
        evidence = self.engine.evidence
        digest = await self.lookup(
            "digest", reference, lambda: evidence.resolve_digest(reference, self.deadline)
        )
        self._digests[str(reference)] = digest
        return digest

    def image_records(self) -> Iterable[ArtifactRecord]:
        for use in self.workload.images:
            ref = self._refs.get(use.reference)
            digest = None
            if isinstance(ref, ImageReference):
                digest = ref.digest or self._digests.get(str(ref))
            yield ArtifactRecord(reference=use.reference, digest=digest, path=use.path)

    def engine_records(self) -> Iterable[ArtifactRecord]:
        for use in self.workload.engines:
            ref = self._refs.get(use.reference)
            digest = ref.digest if isinstance(ref, ImageReference) else None
            yield ArtifactRecord(reference=use.reference, digest=digest, path=use.path)

    # --- per policy ---

    async def policy(self, policy: CompiledPolicy, *, updating: bool) -> list[Violation]:
        checks: list[Awaitable[list[Violation]]] = []
        spec = policy.document.spec
        found: list[Violation] = [
            _violation(policy, "workload", problem.message, "fix the resource", path=problem.path)
            for problem in self.workload.problems
        ]
        if policy.image_rules:
            if not self.workload.images and not updating:
                found.append(
                    _violation(
                        policy,
                        "workload",
                        "no image could be found in the resource, so nothing can be checked",
                        "give every container an image",
                        path=self.workload.pod_spec_path,
                    )
                )
            checks += [self.image(policy, use) for use in self.workload.images]
        if spec.models is not None:
            if spec.models.required and not self.workload.engines and not updating:
                found.append(
                    _violation(
                        policy,
                        "models.required",
                        "the workload declares no TensorRT engine",
                        "name the engine by digest in an image volume or the trtguard.dev/engines annotation",
                        path=f"{self.workload.pod_spec_path}.volumes",
                    )
                )
            checks += [self.engine_use(policy, spec.models, use) for use in self.workload.engines]
        for result in await asyncio.gather(*checks):
            found += result
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
        rules = [r for r in policy.image_rules if r.applies_to(ref)]
        if not rules:
            allowed = ", ".join(p.text for r in policy.image_rules for p in r.patterns)
            return [
                _violation(
                    policy,
                    "images",
                    f"image is not allowed by any image rule (allowed: {allowed})",
                    "use an allowed image, or add a rule for it to the policy",
                    image=str(ref),
                    path=use.path,
                )
            ]
        found: list[Violation] = []
        for compiled in rules:
            rule = compiled.rule
            rule_id = f"images.{rule.name}"
            if rule.require_digest and ref.digest is None:
                found.append(
                    _violation(
                        policy,
                        f"{rule_id}.requireDigest",
                        "image is not pinned by digest",
                        f"pin it: {ref.name}@sha256:<digest> (e.g. from `crane digest {ref}`)",
                        image=str(ref),
                        path=use.path,
                    )
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
                continue
            try:
                digest = await self.digest(ref)
            except EvidenceUnavailable as error:
                found += [
                    _unavailable(policy, f"{rule_id}.{name}", error, image=str(ref), path=use.path)
                    for name in needs_digest
                ]
                continue
            pinned = ref.with_digest(digest)
            if rule.digests is not None and digest not in rule.digests:
                found.append(
                    _violation(
                        policy,
                        f"{rule_id}.digests",
                        f"digest {digest} is not in the allow-list",
                        "use one of the digests the policy allows, or have the allow-list extended",
                        image=str(pinned),
                        path=use.path,
                    )
                )
            if rule.signatures is not None:
                found += await self.signatures(policy, f"{rule_id}.signatures", pinned, use, rule.signatures)
            for attestation_rule in rule.attestations:
                found += await self.image_attestation(
                    policy, f"{rule_id}.attestations", pinned, use, attestation_rule
                )
        return found

    async def signatures(
        self, policy: CompiledPolicy, rule_id: str, ref: ImageReference, use: ImageUse, rule: SignatureRule
    ) -> list[Violation]:
        evidence = self.engine.evidence
        try:
            material = await self.lookup(
                "signatures", ref, lambda: evidence.image_signatures(ref, self.deadline)
            )
        except EvidenceUnavailable as error:
            return [_unavailable(policy, rule_id, error, image=str(ref), path=use.path)]
        signers = self.engine.policy_set.signers_for(rule.keys)
        verified: set[str] = set()
        reasons: list[str] = []
        for statement in material.statements:
            try:
                verified.update(self.engine.verified_signers(statement, signers, 1))
            except TrtguardError as error:
                reasons.append(error.message)
        if len({signers[r].public_key for r in verified}) >= rule.threshold:
            return []
        if not material.statements:
            message = f"no signature found (looked in {material.origin or evidence.description})"
        elif not verified and reasons:
            message = reasons[0]
        else:
            message = (
                f"{len(verified)} of {rule.threshold} required signatures from keys [{', '.join(rule.keys)}]"
            )
        return [
            _violation(
                policy,
                rule_id,
                message,
                f"sign the image with {' or '.join(rule.keys)} (`trtguard sign`)",
                image=str(ref),
                path=use.path,
            )
        ]

    async def image_attestation(
        self, policy: CompiledPolicy, rule_id: str, ref: ImageReference, use: ImageUse, rule: AttestationRule
    ) -> list[Violation]:
        evidence = self.engine.evidence
        try:
            attestations = await self.lookup(
                "attestations", ref, lambda: evidence.attestations(ref, self.deadline)
            )
        except EvidenceUnavailable as error:
            return [_unavailable(policy, rule_id, error, image=str(ref), path=use.path)]
        signers = self.engine.policy_set.signers_for(rule.keys)
        candidates = [a for a in attestations if a.predicate_type == rule.predicate_type]
        for attestation in candidates:
            try:
                self.engine.verified_signers(attestation, signers, rule.threshold)
            except TrtguardError:
                continue
            return []
        what = "no" if not candidates else "no correctly signed"
        return [
            _violation(
                policy,
                f"{rule_id}[{rule.predicate_type}]",
                f"{what} attestation of type {rule.predicate_type} signed by [{', '.join(rule.keys)}]",
                "attach the attestation to the image digest (`trtguard attest`)",
                image=str(ref),
                path=use.path,
            )
        ]

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
        if models.build_manifest is None and models.verification is None:
            return []
        evidence = self.engine.evidence
        try:
            attestations = await self.lookup(
                "attestations", ref, lambda: evidence.attestations(ref, self.deadline)
            )
        except EvidenceUnavailable as error:
            return [_unavailable(policy, "models.buildManifest", error, engine=str(ref), path=use.path)]
        found: list[Violation] = []
        manifest: VerifiedManifest | None = None
        if models.build_manifest is not None:
            manifest, problem = self.build_manifest(policy, models.build_manifest, ref, use, attestations)
            if problem is not None:
                return [problem]
        if manifest is not None:
            found += self.model_rules(policy, models, ref, use, manifest)
            if models.rules.toolchain is not None:
                found += await self.toolchain(policy, models.rules.toolchain, ref, use, manifest)
        if models.verification is not None:
            found += self.verification(policy, models.verification, ref, use, attestations, manifest)
        return found

    def build_manifest(
        self,
        policy: CompiledPolicy,
        rule: BuildManifestRule,
        ref: ImageReference,
        use: EngineUse,
        attestations: Iterable[Attestation],
    ) -> tuple[VerifiedManifest | None, Violation | None]:
        signers = self.engine.policy_set.signers_for(rule.keys)
        candidates = [a for a in attestations if a.predicate_type == ENGINE_BUILD_PREDICATE_TYPE]
        verified: list[VerifiedManifest] = []
        reasons: list[str] = []
        for attestation in candidates:
            try:
                verified.append(self.engine.verified_manifest(attestation, signers, rule.threshold))
            except TrtguardError as error:
                reasons.append(f"{attestation.origin}: {error.message}")
        if not verified:
            if not candidates:
                message = f"no build manifest attestation found ({self.engine.evidence.description})"
            else:
                message = f"build manifest not signed by [{', '.join(rule.keys)}]: {reasons[0]}"
            return None, _violation(
                policy,
                "models.buildManifest",
                message,
                f"sign the build manifest with {' or '.join(rule.keys)} and attach it to the engine "
                "(`trtguard attest --type https://trtguard.dev/attestations/engine-build/v1`)",
                engine=str(ref),
                path=use.path,
            )
        # Several signed manifests for one engine: the newest build is the one that describes it.
        manifest = max(verified, key=lambda v: v.manifest.build_timestamp)
        if policy.manifest_max_age is not None:
            age = self.engine.clock() - manifest.manifest.build_timestamp
            if age > policy.manifest_max_age:
                return manifest, _violation(
                    policy,
                    "models.buildManifest.maxAge",
                    f"the engine was built {age.days} days ago, more than the {rule.max_age} allowed",
                    "rebuild the engine and record a fresh build manifest",
                    engine=str(ref),
                    path=use.path,
                )
        return manifest, None

    def model_rules(
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
                if f"sha256:{plugin.library_sha256}" not in allowed and plugin.library_sha256 not in allowed:
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
                        "workload": self.workload.obj,
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
            for expression in policy.expressions:
                rule_id = f"models.rules.expressions.{expression.name}"
                try:
                    if not expression.program.evaluate_bool(activation):
                        add(
                            rule_id,
                            expression.message,
                            "change the engine or workload so that the rule holds",
                        )
                except CelEvaluationError as error:
                    add(
                        rule_id,
                        f"{expression.message} (the expression failed: {error.message})",
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
            runtime = [
                u
                for u in self.workload.images
                if u.field in ("container", "initContainer") and u.container in use.containers
            ]
            digests: dict[str, str] = {}
            unresolved: list[str] = []
            for image in runtime:
                image_ref = self.reference(image.reference)
                if isinstance(image_ref, InvalidReference):
                    continue
                try:
                    digests[await self.digest(image_ref)] = str(image_ref)
                except EvidenceUnavailable:
                    unresolved.append(str(image_ref))
            if builder.digest in digests:
                return found
            if unresolved and not digests:
                found.append(
                    _violation(
                        policy,
                        rule_id,
                        f"cannot compare the builder image {builder} with the runtime image "
                        f"{', '.join(unresolved)}: its digest is unknown",
                        "pin the runtime image by digest",
                        engine=str(ref),
                        path=use.path,
                        error=True,
                    )
                )
            else:
                running = (
                    ", ".join(f"{v}" if k in v else f"{v} ({k})" for k, v in digests.items())
                    or "no container"
                )
                found.append(
                    _violation(
                        policy,
                        rule_id,
                        f"engine was built with {builder} but runs in {running}",
                        "run the engine in the TensorRT image it was built with, or rebuild it there",
                        engine=str(ref),
                        path=use.path,
                    )
                )
        return found

    def verification(
        self,
        policy: CompiledPolicy,
        rule: VerificationRule,
        ref: ImageReference,
        use: EngineUse,
        attestations: Iterable[Attestation],
        manifest: VerifiedManifest | None,
    ) -> list[Violation]:
        signers = self.engine.policy_set.signers_for(rule.keys)
        candidates = [a for a in attestations if a.predicate_type == ENGINE_VERIFICATION_PREDICATE_TYPE]
        reasons: list[str] = []
        for attestation in candidates:
            try:
                self.engine.verified_signers(attestation, signers, rule.threshold)
                statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
                observed = load_verification(statement, attestation.origin)
                if manifest is not None and observed.engine.sha256 != manifest.manifest.output_engine.sha256:
                    reasons.append(f"it is about engine file sha256:{observed.engine.sha256}, not this one")
                    continue
                if observed.result != "pass":
                    failed = ", ".join(c.field for c in observed.checks if c.status == "fail")
                    reasons.append(f"the GPU verifier reported failed checks: {failed}")
                    continue
                return []
            except TrtguardError as error:
                reasons.append(error.message)
        message = (
            "no GPU verification attestation found"
            if not candidates
            else (f"no passing GPU verification signed by [{', '.join(rule.keys)}]: {reasons[0]}")
        )
        return [
            _violation(
                policy,
                "models.verification",
                message,
                "run `trtguard verify-engine --gpu --attest` on a GPU node and attach the attestation",
                engine=str(ref),
                path=use.path,
            )
        ]


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
    error: EvidenceUnavailable,
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
