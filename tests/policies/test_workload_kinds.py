"""WorkloadKind documents: checked when the policy set loads, read by extraction, named in match.kinds."""

from __future__ import annotations

from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import PolicyLoadError, load_policy_set
from policies.workload_model._extraction import Workload, extract
from tests.policies.conftest import Material
from tests.policies.evaluation import evaluate, rules
from verifier.evidence_folder import LocalEvidence

KIND = """
apiVersion: trtguard.dev/v1alpha1
kind: WorkloadKind
metadata: {name: inferencejobs.example.com}
spec:
  group: example.com
  kind: InferenceJob
  versions: [v1]
  podTemplates: ["spec.template", "spec.workers[*].template"]
  containers: ["spec.sidecar"]
"""
POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: jobs}
spec:
  match: {kinds: [KINDS]}
  images:
    - {name: pinned, match: ["*"], requireDigest: true}
"""
JOB: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "InferenceJob",
    "metadata": {"name": "j", "namespace": "prod"},
    "spec": {
        "template": {
            "spec": {"containers": [{"name": "main", "image": "docker.io/library/nginx@sha256:" + "1" * 64}]}
        },
        "workers": [
            {"template": {"spec": {"containers": [{"name": "w", "image": "docker.io/library/nginx:1"}]}}}
        ],
        "sidecar": {"name": "s", "image": "docker.io/library/busybox:1"},
    },
}


def load(material: Material, *texts: str) -> Any:
    return load_policy_set([material.policy(text, f"p{i}.yaml") for i, text in enumerate(texts)])


def test_a_workload_kind_is_read_like_a_shipped_one(material: Material) -> None:
    policy_set = load(material, KIND, POLICY.replace("KINDS", "InferenceJob.example.com"))
    found = extract(JOB, kinds=policy_set.kinds)
    assert isinstance(found, Workload) and found.known_kind
    assert [(u.path, u.reference) for u in found.images] == [
        ("spec.template.spec.containers[0].image", JOB["spec"]["template"]["spec"]["containers"][0]["image"]),
        ("spec.workers[0].template.spec.containers[0].image", "docker.io/library/nginx:1"),
        ("spec.sidecar.image", "docker.io/library/busybox:1"),
    ]
    decision = evaluate(PolicyEvaluator(policy_set, LocalEvidence(None)), JOB)
    assert decision.matched_policies == ("jobs",)
    assert {v.image for v in decision.violations} == {
        "docker.io/library/nginx:1",
        "docker.io/library/busybox:1",
    }
    # Another version than the document names is a kind trtguard does not know.
    other = {**JOB, "apiVersion": "example.com/v2"}
    assert not evaluate(PolicyEvaluator(policy_set, LocalEvidence(None)), other).matched_policies
    # Without the document the kind is unknown to trtguard.
    found = extract(JOB)
    assert isinstance(found, Workload) and not found.known_kind


def test_a_workload_kind_with_one_pod_spec_reads_the_objects_engines_annotation(material: Material) -> None:
    kind = KIND.replace(
        'podTemplates: ["spec.template", "spec.workers[*].template"]', 'podSpecs: ["spec.runner"]'
    )
    kind = kind.replace('  containers: ["spec.sidecar"]\n', "")
    policy_set = load(material, kind, POLICY.replace("KINDS", "InferenceJob.example.com"))
    engine = "registry.example.com/models/m@sha256:" + "2" * 64
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "InferenceJob",
        "metadata": {
            "name": "j",
            "annotations": {"trtguard.dev/engines": f'[{{"name": "m", "ref": "{engine}"}}]'},
        },
        "spec": {"runner": {"containers": [{"name": "main", "image": "nginx"}]}},
    }
    found = extract(obj, kinds=policy_set.kinds)
    assert isinstance(found, Workload)
    assert [(e.reference, e.containers) for e in found.engines] == [(engine, ("main",))]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("group: example.com", "group: apps"), "spec.group: String should match pattern"),
        (("group: example.com", "group: Example"), "spec.group: String should match pattern"),
        (("kind: InferenceJob", "kind: inferenceJob"), "spec.kind: String should match pattern"),
        (('"spec.workers[*].template"', '"spec..workers"'), "is not a path pattern at character 6"),
        (('"spec.workers[*].template"', '"[*].template"'), "starts with a wildcard"),
        (('containers: ["spec.sidecar"]', 'containers: ["spec.template"]'), "each path may be listed once"),
        (("  versions: [v1]\n", "  versions: []\n"), "spec.versions: List should have at least 1 item"),
        (("  containers:", "  podSpec:"), "spec.podSpec: unknown key"),
    ],
)
def test_workload_kinds_are_checked_when_they_load(
    material: Material, change: tuple[str, str], message: str
) -> None:
    with pytest.raises(PolicyLoadError) as caught:
        load(material, KIND.replace(*change), POLICY.replace("KINDS", "Deployment"))
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


def test_a_plural_or_misspelt_kind_is_named_with_the_kind_meant_beside_other_errors(
    material: Material,
) -> None:
    """Issue 28 item 9: ``kinds: [Deployments]`` says ``Deployment``, in the same run as the other errors."""
    broken = POLICY.replace("KINDS", "Deployments").replace(
        "requireDigest: true", "requireDigest: true, x: 1"
    )
    with pytest.raises(PolicyLoadError) as caught:
        load(material, broken)
    problems = caught.value.problems
    assert len(problems) == 2 and any("spec.images[0].x: unknown key" in p for p in problems)
    [kinds] = [p for p in problems if "spec.match.kinds[0]" in p]
    assert kinds.endswith(
        "spec.match.kinds[0]: 'Deployments' is not a built-in Kubernetes kind; did you mean Deployment? (a "
        "built-in kind is named as its manifests name it, singular; any other as Kind.group)"
    )


def test_policies_name_kinds_by_group(material: Material) -> None:
    with pytest.raises(PolicyLoadError) as caught:
        load(material, POLICY.replace("KINDS", "RayCluster"))
    [problem] = caught.value.problems
    assert (
        "spec.match.kinds[0]: 'RayCluster' is not a built-in Kubernetes kind; did you mean RayCluster.ray.io?"
        in problem
    )
    with pytest.raises(PolicyLoadError) as caught:
        load(material, POLICY.replace("KINDS", "InferenceJob.example.com"))
    assert "define it with a WorkloadKind document" in caught.value.problems[0]
    with pytest.raises(PolicyLoadError) as caught:
        load(material, KIND, KIND, POLICY.replace("KINDS", "Job"))
    assert "WorkloadKind InferenceJob.example.com is already defined at" in caught.value.problems[0]
    # `Job` is batch/v1's Job; a Volcano Job is Job.batch.volcano.sh.
    policy_set = load(material, POLICY.replace("KINDS", "Job"))
    volcano = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "v"},
        "spec": {"tasks": [{"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}]},
    }
    engine = PolicyEvaluator(policy_set, LocalEvidence(None))
    assert evaluate(engine, volcano).matched_policies == ()
    policy_set = load(material, POLICY.replace("KINDS", "Job.batch.volcano.sh"))
    decision = evaluate(PolicyEvaluator(policy_set, LocalEvidence(None)), volcano)
    assert rules(decision) == {("jobs", "images.pinned.requireDigest", decision.violations[0].action)}


def test_a_shipped_kind_can_be_redefined_to_follow_a_newer_crd(material: Material) -> None:
    newer = KIND.replace("group: example.com", "group: argoproj.io").replace(
        "kind: InferenceJob", "kind: Rollout"
    )
    policy_set = load(material, newer, POLICY.replace("KINDS", "Rollout.argoproj.io"))
    rollout = {**JOB, "apiVersion": "argoproj.io/v1", "kind": "Rollout"}
    found = extract(rollout, kinds=policy_set.kinds)
    assert isinstance(found, Workload) and found.known_kind
    assert [u.path for u in found.images][-1] == "spec.sidecar.image"
    # The shipped definition knows v1alpha1 only.
    found = extract(rollout)
    assert isinstance(found, Workload) and not found.known_kind
