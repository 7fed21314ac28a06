"""policies.rules._expressions: CEL expressions over the manifest and the workload.

An expression that fails is a violation quoting the error; one stopped by a time or memory bound is a
violation with the policy's ``onError``, within the request's deadline; one that runs is judged as written.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.results import Action, Decision
from tests.policies.cel.test_cost import costly_expression
from tests.policies.cel.test_sandbox import SLOW
from tests.policies.conftest import Material, manifest_data, pod
from tests.policies.evaluation import NOW, engine_for, evaluate, models_policy
from verifier.base._deadline import Deadline
from verifier.base._digests import sha256_bytes
from verifier.evidence_folder import LocalEvidence
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE
from verifier.registry.engine_artifact import engine_artifact_manifest, engine_layer

POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: costly}
spec:
  match: {namespaces: [prod]}
  action: Warn
  onError: ONERROR
  models:
    buildManifest: {keys: [platform/build-signer]}
    rules:
      expressions:
        - name: costly
          cel: 'EXPRESSION'
          message: the note is read twice
"""


def costly_engine(material: Material, expression: str, on_error: str = "Deny") -> PolicyEvaluator:
    text = POLICY.replace("ONERROR", on_error).replace("EXPRESSION", expression)
    paths = [material.policy(text), material.keys_file("build-signer")]
    return PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations))


def annotated_pod(material: Material, **annotations: str) -> dict[str, Any]:
    """A Pod running the engine ``e`` (make it before the policy engine, which reads the folder once)."""
    obj = pod(engine=material.engine("e"))
    obj["metadata"]["annotations"] = annotations
    return obj


def evaluate_within(engine: PolicyEvaluator, obj: dict[str, Any], seconds: float) -> tuple[Decision, float]:
    start = time.monotonic()
    decision = asyncio.run(engine.evaluate(obj, deadline=Deadline.after(seconds)))
    return decision, time.monotonic() - start


@pytest.mark.parametrize("kib", [16, 64])
def test_the_issues_expression_on_a_large_annotation_is_a_denial_by_on_error(
    material: Material, kib: int
) -> None:
    obj = annotated_pod(material, note="x" * (kib * 1024))
    decision, elapsed = evaluate_within(costly_engine(material, costly_expression()), obj, seconds=8)
    assert elapsed < 8
    [violation] = decision.violations
    assert violation.rule == "models.rules.expressions.costly"
    assert violation.error and violation.action is Action.DENY  # onError, although the policy only warns
    assert violation.message.startswith(
        "the note is read twice (the expression could not be evaluated: the expression ran out of memory"
    )
    assert "onError" in violation.fix
    assert not decision.allowed


def test_the_same_expression_on_a_small_annotation_is_judged_as_written(material: Material) -> None:
    obj = annotated_pod(material, note="short")
    decision, _ = evaluate_within(costly_engine(material, costly_expression()), obj, seconds=8)
    assert decision.allowed and decision.violations == ()


def test_an_expression_still_running_at_the_deadline_is_stopped_then(material: Material) -> None:
    obj = annotated_pod(material)
    engine = costly_engine(
        material, SLOW.replace("workload.l", "workload.spec.containers[0].args"), on_error="Warn"
    )
    assert evaluate_within(engine, obj, seconds=8)[0].allowed  # no args yet; and the evidence is now cached
    obj["spec"]["containers"][0]["args"] = ["é" * 65_530 + f"{i:02}" for i in range(60)]
    decision, elapsed = evaluate_within(engine, obj, seconds=0.5)
    assert elapsed < 1.5
    [violation] = decision.violations
    assert violation.error and violation.action is Action.WARN  # onError: Warn
    assert "did not finish within" in violation.message and "and was stopped" in violation.message
    assert decision.allowed


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


LIBRARY = Path(__file__).resolve().parents[3] / "policies" / "library"


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
    engine_ = PolicyEvaluator(policy_set, LocalEvidence(material.attestations), clock=lambda: NOW)
    decision = evaluate(engine_, pod(namespace="staging", engine=ref))
    assert [v.rule for v in decision.violations] == ["models.rules.expressions.workspace-limit"]


def test_expressions_over_one_manifest_see_each_engines_own_name_and_reference(material: Material) -> None:
    # The data of expressions that do not read the workload is prepared once per manifest and engine:
    # a second engine volume of the same manifest must still be judged with its own name and reference.
    reference = material.engine("e")
    engine = costly_engine(material, 'engine.name == "engine" && engine.reference.endsWith(engine.digest)')

    def named(volume: str) -> dict[str, Any]:
        obj = pod(engine=reference)
        obj["spec"]["volumes"][0]["name"] = volume
        for container in obj["spec"]["containers"]:
            container["volumeMounts"][0]["name"] = volume
        return obj

    for volume, holds in (("engine", True), ("other", False), ("engine", True), ("other", False)):
        decision = evaluate(engine, named(volume))
        found = [v.rule for v in decision.violations]
        assert found == ([] if holds else ["models.rules.expressions.costly"]), (volume, found)


def test_expressions_see_the_containers_and_templates_that_run_the_engine(material: Material) -> None:
    # The engine variable carries where the engine runs, from the workload model: every container that can
    # read it and every template it reaches, so a rule need not pick one template of the object.
    reference = material.engine("e")
    rule = (
        'engine.containers.all(c, c.image.startsWith("nvcr.io/nvidia/tensorrt@")) && '
        'engine.templates.all(t, has(t.nodeSelector) && t.role == "worker")'
    )
    engine = costly_engine(material, rule)
    spec = pod(engine=reference)["spec"]
    lws: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l", "namespace": "prod"},
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": {
                    "spec": {"containers": [{"name": "leader", "image": "docker.io/library/busybox:1"}]}
                },
                "workerTemplate": {"spec": {**spec, "nodeSelector": {"gpu": "h200"}}},
            }
        },
    }
    assert evaluate(engine, lws).allowed  # the leader runs another image, but not the engine
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "r/other:1"
    assert [v.rule for v in evaluate(engine, lws).violations] == ["models.rules.expressions.costly"]


@pytest.mark.parametrize(
    ("source", "reads"),
    [
        ('engine.name == "x"', False),
        ("engine.reference.endsWith(engine.digest)", False),
        ("manifest.output_engine.size > 0", False),
        ("size(engine.containers) == 1", True),
        ('engine["templates"].size() > 0', True),
        ("has(engine.templates)", True),
        ('workload.metadata.name == "x"', True),
    ],
)
def test_what_reads_the_workload(material: Material, source: str, reads: bool) -> None:
    text = POLICY.replace("ONERROR", "Deny").replace("EXPRESSION", source)
    [policy] = load_policy_set([material.policy(text), material.keys_file("build-signer")]).policies
    assert policy.expressions_read_workload is reads


def test_expressions_read_the_evaluation_clock(material: Material) -> None:
    # `now` is the engine's clock (`check --now`, `policy test --now`): a build at most 60 days old, in CEL
    rule = (
        "      expressions:\n"
        "        - name: recent\n"
        "          cel: \"timestamp(now) - timestamp(manifest.build_timestamp) < duration('1440h')\"\n"
        "          message: the engine was built more than 60 days ago\n"
    )
    ref = material.engine("good", build_timestamp="2026-10-01T12:00:00Z")  # NOW is 2026-11-01
    engine = engine_for(material, models_policy(rule), keys=("build-signer",))
    assert evaluate(engine, pod(engine=ref)).allowed
    old = material.engine("old", build_timestamp="2026-08-20T12:00:00Z")  # 72 days: within maxAge 90d
    decision = evaluate(engine_for(material, models_policy(rule), keys=("build-signer",)), pod(engine=old))
    assert [v.rule for v in decision.violations] == ["models.rules.expressions.recent"]
