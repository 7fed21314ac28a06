"""policies.rules._verification: the GPU verification attestation of an engine."""

from __future__ import annotations

from tests.policies.conftest import Material, pod
from tests.policies.evaluation import engine_for, evaluate, models_policy


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
