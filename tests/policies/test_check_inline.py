"""``check`` from memory reads each resource where it is judged (``evaluate(offload=False)``), without
counting its values first to choose a thread: the decisions are those of the webhook's way, which reads a
large object in an evaluation thread (issue 31: the count was 4 % of a resource)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.check import check, read_resources
from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.workload_model import _budget
from tests.policies.conftest import pod
from tests.webhook.test_adversarial_corpus import CORPUS, load_cases
from trtguard.demo.material import TENSORRT_IMAGE, Material
from verifier.evidence_folder import LocalEvidence


@pytest.fixture(scope="module")
def evaluator(demo_material: Material, tmp_path_factory: pytest.TempPathFactory) -> PolicyEvaluator:
    """The bundled policies with the demo keys, and the adversarial corpus's own policies beside them."""
    folder = tmp_path_factory.mktemp("inline-policies") / "policies"
    shutil.copytree(demo_material.policies, folder)
    document = yaml.safe_load(CORPUS.read_text())
    (folder / "corpus.yaml").write_text(yaml.safe_dump_all(document.get("policies", []), sort_keys=False))
    return PolicyEvaluator(load_policy_set([folder]), LocalEvidence(demo_material.attestations))


def _large(count: int) -> dict[str, Any]:
    """A Pod of ``count`` containers: more values than are read on the event loop."""
    obj = pod(namespace="prod")
    obj["spec"]["containers"] = [{"name": f"c{i}", "image": TENSORRT_IMAGE} for i in range(count)]
    return obj


def _judged(evaluator: PolicyEvaluator, obj: Any, old: Any, *, offload: bool, **options: Any) -> Any:
    return asyncio.run(evaluator.evaluate(obj, old=old, offload=offload, pin=True, **options))


def test_the_corpus_is_judged_alike_read_inline_or_in_a_thread(
    evaluator: PolicyEvaluator, demo_material: Material
) -> None:
    cases = [c for c in load_cases(demo_material) if c.resource is not None]
    assert len(cases) > 50
    objects = [(c.resource, c.old) for c in cases] + [(_large(600), None), (_large(400), _large(300))]
    assert not _budget.small(*objects[-1]) and not _budget.small(objects[-2][0])
    for obj, old in objects:
        for options in ({}, {"unknown_kinds": "judge"}, {"namespace": "prod"}):
            assert _judged(evaluator, obj, old, offload=False, **options) == _judged(
                evaluator, obj, old, offload=True, **options
            )


def test_check_from_memory_hands_nothing_to_a_thread(
    evaluator: PolicyEvaluator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "large.yaml"
    path.write_text(yaml.safe_dump_all([_large(600), pod(namespace="prod")]))
    resources = list(read_resources([str(path)], None, []))
    expected = asyncio.run(check(evaluator, resources))

    async def refused(*_: object) -> None:
        raise AssertionError("handed to a thread")

    monkeypatch.setattr(_budget, "offload", refused)
    with pytest.raises(AssertionError, match="handed to a thread"):
        _judged(evaluator, _large(600), None, offload=True)
    assert [o.result for o in asyncio.run(check(evaluator, resources))] == [o.result for o in expected]
