"""models.rules.gpuCompatibility (policies.rules.gpu, policies.scheduling): engines that fit the GPUs a Pod
can land on, and the TensorRT runtime it runs in, with real signed build manifests."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from policies.evaluator import PolicyEngine
from policies.loader import load_policy_set
from policies.results import Action, Decision
from policies.rules.gpu import loads, product_label
from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material, pod
from tests.policies.evaluation import NOW
from verifier.evidence_folder import LocalEvidence

POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: gpu-fit}
spec:
  match: {namespaces: [prod]}
  images:
    - name: builder
      match: ["nvcr.io/nvidia/tensorrt@sha256:a1a1*"]
    - name: other-runtime
      match: ["nvcr.io/nvidia/tensorrt@sha256:b2b2*"]
VERSION
    - name: engines
      fields: [volume]
      match: ["registry.example.com/models/*"]
  models:
    buildManifest: {keys: [platform/build-signer]}
    rules:
      gpuCompatibility: CHECKS
"""
NODES = "models.rules.gpuCompatibility.nodes"
RUNTIME_RULE = "models.rules.gpuCompatibility.runtime"
H200 = {"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"}


def engine(material: Material, *, version: str | None = None, checks: str = "{}") -> PolicyEngine:
    text = POLICY.replace("CHECKS", checks)
    text = text.replace("VERSION\n", f"      tensorrtVersion: '{version}'\n" if version else "")
    paths = [material.policy(text), material.keys_file("build-signer")]
    return PolicyEngine(load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW)


def placed(
    reference: str,
    *,
    selector: dict[str, str] | None = None,
    terms: list[list[dict[str, Any]]] | None = None,
    image: str = RUNTIME,
) -> dict[str, Any]:
    obj = pod(images=(image,), engine=reference)
    if selector is not None:
        obj["spec"]["nodeSelector"] = selector
    if terms is not None:
        obj["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    return obj


def judge(engine: PolicyEngine, obj: dict[str, Any], **kwargs: Any) -> Decision:
    return asyncio.run(engine.evaluate(obj, **kwargs))


def rules(decision: Decision) -> list[tuple[str, Action, bool]]:
    return [(v.rule, v.action, v.error) for v in decision.violations]


def test_an_unconfined_pod_is_told_which_labels_to_add(material: Material) -> None:
    ref = material.engine("e")
    decision = judge(engine(material, checks="{nodes: true, runtime: false}"), placed(ref))
    [violation] = decision.violations
    assert (violation.rule, violation.action) == (NODES, Action.DENY)
    assert "not of compute capability 9.0" in violation.message
    assert "built on NVIDIA H200 (compute capability 9.0)" in violation.message
    assert 'nvidia.com/gpu.compute.major: "9" and nvidia.com/gpu.compute.minor: "0"' in violation.fix
    assert 'nvidia.com/gpu.product: "NVIDIA-H200"' in violation.fix


def test_node_selector_on_gpu_feature_discovery_labels(material: Material) -> None:
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    assert judge(fit, placed(ref, selector=H200)).allowed
    assert judge(fit, placed(ref, selector={"nvidia.com/gpu.product": "NVIDIA-H200"})).allowed
    elsewhere = judge(fit, placed(ref, selector={**H200, "nvidia.com/gpu.compute.major": "8"}))
    assert "compute capability 8.0, where the engine does not load" in elsewhere.violations[0].message
    # the major alone leaves 9.x GPUs of another minor version open
    assert not judge(fit, placed(ref, selector={"nvidia.com/gpu.compute.major": "9"})).allowed


def test_every_required_affinity_term_must_confine(material: Material) -> None:
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    h200 = [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H200"]}]
    any_gpu = [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]
    assert judge(fit, placed(ref, terms=[h200])).allowed
    [violation] = judge(fit, placed(ref, terms=[h200, any_gpu])).violations
    assert "nodeSelectorTerms[1]" in violation.message
    # the nodeSelector holds in every term
    assert judge(fit, placed(ref, selector=H200, terms=[any_gpu])).allowed
    ranges = [
        {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["8"]},
        {"key": "nvidia.com/gpu.compute.major", "operator": "Lt", "values": ["10"]},
        {"key": "nvidia.com/gpu.compute.minor", "operator": "In", "values": ["0"]},
    ]
    assert judge(fit, placed(ref, terms=[ranges])).allowed
    absent = [{"key": "nvidia.com/gpu.compute.major", "operator": "DoesNotExist"}]
    assert not judge(fit, placed(ref, selector={"nvidia.com/gpu.compute.minor": "0"}, terms=[absent])).allowed


def test_an_ampere_plus_engine_needs_ampere_or_newer(material: Material) -> None:
    ref = material.engine(
        "e", builder_config={"typing": "weak", "hardware_compatibility_level": "ampere_plus"}
    )
    fit = engine(material, checks="{nodes: true, runtime: false}")
    newer = [{"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["7"]}]
    assert judge(fit, placed(ref, terms=[newer])).allowed
    assert judge(fit, placed(ref, selector={"nvidia.com/gpu.compute.major": "8"})).allowed
    older = [{"key": "nvidia.com/gpu.compute.major", "operator": "In", "values": ["7", "8"]}]
    [violation] = judge(fit, placed(ref, terms=[older])).violations
    assert "older than Ampere" in violation.message and "Gt" in violation.fix
    zeros = [{"key": "nvidia.com/gpu.compute.major", "operator": "Lt", "values": ["0000000000000000010"]}]
    [violation] = judge(fit, placed(ref, terms=[zeros])).violations  # Lt 10 to the scheduler
    assert "older than Ampere" in violation.message


def test_bounds_with_leading_zeros_confine_as_the_scheduler_reads_them(material: Material) -> None:
    # 19 characters: read as 10 and 1 by the scheduler (strconv.ParseInt), which places the Pod on 7.0, 8.0
    # and 9.0 GPUs; read as "no node matches", they would have admitted it
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    zeros = [
        {"key": "nvidia.com/gpu.compute.major", "operator": "Lt", "values": ["0000000000000000010"]},
        {"key": "nvidia.com/gpu.compute.minor", "operator": "Lt", "values": ["00000000000000000001"]},
    ]
    [violation] = judge(fit, placed(ref, terms=[zeros])).violations
    assert "compute capability 0.0, 1.0, 2.0" in violation.message and "8.0, 9.0" in violation.message
    # a bound the scheduler refuses (no label value: a sign) matches no node, so the term places nothing
    signed = [{"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["+7"]}]
    assert judge(fit, placed(ref, terms=[signed])).allowed


def test_malformed_node_selection_is_a_violation(material: Material) -> None:
    obj = placed(material.engine("e"))
    fit = engine(material, checks="{nodes: true, runtime: false}")
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.compute.major": 9}
    [violation] = judge(fit, obj).violations
    assert "nodeSelector is not a map of label names to values" in violation.message


def test_dropping_the_node_selector_on_update_is_judged(material: Material) -> None:
    old = placed(material.engine("e"), selector=H200)
    fit = engine(material, checks="{nodes: true, runtime: false}")
    new = copy.deepcopy(old)
    del new["spec"]["nodeSelector"]
    assert [r for r, _, _ in rules(judge(fit, new, old=old))] == [NODES]


def test_the_builder_image_brings_its_own_version(material: Material) -> None:
    obj = placed(material.engine("e"))
    assert judge(engine(material, checks="{nodes: false}"), obj).allowed


def test_another_runtime_without_a_known_version_cannot_be_checked(material: Material) -> None:
    obj = placed(material.engine("e"), image=OTHER_RUNTIME)
    decision = judge(engine(material, checks="{nodes: false}"), obj)
    [violation] = decision.violations
    assert (violation.rule, violation.error) == (RUNTIME_RULE, True)
    assert "no image rule that selects it gives a tensorrtVersion" in violation.message


@pytest.mark.parametrize(
    ("runtime", "builder_config", "allowed"),
    [
        ("10.5.0.18", {}, True),
        ("10.6.0.26", {}, False),  # not version-compatible: the same release only
        ("10.6.0.26", {"version_compatible": True}, True),
        ("11.4.0.106", {"version_compatible": True}, True),  # 10 → 11
        ("10.4.0.26", {"version_compatible": True}, False),  # older
        ("10.6.0.26", {"version_compatible": True, "exclude_lean_runtime": True}, False),
    ],
)
def test_the_runtime_image_version_must_load_the_engine(
    material: Material, runtime: str, builder_config: dict[str, Any], allowed: bool
) -> None:
    config = {"typing": "weak", "precision_flags": ["fp16"], **builder_config}
    ref = material.engine("e", builder_config=config)
    decision = judge(
        engine(material, version=runtime, checks="{nodes: false}"), placed(ref, image=OTHER_RUNTIME)
    )
    assert decision.allowed == allowed, decision.violations
    if not allowed:
        assert f"runs TensorRT {runtime}, which cannot load the engine built with TensorRT 10.5.0.18" in (
            decision.violations[0].message
        )


def test_version_compatibility_across_majors() -> None:
    assert loads("8.6.1.6", "10.5.0.18", version_compatible=True, exclude_lean_runtime=False) is None
    reason = loads("8.6.1.6", "11.4.0.106", version_compatible=True, exclude_lean_runtime=False)
    assert reason == "a version-compatible TensorRT 8 engine does not load in TensorRT 11"
    assert loads("10.5.0", "10.5.0.18", version_compatible=False, exclude_lean_runtime=False) is None
    assert loads("10.5.0.18", "10.5.0.19", version_compatible=False, exclude_lean_runtime=False) is not None


def test_product_labels_are_written_as_gpu_feature_discovery_writes_them() -> None:
    assert product_label("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"


def _lws(reference: str, leader: dict[str, str] | None, worker: dict[str, str] | None) -> dict[str, Any]:
    def template(selector: dict[str, str] | None) -> dict[str, Any]:
        spec = placed(reference, selector=selector)["spec"]
        return {"spec": spec}

    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "prod"},
        "spec": {
            "leaderWorkerTemplate": {"leaderTemplate": template(leader), "workerTemplate": template(worker)}
        },
    }


def test_every_template_that_runs_the_engine_is_judged_on_its_own(material: Material) -> None:
    # Issue 24: GPU fit judged the first pod template only; LWS workers ran the engine on any GPU.
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    assert judge(fit, _lws(ref, H200, H200)).allowed
    [violation] = judge(fit, _lws(ref, H200, None)).violations
    assert violation.rule == NODES
    assert violation.message.startswith("worker (spec.leaderWorkerTemplate.workerTemplate): the Pod may")
    assert "spec.leaderWorkerTemplate.workerTemplate.spec.nodeSelector" in violation.message
    assert violation.fix.startswith("add to worker (spec.leaderWorkerTemplate.workerTemplate) nodeSelector")
    assert violation.path == "spec.leaderWorkerTemplate.workerTemplate.spec.volumes[0].image.reference"


def test_a_volcano_job_confined_in_every_task_fits(material: Material) -> None:
    # Issue 24: the walk to the first pod spec could not follow spec.tasks[0], so this was denied.
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: true}")
    task = {"name": "infer", "template": {"spec": placed(ref, selector=H200)["spec"]}}
    job: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "prod"},
        "spec": {"tasks": [task, {**copy.deepcopy(task), "name": "warm"}]},
    }
    assert judge(fit, job).allowed
    del job["spec"]["tasks"][1]["template"]["spec"]["nodeSelector"]
    [violation] = judge(fit, job).violations
    assert violation.message.startswith("task warm (spec.tasks[1].template)")


def test_an_update_that_moves_any_templates_placement_is_judged_again(material: Material) -> None:
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    old = _lws(ref, H200, H200)
    new = _lws(ref, H200, {"nvidia.com/gpu.present": "true"})  # only the second template moves
    assert [r for r, _, _ in rules(judge(fit, new, old=old))] == [NODES]
    assert judge(fit, copy.deepcopy(old), old=old).allowed
