"""Every field the workload model reads, holding a value of any JSON type, is read or reported, never a
crash (attack 39d F1: a host path's ``type`` that was a list or an object raised TypeError, unhashable, in
:mod:`policies.workload_model._sharing`, which the webhook answered as an internal error and ``trtguard
check`` as a traceback that lost the whole report)."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.workload_model._extraction import Workload, extract
from tests.conftest import DATA
from tests.policies.conftest import Material
from tests.policies.evaluation import MODELS_POLICY, images_policy
from trtguard.cli import main
from verifier.base import InputError
from verifier.evidence_folder import LocalEvidence

POD: Final = json.loads((DATA / "790-pod-every-field-the-model-reads.json").read_text())
#: One value of each JSON type, the lists and objects (unhashable) empty and not.
VALUES: Final[tuple[Any, ...]] = (None, True, 7, 1 << 70, 1.5, "", "x", [], ["a"], [{}], {}, {"a": {"b": 1}})
UNHASHABLE: Final[tuple[Any, ...]] = (["File"], {"a": {"b": 1}})


def _wrapped(kind: str) -> dict[str, Any]:
    """The Pod's spec as the pod template of ``kind``."""
    if kind == "Pod":
        return copy.deepcopy(POD)
    template = {"metadata": copy.deepcopy(POD["metadata"]), "spec": copy.deepcopy(POD["spec"])}
    del template["metadata"]["namespace"], template["metadata"]["ownerReferences"]
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "a"}}, "template": template}
    if kind == "CronJob":
        spec = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}
    api = "batch/v1" if kind == "CronJob" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "w", "namespace": "prod"}, "spec": spec}


KINDS: Final = ("Pod", "Deployment", "CronJob", "DaemonSet")
OBJECTS: Final = {kind: _wrapped(kind) for kind in KINDS}


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path:
        yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*path, index))


def _replaced(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    mutant = copy.deepcopy(obj)
    node = mutant
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = copy.deepcopy(value)
    return mutant


def _mutants(kind: str, values: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any, dict[str, Any]]]:
    obj = OBJECTS[kind]
    for path in _paths(obj):
        if path[:2] in (("apiVersion",), ("kind",)):
            continue  # another kind is another object
        for value in values:
            yield path, value, _replaced(obj, path, value)


def _spec_path(kind: str) -> str:
    return {"Pod": "spec", "CronJob": "spec.jobTemplate.spec.template.spec"}.get(kind, "spec.template.spec")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", UNHASHABLE, ids=["list", "object"])
def test_a_host_path_type_of_another_json_type_is_a_problem_naming_it(kind: str, value: Any) -> None:
    spec = _spec_path(kind)
    path: tuple[Any, ...] = (*spec.split("."), "volumes", 0, "hostPath", "type")
    workload = extract(_replaced(OBJECTS[kind], path, value), namespace="prod")
    assert isinstance(workload, Workload)
    found = [p.message for p in workload.problems if p.path == f"{spec}.volumes[0].hostPath.type"]
    assert found == [
        f"a host path's type must be a string, found {'a list' if isinstance(value, list) else 'an object'}"
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_of_every_json_type_is_read_or_an_input_error(kind: str) -> None:
    assert isinstance(extract(OBJECTS[kind], namespace="prod"), Workload)
    for path, value, mutant in _mutants(kind, VALUES):
        try:
            extract(mutant, namespace="prod")
        except InputError:
            pass  # malformed in a way that leaves nothing to judge: reported as such
        except Exception as error:  # pragma: no cover - the failure
            pytest.fail(f"{kind} {path} = {value!r}: {type(error).__name__}: {error}")


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> PolicyEvaluator:
    material = Material(tmp_path_factory.mktemp("sharing"))
    policy_set = load_policy_set(
        [material.policy(images_policy() + "\n---\n" + MODELS_POLICY), material.keys_file("build-signer")]
    )
    return PolicyEvaluator(policy_set, LocalEvidence(material.attestations))


@pytest.mark.parametrize("kind", KINDS)
def test_the_evaluator_judges_a_list_or_an_object_anywhere_as_object_and_as_old_object(
    evaluator: PolicyEvaluator, kind: str
) -> None:
    obj = OBJECTS[kind]
    for path, value, mutant in _mutants(kind, UNHASHABLE):
        for new, old in ((mutant, None), (mutant, obj), (obj, mutant)):
            decision = asyncio.run(evaluator.evaluate(new, namespace="prod", old=old, unknown_kinds="judge"))
            if decision.unjudged is None and not decision.allowed:
                assert all(v.message for v in decision.violations), (path, value)


def test_check_reports_every_resource_with_a_list_or_an_object_anywhere(
    material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    mutants = [mutant for kind in KINDS for _, _, mutant in _mutants(kind, UNHASHABLE)]
    folder: Path = material.root / "mutants"
    folder.mkdir()
    for number, mutant in enumerate(mutants):
        (folder / f"{number}.json").write_text(json.dumps(mutant))
    policies = [
        str(material.policy(images_policy() + "\n---\n" + MODELS_POLICY)),
        str(material.keys_file("build-signer")),
    ]
    status = main(["check", "--policies", policies[0], "--policies", policies[1], str(folder)])
    out, err = capsys.readouterr()
    assert status in (1, 2), (out, err)
    assert "Traceback" not in out + err
    assert f"{len(mutants)} resources:" in out, out[-2000:]
    assert "at spec.volumes[0].hostPath.type\n      a host path's type must be a string, found a list" in out
