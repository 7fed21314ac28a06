"""policies.evaluator: PolicyEvaluator as a whole — actions, unreadable objects, updates, onError, caching."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, NoReturn

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.results import Action
from policies.workload_model._budget import UNLIMITED, BudgetExceeded, offload
from policies.workload_model._pods import MAX_CONTAINERS
from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material, pod
from tests.policies.evaluation import (
    engine_for,
    evaluate,
    images_policy,
    models_policy,
    rules,
    signature_policy,
)
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable, VerificationError
from verifier.base._references import ImageReference
from verifier.evidence import ArtifactAttestations, ArtifactSubjects, EvidenceSource, ImageSignatures
from verifier.evidence_folder import LocalEvidence


def test_warn_policy_never_denies_and_audit_only_records(material: Material) -> None:
    warn = evaluate(engine_for(material, images_policy("Warn")), pod(images=("nvcr.io/nvidia/tensorrt:1",)))
    assert warn.allowed
    assert [v.action for v in warn.warnings] == [Action.WARN]
    audit = evaluate(engine_for(material, images_policy("Audit")), pod(images=("nvcr.io/nvidia/tensorrt:1",)))
    assert audit.allowed
    assert audit.warnings == ()
    assert len(audit.audits) == 1


def test_deny_policy_next_to_warn_policy_still_denies(material: Material) -> None:
    strict = images_policy("Deny")
    lenient = images_policy("Warn").replace("name: images", "name: lenient")
    decision = evaluate(engine_for(material, strict, lenient), pod(images=("nvcr.io/nvidia/tensorrt:1",)))
    assert not decision.allowed
    assert {(v.policy, v.action) for v in decision.violations} == {
        ("images", Action.DENY),
        ("lenient", Action.WARN),
    }


def test_workload_without_images_is_never_a_vacuous_pass(material: Material) -> None:
    obj = pod()
    obj["spec"]["containers"] = []
    decision = evaluate(engine_for(material, images_policy()), obj)
    assert not decision.allowed
    assert {v.rule for v in decision.violations} == {"workload"}


def test_malformed_fields_become_violations(material: Material) -> None:
    obj = pod()
    obj["spec"]["containers"].append({"name": "broken", "image": 42})
    decision = evaluate(engine_for(material, images_policy()), obj)
    assert not decision.allowed
    assert any(v.rule == "workload" and "spec.containers[1]" in (v.path or "") for v in decision.violations)


def test_unreadable_object_is_denied_by_trtguard(material: Material) -> None:
    decision = evaluate(
        engine_for(material, images_policy()), {"apiVersion": "v1", "kind": "Pod", "msg": "x"}
    )
    assert not decision.allowed
    assert decision.violations[0].policy == "trtguard"


def test_kinds_with_nothing_to_judge_say_why(material: Material) -> None:
    decision = evaluate(
        engine_for(material, images_policy()), {"apiVersion": "v1", "kind": "Service", "metadata": {}}
    )
    assert decision.allowed and not decision.violations
    assert decision.unjudged is not None and "names no container image" in decision.unjudged


def test_update_judges_only_new_or_changed_images(material: Material) -> None:
    engine = engine_for(material, images_policy())
    old = pod(images=("docker.io/library/legacy:1",))
    unchanged = pod(images=("docker.io/library/legacy:1",), labels={"new": "label"})
    decision = evaluate(engine, unchanged, old=old)
    assert decision.allowed
    assert decision.notes
    changed = pod(images=("docker.io/library/legacy:1", "docker.io/library/new:1"))
    decision = evaluate(engine, changed, old=old)
    assert [v.image for v in decision.violations] == ["docker.io/library/new:1"]


def test_update_that_makes_a_policy_apply_judges_the_whole_object(material: Material) -> None:
    policy = images_policy().replace(
        'match: {namespaces: ["prod*"]}',
        'match: {namespaces: ["prod*"]}\n  exclude: {labels: {matchLabels: {tier: experimental}}}',
    )
    engine = engine_for(material, policy)
    bad = ("docker.io/library/anything:1",)
    old = pod(images=bad, labels={"tier": "experimental"})
    assert evaluate(engine, old).matched_policies == ()
    # Only the label goes: the image was never checked by this policy, so it is judged now.
    decision = evaluate(engine, pod(images=bad), old=old)
    assert [v.image for v in decision.violations] == ["docker.io/library/anything:1"]
    assert not decision.allowed


def test_a_policy_added_since_judges_only_what_an_update_changes(material: Material) -> None:
    # The decision (policies/README.md, "On an UPDATE"): a policy added after a workload was admitted judges
    # what an UPDATE changes, as a rule added to a policy does; what already runs is the business of
    # `trtguard audit-cluster`, and `check` (a CREATE) judges the object whole.
    engine = engine_for(material, images_policy())
    legacy = ("docker.io/library/legacy:1",)
    old = pod(images=legacy)
    rollout = pod(images=legacy, labels={"rollout": "2"})
    assert evaluate(engine, rollout, old=old).allowed
    assert not evaluate(engine, rollout).allowed
    changed = pod(images=(*legacy, "docker.io/library/new:1"), labels={"rollout": "2"})
    assert [v.image for v in evaluate(engine, changed, old=old).violations] == ["docker.io/library/new:1"]


def test_update_of_the_runtime_image_judges_its_engine_again(material: Material) -> None:
    rules_yaml = "      toolchain: {sameAsRuntimeImage: true}\n"
    ref = material.engine("e")
    engine = engine_for(material, models_policy(rules_yaml), keys=("build-signer",))
    old = pod(engine=ref)
    assert evaluate(engine, old).allowed
    decision = evaluate(engine, pod(images=(OTHER_RUNTIME,), engine=ref), old=old)
    assert ("models", "models.rules.toolchain", Action.DENY) in rules(decision)


def test_update_of_what_cel_reads_judges_the_engine_again(material: Material) -> None:
    rules_yaml = (
        "      expressions:\n"
        "        - {name: team, cel: 'has(workload.metadata.labels.team)', message: label the team}\n"
    )
    ref = material.engine("e")
    engine = engine_for(material, models_policy(rules_yaml), keys=("build-signer",))
    old = pod(engine=ref, labels={"team": "vision"})
    assert evaluate(engine, old).allowed
    decision = evaluate(engine, pod(engine=ref, labels={"app": "resnet"}), old=old)
    assert [v.message for v in decision.violations] == ["label the team"]
    # A change CEL cannot see (a finalizer removed by a controller) judges nothing again.
    finalized = pod(engine=ref)
    finalized["metadata"]["finalizers"] = ["example.com/cleanup"]
    assert evaluate(engine, pod(engine=ref), old=finalized).violations == ()


def test_update_that_leaves_the_runtime_image_to_the_operator_judges_its_engine_again(
    material: Material,
) -> None:
    # the model container's image left out: KServe takes the ServingRuntime's, which the toolchain rule cannot
    # compare with the builder image (attack 29, finding 1: what a rule reads of the readers changed)
    ref = material.engine("e")
    engine = engine_for(
        material, models_policy("      toolchain: {sameAsRuntimeImage: true}\n"), keys=("build-signer",)
    )

    def isvc(image: str | None) -> dict[str, Any]:
        model = {"modelFormat": {"name": "triton"}, "storageUri": f"oci+native://{ref}"}
        return {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "isvc", "namespace": "prod"},
            "spec": {"predictor": {"model": model if image is None else {**model, "image": image}}},
        }

    old = isvc(RUNTIME)
    assert evaluate(engine, old).allowed
    decision = evaluate(engine, isvc(None), old=old)
    assert ("models", "models.rules.toolchain", Action.DENY) in rules(decision), decision.violations


class UnreachableRegistry:
    """A stand-in evidence source whose registry is down (the real registry client is tested elsewhere)."""

    description = "registry 127.0.0.1:1 (down)"
    concurrent_lookups = True

    async def resolve_digest(self, reference: ImageReference, deadline: Deadline) -> str:
        raise EvidenceUnavailable("127.0.0.1:1 refused the connection", transient=True)

    async def subjects(self, reference: ImageReference, deadline: Deadline) -> ArtifactSubjects:
        raise EvidenceUnavailable("127.0.0.1:1 refused the connection", transient=True)

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        raise EvidenceUnavailable("127.0.0.1:1 refused the connection", transient=True)

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        raise EvidenceUnavailable("127.0.0.1:1 refused the connection", transient=True)


@pytest.mark.parametrize(("on_error", "allowed"), [("Deny", False), ("Warn", True)])
def test_unavailable_evidence_follows_on_error(material: Material, on_error: str, allowed: bool) -> None:
    policy = images_policy(on_error=on_error) + "      signatures: {keys: [platform/image-signer]}\n"
    source: EvidenceSource = UnreachableRegistry()
    engine = PolicyEvaluator(
        load_policy_set([material.policy(policy), material.keys_file("image-signer")]), source
    )
    decision = evaluate(engine, pod())
    assert decision.allowed is allowed
    [violation] = decision.violations
    assert violation.error
    assert violation.rule == "images.runtime.signatures"
    assert "refused the connection" in violation.message


class LyingRegistry(UnreachableRegistry):
    """A stand-in whose registry answers with a digest it cannot back (a typed error nobody foresaw)."""

    async def resolve_digest(self, reference: ImageReference, deadline: Deadline) -> str:
        raise VerificationError("the registry's digest does not match the bytes it sent")


def test_unforeseen_check_error_is_confined_to_its_image_and_follows_on_error(material: Material) -> None:
    policy = images_policy(on_error="Deny").replace("requireDigest: true", "digests: []")
    engine = PolicyEvaluator(load_policy_set([material.policy(policy)]), LyingRegistry())
    decision = evaluate(engine, pod(images=("nvcr.io/nvidia/tensorrt:24.05",)))
    assert not decision.allowed
    [violation] = decision.violations
    assert (violation.rule, violation.error, violation.image) == (
        "images",
        True,
        "nvcr.io/nvidia/tensorrt:24.05",
    )
    assert "does not match the bytes" in violation.message


def test_error_decision_applies_each_policys_on_error(material: Material) -> None:
    engine = engine_for(material, images_policy(on_error="Warn"))
    decision = engine.error_decision(pod(), namespace="prod", message="ran out of time after 4.5 s")
    assert decision.allowed
    assert decision.warnings[0].message == "ran out of time after 4.5 s"
    strict = engine_for(material, images_policy(on_error="Deny"))
    assert not strict.error_decision(pod(), namespace="prod", message="timeout").allowed


def test_error_decision_keeps_a_policy_only_an_unknown_requester_could_exclude(material: Material) -> None:
    """An exclude that needs its requester term too cannot drop a policy when the requester is unknown."""
    strict = images_policy(on_error="Deny").replace(
        "spec:\n", 'spec:\n  exclude: {namespaces: ["prod"], requesters: {usernames: ["break-glass:*"]}}\n', 1
    )
    lenient = images_policy(on_error="Audit").replace("name: images", "name: lenient", 1)
    assert "break-glass" in strict and "name: lenient" in lenient
    engine = engine_for(material, strict, lenient)
    decision = engine.error_decision(pod(), namespace="prod", message="timeout")
    assert not decision.allowed
    assert {v.policy for v in decision.violations} == {"images", "lenient"}


def test_error_decision_without_matching_policy_still_denies(material: Material) -> None:
    engine = engine_for(material, images_policy(on_error="Warn"))
    decision = engine.error_decision({"kind": ["Pod"], "spec": 1}, namespace=None, message="crashed")
    # Not even the object's kind can be read, so every policy's onError applies: here all say Warn.
    assert decision.allowed
    nothing = engine.error_decision(pod(namespace="dev"), namespace="dev", message="crashed")
    assert not nothing.allowed
    assert nothing.violations[0].policy == "trtguard"


def test_required_engine_missing(material: Material) -> None:
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod())
    assert rules(decision) == {("models", "models.required", Action.DENY)}


def test_engine_reference_must_be_pinned(material: Material) -> None:
    decision = evaluate(
        engine_for(material, models_policy(), keys=("build-signer",)),
        pod(engine="registry.example.com/models/x:v1"),
    )
    assert rules(decision) == {("models", "models.reference", Action.DENY)}


def test_verified_evidence_is_cached_across_admissions(material: Material) -> None:
    ref = material.engine("e")
    material.sign_image(RUNTIME)
    policy = models_policy() + (
        "  images:\n"
        "    - {name: runtime, match: ['nvcr.io/*'], signatures: {keys: [platform/image-signer]}}\n"
        "    - {name: engines, match: ['registry.example.com/*']}\n"
    )
    engine = engine_for(material, policy, keys=("build-signer", "image-signer"))
    for _ in range(3):
        assert evaluate(engine, pod(engine=ref)).allowed
    # One verification each of the signature and the manifest, whatever the number of admissions.
    manifests = engine.verified.manifests_cache.stats
    signatures = engine.verified.signatures_cache.stats
    assert (manifests.misses, manifests.hits) == (1, 2)
    assert (signatures.misses, signatures.hits) == (1, 2)


def test_definitive_failures_are_cached_briefly(material: Material) -> None:
    engine = engine_for(material, signature_policy(), keys=("image-signer", "second-signer"))
    for _ in range(2):
        assert not evaluate(engine, pod()).allowed
    stats = engine.verified.signatures_cache.stats
    assert (stats.misses, stats.negative_hits) == (1, 1)


def _many_containers(count: int, namespace: str = "prod") -> dict[str, Any]:
    obj = pod(namespace=namespace)
    obj["spec"]["containers"] = [{"name": f"c{i}", "image": RUNTIME} for i in range(count)]
    return obj


@pytest.mark.parametrize("on_error", ["Deny", "Warn"])
def test_an_evaluation_past_its_cpu_budget_ends_in_on_error(material: Material, on_error: str) -> None:
    # Issue 24, item 9: reading the object is charged to a CPU budget; past it, each policy's onError.
    paths = [material.policy(images_policy(on_error=on_error))]
    engine = PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations), cpu_seconds=0.0)
    decision = evaluate(engine, _many_containers(300))  # a few hundred steps: past a budget of nothing
    [violation] = decision.violations
    assert (violation.policy, violation.rule, violation.error) == ("images", "evaluation", True)
    assert violation.action == Action(on_error)
    assert "more than its CPU budget of 0 s" in violation.message
    assert decision.allowed == (on_error == "Warn")
    generous = PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations))
    assert evaluate(generous, _many_containers(300)).allowed


@pytest.mark.parametrize(
    ("rules_yaml", "pure_work"),
    [
        # a CEL expression that reads the workload: the workload's CEL data is prepared under the budget
        (
            '      expressions:\n        - {cel: "size(workload.spec) > 0", message: reads the workload}\n',
            "policies.rules._expressions.prepare_activation",
        ),
        # GPU fit: each template's node selection is judged under the budget
        ("      gpuCompatibility: {nodes: true, runtime: false}\n", "policies.rules._gpu.misfits"),
    ],
)
def test_a_rule_past_the_cpu_budget_ends_in_on_error(
    material: Material, monkeypatch: pytest.MonkeyPatch, rules_yaml: str, pure_work: str
) -> None:
    # Attack F4: a rule's pure work is charged to the budget that reading the object is; past it, what the
    # rule judged could not be checked (the policy's onError for that engine), never an allow under Deny.
    def exhausted(*_: object) -> NoReturn:
        raise BudgetExceeded("judging this object took more than its CPU budget of 2 s")

    monkeypatch.setattr(pure_work, exhausted)
    policy = models_policy(rules_yaml).replace("  match:", "  onError: Warn\n  match:")
    ref = material.engine("e")
    decision = evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert (violation.policy, violation.error, violation.action) == ("models", True, Action.WARN)
    assert "could not be checked: judging this object took more than its CPU budget" in violation.message


def test_an_evaluation_past_its_deadline_ends_in_on_error(material: Material) -> None:
    engine = engine_for(material, images_policy(on_error="Warn"))
    decision = evaluate(engine, pod(), deadline=Deadline(0.0))
    [violation] = decision.violations
    assert (violation.rule, violation.error, violation.action) == ("evaluation", True, Action.WARN)
    assert "ran out of time" in violation.message


def test_the_error_decision_does_not_read_the_pod_templates_again(material: Material) -> None:
    # What could not be read in time is not read again to choose the policies: its metadata suffices.
    engine = engine_for(material, images_policy(on_error="Warn"))
    too_large = _many_containers(MAX_CONTAINERS + 1)
    assert not evaluate(engine, too_large).allowed  # over the limit: unreadable, a denial
    decision = engine.error_decision(too_large, namespace=None, message="crashed")
    assert [v.policy for v in decision.violations] == ["images"] and decision.allowed


def test_reading_the_object_runs_off_the_event_loop() -> None:
    async def where() -> tuple[str, str]:
        return threading.current_thread().name, await offload(
            UNLIMITED, lambda: threading.current_thread().name
        )

    loop_thread, worker = asyncio.run(where())
    assert worker.startswith("trtguard-evaluation") and worker != loop_thread
