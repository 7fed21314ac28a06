"""policies.workload_model._kinds: workload kinds by API group and kind, where each keeps its pod templates;
kind names."""

from __future__ import annotations

import pytest

from policies.workload_model._kinds import BUILTIN_KINDS, KindRegistry, named_kinds, parse_kind_name
from policies.workload_model._operator_kinds import DEFAULT_KINDS
from tests.policies.workload_model.test_extraction import API_VERSIONS, SPEC_PATHS


def test_every_builtin_kind_is_known_by_its_group() -> None:
    builtin = {(d.group, d.kind) for d in BUILTIN_KINDS}
    for kind, api_version in API_VERSIONS.items():
        group = api_version.rpartition("/")[0]
        assert (group, kind) in builtin
    assert {d.kind for d in BUILTIN_KINDS} == set(SPEC_PATHS)
    # Deployments, ReplicaSets and DaemonSets of the old extensions group have the same paths.
    assert {("extensions", k) for k in ("Deployment", "ReplicaSet", "DaemonSet")} <= builtin


@pytest.mark.parametrize("kind", sorted(SPEC_PATHS))
def test_each_builtin_kind_names_its_pod_spec(kind: str) -> None:
    group = API_VERSIONS[kind].rpartition("/")[0]
    definition = DEFAULT_KINDS.get(group, kind)
    assert definition is not None and definition.origin == "builtin"
    [template] = definition.templates
    assert template.pod_spec == SPEC_PATHS[kind]
    assert template.object_annotations


def test_kinds_are_told_apart_by_group() -> None:
    volcano = DEFAULT_KINDS.get("batch.volcano.sh", "Job")
    batch = DEFAULT_KINDS.get("batch", "Job")
    assert volcano is not None and batch is not None
    assert [t.pod_spec for t in volcano.templates] == ["spec.tasks[*].template.spec"]
    assert [t.pod_spec for t in batch.templates] == ["spec.template.spec"]
    assert DEFAULT_KINDS.get("", "Deployment") is None  # a core-group "Deployment" is no Deployment
    assert DEFAULT_KINDS.get("example.com", "Job") is None
    # Without apiVersion, an object is read as the built-in kind of its name.
    assert DEFAULT_KINDS.get(None, "Job") is batch
    assert DEFAULT_KINDS.get(None, "RayCluster") is None


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("Deployment", {("apps", "Deployment"), ("extensions", "Deployment")}),
        ("Job", {("batch", "Job")}),
        ("Pod", {("", "Pod")}),
        ("Job.batch.volcano.sh", {("batch.volcano.sh", "Job")}),
        ("RayCluster.ray.io", {("ray.io", "RayCluster")}),
        ("Deployment.apps", {("apps", "Deployment")}),
        ("RayCluster", set()),
        ("job", set()),
    ],
)
def test_kind_names_select_kinds_by_group(name: str, kinds: set[tuple[str, str]]) -> None:
    assert named_kinds(name) == kinds


def test_the_registry_refuses_names_it_does_not_know() -> None:
    assert DEFAULT_KINDS.resolve("InferenceService.serving.kserve.io") == {
        ("serving.kserve.io", "InferenceService")
    }
    with pytest.raises(ValueError, match=r"did you mean RayCluster\.ray\.io"):
        DEFAULT_KINDS.resolve("RayCluster")
    with pytest.raises(ValueError, match="not a workload kind trtguard knows"):
        DEFAULT_KINDS.resolve("Widget.example.com")
    with pytest.raises(ValueError, match="is not a kind name"):
        parse_kind_name("ray.io/RayCluster")


def test_added_definitions_replace_shipped_ones_of_the_same_kind() -> None:
    shipped = DEFAULT_KINDS.get("argoproj.io", "Rollout")
    assert shipped is not None
    other = KindRegistry((shipped,))
    assert DEFAULT_KINDS.with_definitions(other).get("argoproj.io", "Rollout") is shipped
    assert len(list(DEFAULT_KINDS.with_definitions(other))) == len(list(DEFAULT_KINDS))
