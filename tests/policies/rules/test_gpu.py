"""models.rules.gpuCompatibility (policies.rules._gpu, policies.workload_model._scheduling): engines that fit
the GPUs a Pod
can land on, and the TensorRT runtime it runs in, with real signed build manifests."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.results import Action, Decision
from policies.rules._gpu import (
    GpuFit,
    loads,
    misfits,
    product_label,
)
from policies.workload_model._extraction import Workload, extract
from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material, manifest_data, pod
from tests.policies.evaluation import NOW
from tests.policies.workload_model.test_discovery import CountingBudget
from verifier.evidence_folder import LocalEvidence
from verifier.manifest import EngineBuildManifest

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


def engine(material: Material, *, version: str | None = None, checks: str = "{}") -> PolicyEvaluator:
    text = POLICY.replace("CHECKS", checks)
    text = text.replace("VERSION\n", f"      tensorrtVersion: '{version}'\n" if version else "")
    paths = [material.policy(text), material.keys_file("build-signer")]
    return PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW)


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


def judge(engine: PolicyEvaluator, obj: dict[str, Any], **kwargs: Any) -> Decision:
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
    # Re-attack F6: a product label of an Ampere-or-newer GPU confines too, the build GPU's own among them.
    product = "nvidia.com/gpu.product"
    assert judge(fit, placed(ref, selector={product: "NVIDIA-H200"})).allowed
    assert judge(
        fit,
        placed(
            ref,
            terms=[[{"key": product, "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"]}]],
        ),
    ).allowed
    [violation] = judge(fit, placed(ref, selector={product: "Tesla-T4"})).violations
    assert "older than Ampere" in violation.message
    mixed = [{"key": product, "operator": "In", "values": ["NVIDIA-H200", "Tesla-V100-SXM2-16GB"]}]
    assert not judge(fit, placed(ref, terms=[mixed])).allowed


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


MAJOR, MINOR, PRODUCT = (
    "nvidia.com/gpu.compute.major",
    "nvidia.com/gpu.compute.minor",
    "nvidia.com/gpu.product",
)


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def test_a_term_whose_bounds_contradict_places_nothing(material: Material) -> None:
    # Attack F6: Gt 10 and Lt 5 on one label match no node, so that term never schedules the Pod; it was
    # denied as "may be scheduled on nodes whose GPU is not of compute capability 9.0".
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    never = [expression(MAJOR, "Gt", "10"), expression(MAJOR, "Lt", "5")]
    h200 = [expression(PRODUCT, "In", "NVIDIA-H200")]
    assert judge(fit, placed(ref, terms=[never, h200])).allowed
    # Gt 5 and Lt 10 together: 6 to 9, each a GPU the engine does not load on but 9
    between = [expression(MAJOR, "Gt", "5"), expression(MAJOR, "Lt", "10"), expression(MINOR, "In", "0")]
    [violation] = judge(fit, placed(ref, terms=[between])).violations
    assert "compute capability 6.0, 7.0, 8.0, 9.0, where" in violation.message
    # In and DoesNotExist on one label: no node has the label and lacks it
    absent = [expression(MAJOR, "In", "8"), expression(MAJOR, "DoesNotExist")]
    assert judge(fit, placed(ref, terms=[absent, h200])).allowed


@pytest.mark.parametrize(
    ("bounds", "allowed", "says"),
    [
        # no label value is above int64's largest: the term matches no node
        ([expression(MAJOR, "Gt", "9223372036854775807")], True, None),
        # only the largest is
        ([expression(MAJOR, "Gt", "9223372036854775806"), expression(MINOR, "In", "0")], False,
         "compute capability 9223372036854775807.0,"),
        # ParseInt refuses one past it, and a label value has no sign: the scheduler refuses the term
        ([expression(MAJOR, "Lt", "9223372036854775808")], True, None),
        ([expression(MAJOR, "Gt", "-9223372036854775808")], True, None),
        ([expression(MAJOR, "Gt", "+8")], True, None),
        ([expression(MAJOR, "Gt", " 8")], True, None),
        ([expression(MAJOR, "Lt", "0")], True, None),  # no label value is below 0
        # leading zeros are read: 9 alone
        ([expression(MAJOR, "Gt", "0008"), expression(MAJOR, "Lt", "0" * 40 + "10"),
          expression(MINOR, "In", "0")], True, None),
        # unbounded above: every major from 8 on
        ([expression(MAJOR, "Gt", "7"), expression(MINOR, "In", "0")], False, "major 8 or more, minor 0"),
        ([expression(MAJOR, "Lt", "9223372036854775807"), expression(MAJOR, "Gt", "9223372036854775805"),
          expression(MINOR, "In", "0")], False, "compute capability 9223372036854775806.0, where"),
    ],
)  # fmt: skip
def test_bounds_at_the_int64_edges_are_read_as_the_scheduler_reads_them(
    material: Material, bounds: list[dict[str, Any]], allowed: bool, says: str | None
) -> None:
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    decision = judge(fit, placed(ref, terms=[bounds]))
    assert decision.allowed is allowed
    if says is not None:
        assert says in decision.violations[0].message


def test_an_in_value_that_is_no_integer_is_a_gpu_of_unknown_capability(material: Material) -> None:
    # A node labelled major "x" matches In ["9", "x"]: nothing says its GPU is a 9.0 one (it was admitted).
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    terms = [[expression(MAJOR, "In", "9", "x"), expression(MINOR, "In", "0")]]
    [violation] = judge(fit, placed(ref, terms=terms)).violations
    assert "nodes whose GPU is not of compute capability 9.0" in violation.message


def test_a_node_selector_value_that_is_no_label_value_is_a_violation(material: Material) -> None:
    # It was read as "no node matches" and admitted; the API server refuses such a Pod, but not an
    # operator's template, and apimachinery's SelectorFromSet once read an invalid set as "every node".
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    [violation] = judge(fit, placed(ref, selector={PRODUCT: "NVIDIA H200"})).violations
    assert (violation.rule, violation.action) == (NODES, Action.DENY)
    assert (
        "spec.nodeSelector[nvidia.com/gpu.product] is not a label value: 'NVIDIA H200'" in violation.message
    )


@pytest.mark.parametrize("operator", [["In"], {"In": 1}, 7, None])
def test_a_requirement_of_the_wrong_type_is_a_violation_naming_it(material: Material, operator: Any) -> None:
    # Attack F5: an operator holding a list crashed the rule (TypeError: unhashable type: 'list').
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    obj = placed(ref, terms=[[{"key": PRODUCT, "operator": operator, "values": ["NVIDIA-H200"]}]])
    [violation] = judge(fit, obj).violations
    assert violation.rule == NODES
    assert "nodeSelectorTerms[0].matchExpressions[0] is not a node selector requirement" in violation.message


def _wide(count: int) -> list[list[dict[str, Any]]]:
    """Terms admitting every compute capability up to 998.998, past the product label's NotIn."""
    return [
        [
            expression(PRODUCT, "NotIn", *(f"GPU-{t}-{i}" for i in range(5))),
            expression(MAJOR, "Gt", "0"),
            expression(MAJOR, "Lt", "999"),
            expression(MINOR, "Gt", "0"),
            expression(MINOR, "Lt", "999"),
        ]
        for t in range(count)
    ]


def test_many_terms_over_wide_ranges_make_one_short_violation(material: Material) -> None:
    # Attack F4: 20 such terms (6 KB) took 26.7 s and wrote 175 MB of messages: each term listed all
    # 998 x 998 capabilities it admits, one by one. Now one violation names the first term, counts the rest.
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    [violation] = judge(fit, placed(ref, terms=_wide(20))).violations
    assert "compute capability major 1 to 998, minor 1 to 998, where" in violation.message
    assert "nodeSelectorTerms[0]" in violation.message
    assert (
        "so do 19 more of its terms (" in violation.message and "nodeSelectorTerms[3], …" in violation.message
    )
    assert len(violation.message) < 1000


def test_each_template_is_judged_once_however_many_engines_and_policies_reach_it(
    material: Material, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Attack F4: a Volcano Job of 100 tasks x 100 containers x 50 expressions took 57.7 s and 2.7 GB: the
    # placement was judged again for every engine (each container may mount its own) and every policy.
    ref = material.engine("e")
    text = POLICY.replace("CHECKS", "{nodes: true, runtime: false}").replace("VERSION\n", "")
    paths = [material.policy(text), material.policy(text.replace("gpu-fit", "again"), "again.yaml")]
    fit = PolicyEvaluator(
        load_policy_set([*paths, material.keys_file("build-signer")]),
        LocalEvidence(material.attestations),
        clock=lambda: NOW,
    )
    calls: list[str] = []

    def counted(template: Any, *args: Any) -> Any:
        calls.append(template.path)
        return misfits(template, *args)

    monkeypatch.setattr("policies.rules._gpu.misfits", counted)

    def task(index: int) -> dict[str, Any]:
        spec = placed(ref, terms=_wide(3))["spec"]
        spec["containers"] = [
            {"name": f"c{i}", "image": RUNTIME, "volumeMounts": [{"name": f"e{i}", "mountPath": f"/e{i}"}]}
            for i in range(4)
        ]
        spec["volumes"] = [{"name": f"e{i}", "image": {"reference": ref}} for i in range(4)]
        return {"name": f"t{index}", "template": {"spec": spec}}

    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "prod"},
        "spec": {"tasks": [task(i) for i in range(3)]},
    }
    decision = judge(fit, job)
    assert sorted(calls) == [f"spec.tasks[{i}].template" for i in range(3)]  # not 3 x 4 engines x 2 policies
    # Each task, for each policy: its four volumes are one engine (by digest), so the finding is said once.
    assert len(decision.violations) == 3 * 2
    assert all(len(v.message) < 1000 for v in decision.violations)


def test_judging_a_templates_terms_is_charged_to_the_budget(material: Material) -> None:
    ref = material.engine("e")
    plain, reading = CountingBudget(), CountingBudget()
    extract(placed(ref), budget=plain)
    found = extract(placed(ref, terms=_wide(300)), budget=reading)
    assert isinstance(found, Workload)
    [template] = found.templates
    # each term, and each requirement with its values, was a step of reading the object: 1 + 6 + 4 x 2
    assert reading.steps - plain.steps == 300 * 15
    judging = CountingBudget()
    manifest = EngineBuildManifest.model_validate(manifest_data())
    assert len(misfits(template, GpuFit.of(manifest), judging.step)) == 1
    assert judging.steps == 300


def test_a_node_selection_with_many_malformed_parts_is_one_violation(material: Material) -> None:
    # each malformed requirement was a violation of its own, for every engine that reaches the template
    ref = material.engine("e")
    fit = engine(material, checks="{nodes: true, runtime: false}")
    broken = [{"key": PRODUCT, "operator": "In", "values": [i]} for i in range(50)]
    [violation] = judge(fit, placed(ref, terms=[broken])).violations
    assert "nodeSelectorTerms[0].matchExpressions[2] is not a node selector requirement; and 47 more" in (
        violation.message
    )


def _shared(reference: str, readers: int) -> dict[str, Any]:
    """A Pod whose server mounts the engine and a scratch emptyDir that ``readers`` containers of another
    runtime mount too (so each can read the engine)."""
    obj = placed(reference, selector=H200)
    obj["spec"]["containers"][0]["volumeMounts"].append({"name": "scratch", "mountPath": "/s"})
    obj["spec"]["containers"] += [
        {"name": f"r{i}", "image": OTHER_RUNTIME, "volumeMounts": [{"name": "scratch", "mountPath": "/s"}]}
        for i in range(readers)
    ]
    obj["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
    return obj


def test_containers_of_one_image_are_judged_and_named_once(material: Material) -> None:
    # Each reader of an engine was its own violation: 400 containers sharing a volume with 100 engines'
    # reader made 39,900 (1.1 s, 14 MB of messages); one image is judged, and said, once per engine.
    ref = material.engine("e")
    decision = judge(engine(material, checks="{nodes: false}"), _shared(ref, 40))
    [violation] = decision.violations
    assert (violation.rule, violation.error) == (RUNTIME_RULE, True)
    assert violation.message.startswith(
        "the TensorRT version of container 'r0' (spec.containers[1].image) (and 39 more containers of that "
        f"image) {OTHER_RUNTIME} is unknown"
    )


def many_volumes(reference: str, volumes: int, images: int) -> dict[str, Any]:
    """A Pod whose server mounts ``volumes`` image volumes of one engine and an emptyDir it shares with
    ``images`` containers, each of an image of its own (every one of them can read the engine)."""
    obj = pod(images=(RUNTIME, *(f"registry.example.com/x@sha256:{i:064x}" for i in range(images))))
    obj["spec"]["volumes"] = [{"name": f"e{i}", "image": {"reference": reference}} for i in range(volumes)]
    obj["spec"]["volumes"].append({"name": "share", "emptyDir": {}})
    server, *others = obj["spec"]["containers"]
    server["volumeMounts"] = [{"name": f"e{i}", "mountPath": f"/m/{i}"} for i in range(volumes)]
    for container in (server, *others):
        container.setdefault("volumeMounts", []).append({"name": "share", "mountPath": "/s"})
    return obj


def test_findings_about_one_engine_are_said_once_however_many_volumes_mount_it(material: Material) -> None:
    # Re-attack F1: each of 100 volumes of one engine repeated every finding about every image that can read
    # it (99,800 violations from a 112 KB Pod). They are one engine: each (rule, image) is said once.
    ref = material.engine("e")
    decision = judge(engine(material, checks="{nodes: true, runtime: true}"), many_volumes(ref, 10, 5))
    runtime = [v for v in decision.violations if v.rule == RUNTIME_RULE]
    assert len(runtime) == 5
    assert {v.message.split(" (")[0] for v in runtime} == {
        f"the TensorRT version of container 'c{i}'" for i in range(1, 6)
    }
    assert [v.rule for v in decision.violations if v.rule == NODES] == [NODES]  # unconfined: said once
