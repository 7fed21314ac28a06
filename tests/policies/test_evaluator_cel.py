"""policies/evaluator.py, its CEL block: an expression stopped by a time or memory bound is a violation with
the policy's ``onError``, within the request's deadline; one that runs is judged as written."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from policies.evaluator import PolicyEngine
from policies.loader import load_policy_set
from policies.results import Action, Decision
from tests.policies.cel.test_cost import costly_expression
from tests.policies.cel.test_sandbox import SLOW
from tests.policies.conftest import Material, pod
from verifier.deadline import Deadline
from verifier.evidence import LocalEvidence

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


def engine_for(material: Material, expression: str, on_error: str = "Deny") -> PolicyEngine:
    text = POLICY.replace("ONERROR", on_error).replace("EXPRESSION", expression)
    paths = [material.policy(text), material.keys_file("build-signer")]
    return PolicyEngine(load_policy_set(paths), LocalEvidence(material.attestations))


def annotated_pod(material: Material, **annotations: str) -> dict[str, Any]:
    """A Pod running the engine ``e`` (make it before the policy engine, which reads the folder once)."""
    obj = pod(engine=material.engine("e"))
    obj["metadata"]["annotations"] = annotations
    return obj


def evaluate(engine: PolicyEngine, obj: dict[str, Any], seconds: float) -> tuple[Decision, float]:
    start = time.monotonic()
    decision = asyncio.run(engine.evaluate(obj, deadline=Deadline.after(seconds)))
    return decision, time.monotonic() - start


@pytest.mark.parametrize("kib", [16, 64])
def test_the_issues_expression_on_a_large_annotation_is_a_denial_by_on_error(
    material: Material, kib: int
) -> None:
    obj = annotated_pod(material, note="x" * (kib * 1024))
    decision, elapsed = evaluate(engine_for(material, costly_expression()), obj, seconds=8)
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
    decision, _ = evaluate(engine_for(material, costly_expression()), obj, seconds=8)
    assert decision.allowed and decision.violations == ()


def test_an_expression_still_running_at_the_deadline_is_stopped_then(material: Material) -> None:
    obj = annotated_pod(material)
    engine = engine_for(
        material, SLOW.replace("workload.l", "workload.spec.containers[0].args"), on_error="Warn"
    )
    assert evaluate(engine, obj, seconds=8)[0].allowed  # no args yet; and the evidence is now cached
    obj["spec"]["containers"][0]["args"] = ["é" * 65_530 + f"{i:02}" for i in range(60)]
    decision, elapsed = evaluate(engine, obj, seconds=0.5)
    assert elapsed < 1.5
    [violation] = decision.violations
    assert violation.error and violation.action is Action.WARN  # onError: Warn
    assert "did not finish within" in violation.message and "and was stopped" in violation.message
    assert decision.allowed
