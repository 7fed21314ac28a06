"""Every template counts: a workload's verdict is the combination of its templates' verdicts, in every kind.

The oracle is the Pod: each pod spec judged alone as a Pod. For every built-in and shipped operator kind,
the findings of a workload that holds several pod specs (in any of its templates, at any position) must be
exactly the union of the findings of those pod specs as Pods, rule by rule: no template, role, position or
container name can hide what a Pod would show, nor add what none shows. The pod specs are drawn from
shapes that break one rule each (GPU fit, the runtime, the toolchain through a mount, a copy or a shared
process namespace, an image rule, an unsigned engine) or none, all with a container named ``server`` so
that names collide across templates. The shapes share nothing across templates (all storage that can
outlive a Pod is one volume of the workload, and a container with host access reads every template's, so
there the union is rightly exceeded: ``tests/policies/workload_model/test_sharing.py``). Real keys
and signed build manifests (:mod:`tests.policies.conftest`). The order of requests is
``tests/policies/test_differential.py``'s property.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.workload_model._kinds import KindDefinition, Template
from policies.workload_model._operator_kinds import DEFAULT_KINDS
from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material
from tests.policies.evaluation import NOW
from tests.policies.kind_objects import build, capacity, slots
from verifier.evidence_folder import LocalEvidence

Finding = tuple[str, str, str]

POLICIES: Final = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: gpu-fit}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest: {keys: [platform/build-signer]}
    rules:
      gpuCompatibility: {nodes: true, runtime: true}
---
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: toolchain}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest: {keys: [platform/build-signer]}
    rules:
      toolchain: {sameAsRuntimeImage: true}
---
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: images}
spec:
  match: {namespaces: [prod]}
  images:
    - {name: runtimes, match: ["nvcr.io/nvidia/tensorrt@sha256:*"]}
    - {name: engines, fields: [volume], match: ["registry.example.com/models/*"]}
"""
H200: Final = {"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"}
NGINX: Final = "docker.io/library/nginx@sha256:" + "c3" * 32


def _mount(*names: str, read_only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [
        {"name": n, "mountPath": f"/{n}", **({"readOnly": True} if n in read_only else {})} for n in names
    ]


def shapes(engine: str, unsigned: str) -> dict[str, dict[str, Any]]:
    """Pod specs, each breaking at most one thing; every one has a container named ``server``."""
    volume = {"name": "engine", "image": {"reference": engine}}
    scratch = {"name": "scratch", "emptyDir": {}}

    def spec(containers: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"nodeSelector": H200, "containers": containers, "volumes": [volume, scratch], **extra}

    server = {"name": "server", "image": RUNTIME, "volumeMounts": _mount("engine")}
    return {
        "good": spec([server]),
        "good-no-engine": {"containers": [{"name": "server", "image": RUNTIME}]},
        "unconfined": {**spec([server]), "nodeSelector": {}},
        "another-gpu": spec([server], nodeSelector={**H200, "nvidia.com/gpu.compute.major": "8"}),
        "second-runtime-mounts": spec([server, {"name": "shadow", "image": OTHER_RUNTIME, **_m("engine")}]),
        "regular-copy": spec(
            [
                {"name": "server", "image": RUNTIME, **_m("engine", "scratch")},
                {"name": "shadow", "image": OTHER_RUNTIME, **_m("scratch", read_only=("scratch",))},
            ]
        ),
        "init-copy": spec(
            [{"name": "server", "image": OTHER_RUNTIME, **_m("scratch")}],
            initContainers=[{"name": "copy", "image": RUNTIME, **_m("engine", "scratch")}],
        ),
        "read-only-share": spec(
            [
                {"name": "server", "image": RUNTIME, **_m("engine", "scratch", read_only=("scratch",))},
                {"name": "exporter", "image": OTHER_RUNTIME, **_m("scratch")},
            ]
        ),
        "shared-processes": spec(
            [server, {"name": "shadow", "image": OTHER_RUNTIME}], shareProcessNamespace=True
        ),
        "off-list-image": spec([server, {"name": "proxy", "image": NGINX}]),
        "unsigned-engine": {
            **spec([server]),
            "volumes": [{"name": "engine", "image": {"reference": unsigned}}],
        },
    }


def _m(*names: str, read_only: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"volumeMounts": _mount(*names, read_only=read_only)}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[PolicyEvaluator, dict[str, dict[str, Any]]]:
    material = Material(tmp_path_factory.mktemp("template-differential"))
    engine = material.engine("e")
    unsigned = material.engine("u", signer="someone-else")
    paths = [material.policy(POLICIES), material.keys_file("build-signer")]
    policy_engine = PolicyEvaluator(
        load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW
    )
    return policy_engine, shapes(engine, unsigned)


def findings(engine: PolicyEvaluator, obj: Mapping[str, Any]) -> frozenset[Finding]:
    decision = asyncio.run(engine.evaluate(obj))
    assert decision.unjudged is None, decision.unjudged
    return frozenset((v.policy, v.rule, v.action.value) for v in decision.violations)


_ALONE: dict[tuple[int, str], frozenset[Finding]] = {}


def alone(engine: PolicyEvaluator, specs: Mapping[str, dict[str, Any]], shape: str) -> frozenset[Finding]:
    """The oracle: the pod spec of ``shape`` judged as a Pod (kept per engine and shape)."""
    key = (id(engine), shape)
    if key not in _ALONE:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "alone", "namespace": "prod"}}
        _ALONE[key] = findings(engine, {**pod, "spec": specs[shape]})
    return _ALONE[key]


KINDS: Final = [d for d in DEFAULT_KINDS if slots(d)]
SHAPES: Final = sorted(shapes("e", "u"))
VIOLATING: Final = [s for s in SHAPES if not s.startswith(("good", "read-only"))]


def test_the_shapes_break_what_they_say(world: tuple[PolicyEvaluator, dict[str, dict[str, Any]]]) -> None:
    engine, specs = world
    broken = {shape: {f"{p}/{r}" for p, r, _ in alone(engine, specs, shape)} for shape in SHAPES}
    assert broken == {
        "good": set(),
        "good-no-engine": set(),
        "read-only-share": set(),
        "unconfined": {"gpu-fit/models.rules.gpuCompatibility.nodes"},
        "another-gpu": {"gpu-fit/models.rules.gpuCompatibility.nodes"},
        "second-runtime-mounts": {
            "gpu-fit/models.rules.gpuCompatibility.runtime",
            "toolchain/models.rules.toolchain",
        },
        "regular-copy": {"gpu-fit/models.rules.gpuCompatibility.runtime", "toolchain/models.rules.toolchain"},
        "init-copy": {"gpu-fit/models.rules.gpuCompatibility.runtime", "toolchain/models.rules.toolchain"},
        "shared-processes": {
            "gpu-fit/models.rules.gpuCompatibility.runtime",
            "toolchain/models.rules.toolchain",
        },
        "off-list-image": {"images/images"},
        "unsigned-engine": {"gpu-fit/models.buildManifest", "toolchain/models.buildManifest"},
    }


@st.composite
def workloads(draw: st.DrawFn) -> tuple[KindDefinition, list[list[str]]]:
    """A kind, and for each of its slots the shapes placed there (several under a wildcard)."""
    definition = draw(st.sampled_from(KINDS))
    placed = [
        draw(st.lists(st.sampled_from(SHAPES), min_size=0, max_size=capacity(t) or 3))
        for t in slots(definition)
    ]
    if not any(placed):
        placed[0] = [draw(st.sampled_from(SHAPES))]
    return definition, placed


def with_parents(definition: KindDefinition, placed: list[list[str]]) -> list[list[str]]:
    """``placed``, where a slot inside another (a ServingRuntime's ``workerSpec``) holds pod specs and its
    parent none but must name containers, with a pod spec that breaks nothing in the parent (as any such
    object holds: without it, the parent's missing containers are a finding no Pod shows)."""
    templates = slots(definition)
    completed = [list(here) for here in placed]
    pairs = [(i, j) for i, t in enumerate(templates) for j, u in enumerate(templates) if _inside(t, u)]
    for inner, outer in pairs:
        if completed[inner] and not completed[outer] and templates[outer].containers_required:
            completed[outer] = ["good-no-engine"]
    return completed


def _inside(inner: Template, outer: Template) -> bool:
    return inner.path.text.startswith(f"{outer.path.text}.")


SERVING_RUNTIME: Final = next(d for d in DEFAULT_KINDS if d.name == "ServingRuntime.serving.kserve.io")


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(workloads())
@example((SERVING_RUNTIME, [[], ["another-gpu"]]))  # workers only: the runtime's own pod spec is filled in
def test_a_workloads_findings_are_those_of_its_pod_specs_alone(
    world: tuple[PolicyEvaluator, dict[str, dict[str, Any]]], drawn: tuple[KindDefinition, list[list[str]]]
) -> None:
    engine, specs = world
    definition, placed = drawn[0], with_parents(*drawn)
    obj = build(definition, [[specs[shape] for shape in shapes_here] for shapes_here in placed])
    expected = frozenset().union(*(alone(engine, specs, s) for here in placed for s in here))
    assert findings(engine, obj) == expected, (definition.name, placed)


def _positions(definition: KindDefinition) -> list[tuple[int, int]]:
    """(slot, index within it) of every position a pod spec can take: a fixed slot has one, a wildcard
    slot three (first, middle, last of three)."""
    return [(s, i) for s, t in enumerate(slots(definition)) for i in range(capacity(t) or 3)]


@pytest.mark.parametrize("shape", VIOLATING)
@pytest.mark.parametrize("definition", KINDS, ids=lambda d: d.name)
def test_a_violating_pod_spec_denies_in_every_position_of_every_kind(
    world: tuple[PolicyEvaluator, dict[str, dict[str, Any]]], definition: KindDefinition, shape: str
) -> None:
    engine, specs = world
    expected = alone(engine, specs, shape)
    assert expected
    for slot, index in _positions(definition):
        placed: list[Sequence[dict[str, Any]]] = []
        for number, template in enumerate(slots(definition)):
            count = capacity(template) or 3
            here = [specs["good"]] * count
            if number == slot:
                here = [*here[:index], specs[shape], *here[index + 1 :]]
            placed.append(here)
        assert findings(engine, build(definition, placed)) == expected, (definition.name, slot, index)


def test_every_kind_is_covered() -> None:
    assert {d.name for d in KINDS} == {d.name for d in DEFAULT_KINDS}


def test_kind_objects_put_each_pod_spec_in_its_template(tmp_path: Path) -> None:
    # The builder itself: three pod specs in a Volcano Job's tasks, each its own template.
    [volcano] = [d for d in KINDS if d.name == "Job.batch.volcano.sh"]
    obj = build(volcano, [[{"containers": [{"name": "server", "image": RUNTIME}]}] * 3])
    assert [t["name"] for t in obj["spec"]["tasks"]] == ["group-0", "group-1", "group-2"]
