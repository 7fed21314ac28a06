"""Any node of a workload replaced with a value of another JSON type (attack F5): reading it and judging it
never raise, and what was denied is never admitted for it.

The objects: every kind the policy set knows (the built-in kinds, every shipped operator kind and a
``WorkloadKind``) with denied pod specs in every template (GPU fit through required node affinity, an
engine handed to another runtime through an ``emptyDir``, an off-list image), and one real example of each
shipped operator kind (tests/data/501-operator-manifests: fields no template reads, like ``replicas`` and
``rayStartParams``, too). The policies judge GPU fit, the runtime, the toolchain, images and a CEL expression
over the whole workload. Hypothesis picks the object, the node and the value; each mutant is judged as a
CREATE and as an UPDATE from and to the original, as the webhook judges it (kinds it does not know are
judged). A replacement with ``null`` may admit: to the API server a null field is an absent one (no
volumes, no engine).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.results import Decision
from policies.workload_model._extraction import Workload, extract, iter_resources
from tests.conftest import DATA
from tests.policies.conftest import Material
from tests.policies.evaluation import NOW
from tests.policies.kind_objects import build, slots
from tests.policies.test_template_differential import POLICIES, shapes
from verifier.base import InputError
from verifier.evidence_folder import LocalEvidence

EXTRA: Final = """
---
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: cel}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest: {keys: [platform/build-signer]}
    rules:
      expressions:
        - {name: reads, cel: "size(workload.metadata) > 0 && string(workload.spec) != ''", message: m}
---
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
H200_OR_ANY: Final = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["8"]},
                        {"key": "nvidia.com/gpu.compute.major", "operator": "Lt", "values": ["10"]},
                        {"key": "nvidia.com/gpu.compute.minor", "operator": "In", "values": ["0"]},
                    ]
                },
                {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "Exists"}]},
            ]
        }
    }
}
#: JSON values, each of one of the six types (numbers of any size, strings, nested lists and maps).
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=5,
)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path:
        yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*path, index))


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _replaced(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    mutant = copy.deepcopy(obj)
    _at(mutant, path[:-1])[path[-1]] = value
    return mutant


def _examples() -> list[dict[str, Any]]:
    """One real example of each shipped operator kind (the first document of each kind in the corpus)."""
    found: dict[tuple[Any, Any], dict[str, Any]] = {}
    for path in sorted((DATA / "501-operator-manifests").rglob("*.yaml")):
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue  # the corpus holds malformed files on purpose
        for document in documents:
            for obj in iter_resources(document) if isinstance(document, dict) else ():
                key = (obj.get("apiVersion"), obj.get("kind"))
                try:
                    workload = extract(obj, namespace="prod")
                except InputError:
                    continue
                if isinstance(workload, Workload) and workload.known_kind and key not in found:
                    found[key] = dict(obj)
    return list(found.values())


class World:
    """The policies, and the objects to mutate, each with the verdict it gets as it is."""

    def __init__(self, root: Path) -> None:
        material = Material(root)
        engine = material.engine("e")
        unsigned = material.engine("u", signer="someone-else")
        policy_set = load_policy_set([material.policy(POLICIES + EXTRA), material.keys_file("build-signer")])
        self.engine = PolicyEvaluator(policy_set, LocalEvidence(material.attestations), clock=lambda: NOW)
        found = shapes(engine, unsigned)
        placed = {key: value for key, value in found["good"].items() if key != "nodeSelector"}
        bases = {
            "affinity": {**placed, "affinity": H200_OR_ANY},
            "init-copy": found["init-copy"],
            "off-list-image": found["off-list-image"],
        }
        self.objects: list[tuple[str, dict[str, Any], bool]] = []
        for definition in policy_set.kinds:
            for shape, spec in bases.items():
                obj = build(definition, [[spec]] * len(slots(definition)))
                name = f"{definition.group}/{definition.kind} {shape}"
                self.objects.append((name, obj, self.judge(obj).allowed))
        for obj in _examples():
            self.objects.append((f"{obj['apiVersion']} {obj['kind']} example", obj, self.judge(obj).allowed))

    def judge(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> Decision:
        """The webhook's verdict: namespace from the request, kinds it does not know judged."""
        return asyncio.run(
            self.engine.evaluate(obj, namespace="prod", old=old, kind=None, unknown_kinds="judge")
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("wrong-types"))


def test_the_objects_cover_every_kind_and_are_denied_as_they_are(world: World) -> None:
    names = {name.rsplit(" ", 1)[0] for name, _, _ in world.objects}
    shipped = {"ray.io/RayCluster", "ray.io/RayService", "leaderworkerset.x-k8s.io/LeaderWorkerSet"}
    shipped |= {"serving.kserve.io/InferenceService", "kubeflow.org/PyTorchJob", "kubeflow.org/MPIJob"}
    assert shipped | {"batch.volcano.sh/Job", "example.com/InferenceJob", "/Pod"} <= names
    assert len([name for name, _, _ in world.objects if name.endswith(" example")]) >= 15
    assert not any(allowed for _, _, allowed in world.objects)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_node_of_another_json_type_never_raises_nor_admits(world: World, data: st.DataObject) -> None:
    name, obj, allowed = data.draw(st.sampled_from(world.objects), label="object")
    path = data.draw(st.sampled_from(list(_paths(obj))), label="path")
    original = _at(obj, path)
    value = data.draw(JSON_VALUES.filter(lambda v: json_type(v) != json_type(original)), label="value")
    mutant = _replaced(obj, path, value)
    created = world.judge(mutant)  # never raises: a malformed field is a violation with its path
    world.judge(mutant, old=obj)
    world.judge(obj, old=mutant)
    if value is not None and not allowed:
        assert not created.allowed, (name, path, value, created.unjudged)
    if created.unjudged is None and not created.allowed:
        assert all(v.message for v in created.violations)


AFFINITY: Final = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


@pytest.mark.parametrize(
    ("kind", "spec", "replaced", "value", "says"),
    [
        # found by the fuzz above: an operator holding a list crashed GPU fit (unhashable list)
        ("ray.io/RayCluster", "spec.workerGroupSpecs[0].template.spec", "[0].matchExpressions[0].operator",
         ["Gt"], "[0].matchExpressions[0] is not a node selector requirement"),
        ("leaderworkerset.x-k8s.io/LeaderWorkerSet", "spec.leaderWorkerTemplate.workerTemplate.spec",
         "[1].matchExpressions[0].operator", {"Exists": None},
         "[1].matchExpressions[0] is not a node selector requirement"),
        ("batch.volcano.sh/Job", "spec.tasks[0].template.spec", "[0].matchExpressions", "In",
         "[0] is not a node selector term"),
    ],
)  # fmt: skip
def test_a_requirement_of_another_type_is_a_violation_naming_it(
    world: World, kind: str, spec: str, replaced: str, value: Any, says: str
) -> None:
    [obj] = [obj for name, obj, _ in world.objects if name == f"{kind} affinity"]
    where = f"{spec}.{AFFINITY}{replaced}"
    parts = tuple(int(p) if p.isdigit() else p for p in where.replace("[", ".").replace("]", "").split("."))
    decision = world.judge(_replaced(obj, parts, value))
    assert not decision.allowed
    nodes = [v for v in decision.violations if v.rule == "models.rules.gpuCompatibility.nodes"]
    assert any(f"{spec}.{AFFINITY}{says}" in v.message for v in nodes), [v.message for v in nodes]
