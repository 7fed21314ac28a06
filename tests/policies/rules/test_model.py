"""policies.rules._model: precisions, INT8 calibration, accuracy floors and plugins."""

from __future__ import annotations

from tests.policies.conftest import Material, pod
from tests.policies.evaluation import engine_for, evaluate, models_policy


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
