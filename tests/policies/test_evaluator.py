"""policies.evaluator: every rule against real keys and real signed attestations in a local folder."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from policies.evaluator import PolicyEngine
from policies.loader import load_policy_set
from policies.results import Action, Decision
from policies.workload import NotAWorkload
from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material, manifest_data, pod
from verifier.deadline import Deadline
from verifier.digests import sha256_bytes
from verifier.errors import EvidenceUnavailable, InputError, VerificationError
from verifier.evidence import (
    ArtifactAttestations,
    ArtifactSubjects,
    EvidenceSource,
    ImageSignatures,
    LocalEvidence,
)
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE
from verifier.references import ImageReference
from verifier.registry.engine_artifact import engine_artifact_manifest, engine_layer

NOW = datetime(2026, 11, 1, tzinfo=UTC)

IMAGES_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: images}
spec:
  match: {namespaces: ["prod*"]}
  action: ACTION
  onError: ONERROR
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      requireDigest: true
"""


def engine_for(material: Material, *policies: str, keys: Sequence[str] = ()) -> PolicyEngine:
    paths = [material.policy(text, f"policy{i}.yaml") for i, text in enumerate(policies)]
    if keys:
        paths.append(material.keys_file(*keys))
    return PolicyEngine(load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW)


def evaluate(engine: PolicyEngine, obj: dict[str, Any], **kwargs: Any) -> Decision:
    return asyncio.run(engine.evaluate(obj, **kwargs))


def rules(decision: Decision) -> set[tuple[str, str, Action]]:
    return {(v.policy, v.rule, v.action) for v in decision.violations}


def images_policy(action: str = "Deny", on_error: str = "Deny") -> str:
    return IMAGES_POLICY.replace("ACTION", action).replace("ONERROR", on_error)


# --- images ------------------------------------------------------------------------------------------------


def test_pinned_allowed_image_passes(material: Material) -> None:
    decision = evaluate(engine_for(material, images_policy()), pod())
    assert decision.allowed
    assert decision.violations == ()
    assert decision.matched_policies == ("images",)
    assert decision.images[0].digest == RUNTIME.split("@")[1]


def test_unmatched_image_is_a_violation_naming_what_is_allowed(material: Material) -> None:
    decision = evaluate(
        engine_for(material, images_policy()), pod(images=(RUNTIME, "docker.io/library/nginx:1.27"))
    )
    assert not decision.allowed
    [violation] = decision.violations
    assert (violation.rule, violation.image, violation.path) == (
        "images",
        "docker.io/library/nginx:1.27",
        "spec.containers[1].image",
    )
    assert "nvcr.io/nvidia/tensorrt:*" in violation.message


def test_short_name_is_normalised_before_matching(material: Material) -> None:
    decision = evaluate(engine_for(material, images_policy()), pod(images=("nginx",)))
    assert decision.violations[0].image == "docker.io/library/nginx:latest"


@pytest.mark.parametrize(
    "reference",
    [
        "nvcr.io/nvidia/TensorRT:24.05",  # upper case in the repository
        "nvcr.io/nvidia/tеnsorrt:24.05",  # Cyrillic 'е'
        "nvcr.io/nvidia/tensorrt@sha256:abc",  # malformed digest
    ],
)
def test_invalid_reference_is_a_violation_never_a_match(material: Material, reference: str) -> None:
    decision = evaluate(engine_for(material, images_policy()), pod(images=(reference,)))
    assert not decision.allowed
    [violation] = decision.violations
    assert violation.rule == "images"
    assert violation.message.startswith("invalid image reference")


def test_unpinned_image_fails_require_digest(material: Material) -> None:
    decision = evaluate(
        engine_for(material, images_policy()), pod(images=("nvcr.io/nvidia/tensorrt:24.05-py3",))
    )
    [violation] = decision.violations
    assert violation.rule == "images.runtime.requireDigest"
    assert "nvcr.io/nvidia/tensorrt@sha256:<digest>" in violation.fix


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


def test_digest_allow_list(material: Material) -> None:
    policy = images_policy().replace("requireDigest: true", f"digests: ['sha256:{'a1' * 32}']")
    engine = engine_for(material, policy)
    assert evaluate(engine, pod()).allowed
    decision = evaluate(engine, pod(images=(OTHER_RUNTIME,)))
    assert rules(decision) == {("images", "images.runtime.digests", Action.DENY)}


def test_every_matching_rule_applies_and_exclude_carves_exceptions(material: Material) -> None:
    policy = (
        images_policy()
        + """
    - name: everything
      match: ["*"]
      exclude: ["registry.example.com/*"]
      digests: ['sha256:{}']
    - name: internal
      match: ["registry.example.com/*"]
""".format("a1" * 32)
    )
    engine = engine_for(material, policy)
    # RUNTIME matches both `runtime` and `everything`: both apply, both pass.
    assert evaluate(engine, pod()).allowed
    other = evaluate(engine, pod(images=(OTHER_RUNTIME,)))
    assert rules(other) == {("images", "images.everything.digests", Action.DENY)}
    internal = evaluate(engine, pod(images=("registry.example.com/tools/x:1",)))
    assert internal.allowed


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


def test_non_workload_kinds_raise(material: Material) -> None:
    with pytest.raises(NotAWorkload):
        evaluate(
            engine_for(material, images_policy()), {"apiVersion": "v1", "kind": "Service", "metadata": {}}
        )


# --- matching ----------------------------------------------------------------------------------------------


def test_match_and_exclude_by_namespace_kind_and_labels(material: Material) -> None:
    policy = images_policy().replace(
        'match: {namespaces: ["prod*"]}',
        'match: {namespaces: ["prod*"], kinds: [Pod], '
        "labels: {matchExpressions: [{key: tier, operator: In, values: [gpu]}]}}\n"
        "  exclude: {labels: {matchLabels: {experimental: 'true'}}}",
    )
    engine = engine_for(material, policy)
    bad = ("docker.io/library/nginx:1",)
    assert not evaluate(engine, pod(images=bad, labels={"tier": "gpu"})).allowed
    assert evaluate(engine, pod(images=bad, labels={"tier": "cpu"})).matched_policies == ()
    assert evaluate(engine, pod(images=bad, namespace="dev", labels={"tier": "gpu"})).matched_policies == ()
    excluded = evaluate(engine, pod(images=bad, labels={"tier": "gpu", "experimental": "true"}))
    assert excluded.matched_policies == ()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "prod", "labels": {"tier": "gpu"}},
        "spec": {"template": {"spec": pod(images=bad)["spec"]}},
    }
    assert evaluate(engine, deployment).matched_policies == ()


def test_resource_without_namespace_counts_as_default(material: Material) -> None:
    policy = images_policy().replace('namespaces: ["prod*"]', 'namespaces: ["default"]')
    decision = evaluate(engine_for(material, policy), pod(namespace=None, images=("docker.io/library/x:1",)))
    assert decision.matched_policies == ("images",)


# --- updates and errors ------------------------------------------------------------------------------------


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
    engine = PolicyEngine(
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
    engine = PolicyEngine(load_policy_set([material.policy(policy)]), LyingRegistry())
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


def test_error_decision_without_matching_policy_still_denies(material: Material) -> None:
    engine = engine_for(material, images_policy(on_error="Warn"))
    decision = engine.error_decision({"kind": "Pod", "spec": 1}, namespace=None, message="crashed")
    # The object cannot be read, so every policy's onError applies: here all say Warn.
    assert decision.allowed
    nothing = engine.error_decision(pod(namespace="dev"), namespace="dev", message="crashed")
    assert not nothing.allowed
    assert nothing.violations[0].policy == "trtguard"


# --- signatures --------------------------------------------------------------------------------------------


def signature_policy(threshold: int = 1) -> str:
    keys = "[platform/image-signer, platform/second-signer]"
    return images_policy() + f"      signatures: {{keys: {keys}, threshold: {threshold}}}\n"


def test_signature_by_trusted_key_passes_and_rogue_key_fails(material: Material) -> None:
    material.sign_image(RUNTIME)
    material.sign_image(OTHER_RUNTIME, signer="rogue")
    engine = engine_for(material, signature_policy(), keys=("image-signer", "second-signer"))
    assert evaluate(engine, pod()).allowed
    rogue = evaluate(engine, pod(images=(OTHER_RUNTIME,)))
    assert rules(rogue) == {("images", "images.runtime.signatures", Action.DENY)}
    assert "signature present but not made by any trusted key" in rogue.violations[0].message


def test_signature_threshold_counts_distinct_keys(material: Material) -> None:
    material.sign_image(RUNTIME)
    engine = engine_for(material, signature_policy(threshold=2), keys=("image-signer", "second-signer"))
    decision = evaluate(engine, pod())
    assert "1 of 2 required signatures" in decision.violations[0].message
    material.sign_image(RUNTIME, signer="second-signer")
    engine = engine_for(material, signature_policy(threshold=2), keys=("image-signer", "second-signer"))
    assert evaluate(engine, pod()).allowed


def test_missing_signature_says_where_it_looked(material: Material) -> None:
    engine = engine_for(material, signature_policy(), keys=("image-signer", "second-signer"))
    decision = evaluate(engine, pod())
    assert "no signature found" in decision.violations[0].message
    assert "attestation folder" in decision.violations[0].message


def test_image_attestation_rule(material: Material) -> None:
    policy = images_policy() + (
        "      attestations: [{predicateType: 'https://cyclonedx.org/bom', keys: [platform/image-signer]}]\n"
    )
    engine = engine_for(material, policy, keys=("image-signer",))
    decision = evaluate(engine, pod())
    assert rules(decision) == {
        ("images", "images.runtime.attestations[https://cyclonedx.org/bom]", Action.DENY)
    }
    material.statement(
        "a1" * 32, "https://cyclonedx.org/bom", {"bomFormat": "CycloneDX"}, "image-signer", "sbom.json"
    )
    assert evaluate(engine_for(material, policy, keys=("image-signer",)), pod()).allowed


# --- models ------------------------------------------------------------------------------------------------

MODELS_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: models}
spec:
  match: {namespaces: [prod]}
  models:
    required: true
    buildManifest: {keys: [platform/build-signer], maxAge: 90d}
"""


def models_policy(rules_yaml: str = "") -> str:
    return MODELS_POLICY + (f"    rules:\n{rules_yaml}" if rules_yaml else "")


FIELD_SCOPED_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: scoped}
spec:
  match: {namespaces: [prod]}
  images:
    - name: containers
      fields: [container, initContainer, ephemeralContainer]
      match: ["*"]
      signatures: {keys: [platform/image-signer]}
    - name: engines
      fields: [volume]
      match: ["registry.example.com/models/*"]
      requireDigest: true
"""


def test_image_rules_scoped_to_fields(material: Material) -> None:
    ref = material.engine("e")
    material.sign_image(RUNTIME)
    engine = engine_for(material, FIELD_SCOPED_POLICY, keys=("image-signer",))
    assert evaluate(engine, pod(engine=ref)).allowed  # signed runtime, engine volume by digest
    # The engine repository's exception holds for image volumes only: run as a container, the same unsigned
    # digest needs a signature like any other image.
    decision = evaluate(engine, pod(images=(RUNTIME, ref)))
    [violation] = decision.violations
    assert (violation.rule, violation.image) == ("images.containers.signatures", ref)
    # An image volume outside the engine repository matches no volume rule: not allowed, and the message
    # says that rules for it judge other fields only.
    other = "nvcr.io/nvidia/tensorrt@sha256:" + "c3" * 32
    decision = evaluate(engine, pod(engine=other))
    [violation] = [v for v in decision.violations if v.rule == "images"]
    assert violation.message.startswith("volume image is not allowed by any image rule")
    assert "rules for it judge only container, ephemeralContainer, initContainer images" in violation.message


@pytest.mark.parametrize(
    ("fields", "error"),
    [("[]", "at least 1 item"), ("[volume, volume]", "listed once"), ("[sidecar]", "container")],
)
def test_image_rule_fields_are_checked_at_load(material: Material, fields: str, error: str) -> None:
    text = FIELD_SCOPED_POLICY.replace("fields: [volume]", f"fields: {fields}")
    with pytest.raises(InputError, match=error):
        engine_for(material, text, keys=("image-signer",))


def test_engine_with_signed_manifest_passes(material: Material) -> None:
    ref = material.engine("good")
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref))
    assert decision.allowed, decision.violations
    assert decision.engines[0].digest == ref.split("@")[1]


def test_required_engine_missing(material: Material) -> None:
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod())
    assert rules(decision) == {("models", "models.required", Action.DENY)}


def test_engine_reference_must_be_pinned(material: Material) -> None:
    decision = evaluate(
        engine_for(material, models_policy(), keys=("build-signer",)),
        pod(engine="registry.example.com/models/x:v1"),
    )
    assert rules(decision) == {("models", "models.reference", Action.DENY)}


@pytest.mark.parametrize("signer", ["rogue", None])
def test_unsigned_or_missing_manifest_is_denied(material: Material, signer: str | None) -> None:
    ref = (
        material.engine("e", signer=signer) if signer else "registry.example.com/models/e@sha256:" + "9" * 64
    )
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.buildManifest"
    assert ("not signed by" if signer else "no build manifest attestation") in violation.message


def test_stale_manifest_fails_max_age(material: Material) -> None:
    ref = material.engine("old", build_timestamp="2026-01-01T00:00:00Z")
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.buildManifest.maxAge"
    assert "304 days 0 h ago" in violation.message


def test_manifest_dated_in_the_future_fails_max_age(material: Material) -> None:
    # NOW is 2026-11-01T00:00Z; five minutes of clock skew are tolerated, a day is not.
    policy = models_policy()
    skewed = material.engine("skewed", build_timestamp="2026-11-01T00:04:00Z")
    assert evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=skewed)).allowed
    ref = material.engine("future", build_timestamp="2026-11-02T03:00:00Z")
    decision = evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.buildManifest.maxAge"
    assert "dated 1 days 3 h in the future" in violation.message


def test_model_rules(material: Material) -> None:
    rules_yaml = """      precisions: [fp32, fp16, int8]
      int8RequiresCalibration: true
      minAccuracy: {top1_acc: 0.75, mAP: 0.5}
      pluginsAllowed: ["sha256:%s"]
      expressions:
        - name: small-workspace
          cel: "manifest.builder_config.max_workspace_size <= 1073741824"
          message: too big
        - {name: namespaced, cel: "workload.metadata.namespace == 'prod'", message: wrong namespace}
""" % ("ab" * 32)
    plugin = {"name": "AddScalar", "library_sha256": "cd" * 32}
    ref = material.engine(
        "bad",
        builder_config={
            "typing": "weak",
            "precision_flags": ["int8", "fp8"],
            "max_workspace_size": 2 << 30,
            "plugins": [plugin],
        },
    )
    decision = evaluate(
        engine_for(material, models_policy(rules_yaml), keys=("build-signer",)), pod(engine=ref)
    )
    assert {v.rule for v in decision.violations} == {
        "models.rules.precisions",
        "models.rules.int8RequiresCalibration",
        "models.rules.minAccuracy.mAP",
        "models.rules.pluginsAllowed",
        "models.rules.expressions.small-workspace",
    }
    by_rule = {v.rule: v for v in decision.violations}
    assert "fp8" in by_rule["models.rules.precisions"].message
    assert "records no accuracy metric 'mAP'" in by_rule["models.rules.minAccuracy.mAP"].message
    assert by_rule["models.rules.expressions.small-workspace"].message == "too big"


def test_accuracy_below_floor(material: Material) -> None:
    ref = material.engine(
        "weak",
        accuracy=[{"metric": "top1_acc", "value": 0.5, "dataset": {"name": "val", "sha256": "e5" * 32}}],
    )
    decision = evaluate(
        engine_for(material, models_policy("      minAccuracy: {top1_acc: 0.75}\n"), keys=("build-signer",)),
        pod(engine=ref),
    )
    assert decision.violations[0].message == "top1_acc is 0.5, below the required 0.75"


def test_cel_expression_error_is_a_violation_quoting_the_error(material: Material) -> None:
    rules_yaml = (
        '      expressions:\n        - {cel: "manifest.no_such_field == 1", message: needs the field}\n'
    )
    ref = material.engine("e")
    decision = evaluate(
        engine_for(material, models_policy(rules_yaml), keys=("build-signer",)), pod(engine=ref)
    )
    [violation] = decision.violations
    assert violation.rule == "models.rules.expressions.expressions[0]"
    assert violation.message.startswith("needs the field (the expression failed")
    assert not decision.allowed


def test_toolchain_same_as_runtime_and_allowed_list(material: Material) -> None:
    rules_yaml = "      toolchain: {sameAsRuntimeImage: true, allowed: ['nvcr.io/nvidia/tensorrt:*']}\n"
    ref = material.engine("e")
    engine = engine_for(material, models_policy(rules_yaml), keys=("build-signer",))
    assert evaluate(engine, pod(engine=ref)).allowed
    mismatch = evaluate(engine, pod(images=(OTHER_RUNTIME,), engine=ref))
    assert "container 'c0' (spec.containers[0].image) runs nvcr.io/nvidia/tensorrt@sha256:b2" in (
        mismatch.violations[0].message
    )
    unknown = evaluate(engine, pod(images=("nvcr.io/nvidia/tensorrt:24.05",), engine=ref))
    assert unknown.violations[0].error  # cannot be compared offline: onError decides, and it says so
    # One container differs (a violation whatever the other runs), the other cannot be resolved (onError).
    mixed = evaluate(engine, pod(images=(OTHER_RUNTIME, "nvcr.io/nvidia/tensorrt:24.05"), engine=ref))
    differs, unresolved = mixed.violations
    assert not differs.error
    assert "container 'c0'" in differs.message
    assert unresolved.error
    assert "nvcr.io/nvidia/tensorrt:24.05" in unresolved.message
    outsider = material.engine(
        "x",
        toolchain={
            "image": "registry.example.com/trt@sha256:" + "a1" * 32,
            "tensorrt_version": "10.5.0.18",
            "cuda_version": "12.6.3",
        },
    )
    decision = evaluate(
        engine_for(material, models_policy(rules_yaml), keys=("build-signer",)), pod(engine=outsider)
    )
    assert any("not an allowed toolchain" in v.message for v in decision.violations)


LIBRARY = Path(__file__).resolve().parents[2] / "policies" / "library"


@pytest.mark.parametrize(
    "builder_config",
    [
        {"typing": "weak", "precision_flags": ["fp16"], "max_workspace_size": 8 << 30},
        {"typing": "weak", "precision_flags": ["fp16"], "memory_pool_limits": {"workspace": 8 << 30}},
    ],
    ids=["max_workspace_size", "memory_pool_limits.workspace"],
)
def test_library_workspace_rule_reads_the_limit_under_either_name(
    material: Material, builder_config: dict[str, Any]
) -> None:
    # Signed as written (not through the model), as another tool might record it.
    engine = b"engine pool"
    predicate = manifest_data(engine, builder_config=builder_config)
    material.statement(
        sha256_bytes(engine), ENGINE_BUILD_PREDICATE_TYPE, predicate, "build-signer", "pool.manifest.json"
    )
    artifact = engine_artifact_manifest([engine_layer("model.plan", sha256_bytes(engine), len(engine))])
    (material.attestations / "pool.oci.json").write_bytes(artifact)
    ref = f"registry.example.com/models/pool@sha256:{sha256_bytes(artifact)}"
    policy_set = load_policy_set([LIBRARY / "int8-calibration.yaml", material.keys_file("build-signer")])
    engine_ = PolicyEngine(policy_set, LocalEvidence(material.attestations), clock=lambda: NOW)
    decision = evaluate(engine_, pod(namespace="staging", engine=ref))
    assert [v.rule for v in decision.violations] == ["models.rules.expressions.workspace-limit"]


SAME_TOOLCHAIN = "      toolchain: {sameAsRuntimeImage: true}\n"


def test_same_toolchain_needs_every_container_that_mounts_the_engine(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    # One container runs the builder image, the other loads the same engine in another TensorRT image.
    decision = evaluate(engine, pod(images=(RUNTIME, OTHER_RUNTIME), engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.rules.toolchain"
    assert "container 'c1'" in violation.message
    assert not decision.allowed


def _with_init(obj: dict[str, Any], init: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["initContainers"] = [init]
    return obj


def test_same_toolchain_counts_an_init_container_that_mounts_the_engine(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    # The init container runs the builder image, the serving container does not (and mounts the engine).
    obj = pod(images=(OTHER_RUNTIME,), engine=ref)
    init = {"name": "warm", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/m"}]}
    decision = evaluate(engine, _with_init(obj, init))
    assert [v.message for v in decision.violations if "container 'c0'" in v.message]
    assert not decision.allowed


def test_same_toolchain_follows_a_copy_through_a_shared_volume(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    # An init container in the builder image copies the engine into an emptyDir; the serving container
    # never mounts the engine volume but loads the copy in another TensorRT image.
    obj = pod(images=(OTHER_RUNTIME,))
    obj["spec"]["volumes"] = [
        {"name": "engine", "image": {"reference": ref}},
        {"name": "copy", "emptyDir": {}},
    ]
    obj["spec"]["containers"][0]["volumeMounts"] = [{"name": "copy", "mountPath": "/models"}]
    init = {
        "name": "copy-engine",
        "image": RUNTIME,
        "volumeMounts": [{"name": "engine", "mountPath": "/in"}, {"name": "copy", "mountPath": "/out"}],
    }
    decision = evaluate(engine, _with_init(obj, init))
    [violation] = decision.violations
    assert "container 'c0'" in violation.message
    # The same copy into a container that runs the builder image is admitted.
    obj["spec"]["containers"][0]["image"] = RUNTIME
    assert evaluate(engine, obj).allowed


def test_same_toolchain_with_no_container_running_the_engine_is_a_violation(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    obj = pod()
    obj["metadata"]["annotations"] = {"trtguard.dev/engines": json.dumps([{"name": "e", "ref": ref}])}
    obj["spec"]["containers"] = [{"name": "c0", "image": RUNTIME}]
    assert evaluate(engine, obj).allowed  # the annotation's default users: every regular container
    obj["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/tensorrt@sha256:zz"
    [violation] = evaluate(engine, obj).violations
    assert "invalid image reference" in violation.message  # an unparsable image is never skipped


def test_newest_of_several_signed_manifests_is_used(material: Material) -> None:
    ref = material.engine("e", build_timestamp="2026-01-01T00:00:00Z")
    engine = engine_for(material, models_policy(), keys=("build-signer",))
    assert not evaluate(engine, pod(engine=ref)).allowed
    # A newer signed manifest for the same engine file supersedes the stale one.
    (material.attestations / "e.manifest.json").rename(material.attestations / "e.old.json")
    assert material.engine("e") == ref
    assert evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref)).allowed


def test_gpu_verification_rule(material: Material) -> None:
    policy = models_policy() + "    verification: {keys: [platform/gpu-verifier]}\n"
    ref = material.engine("e")
    keys = ("build-signer", "gpu-verifier")
    decision = evaluate(engine_for(material, policy, keys=keys), pod(engine=ref))
    assert decision.violations[0].message == "no GPU verification attestation found"
    material.verification("e", result="fail")
    decision = evaluate(engine_for(material, policy, keys=keys), pod(engine=ref))
    assert "failed checks: output_engine.sha256" in decision.violations[0].message
    material.verification("e")
    assert evaluate(engine_for(material, policy, keys=keys), pod(engine=ref)).allowed


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
