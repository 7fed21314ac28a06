"""policies.workload_model._discovery: what names an image in a kind trtguard does not know, and a search in
one walk."""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any, Final

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.workload_model._budget import _STEPS_PER_CHECK, UNLIMITED, Budget, BudgetExceeded
from policies.workload_model._discovery import find_images, find_pod_specs
from policies.workload_model._extraction import extract
from tests.policies.conftest import Material
from tests.policies.evaluation import images_policy
from verifier.evidence_folder import LocalEvidence

DIGEST = "d" * 64


@pytest.mark.parametrize(
    ("spec", "reference", "path"),
    [
        # the NIM Operator's NIMService
        (
            {"image": {"repository": "nvcr.io/nim/meta/llama3", "tag": "1.0", "pullSecrets": ["ngc"]}},
            "nvcr.io/nim/meta/llama3:1.0",
            "spec.image",
        ),
        (
            {"image": {"repository": "nvcr.io/nim/x", "digest": f"sha256:{DIGEST}"}},
            f"nvcr.io/nim/x@sha256:{DIGEST}",
            "spec.image",
        ),
        (
            {"image": {"repository": "r/x", "tag": "1", "digest": DIGEST}},
            f"r/x:1@sha256:{DIGEST}",
            "spec.image",
        ),
        # Helm-style values: registry, repository, tag; or name and tag
        (
            {"image": {"registry": "docker.io", "repository": "library/nginx", "tag": "1.27"}},
            "docker.io/library/nginx:1.27",
            "spec.image",
        ),
        (
            {"image": {"name": "docker.io/library/busybox", "tag": "1.36"}},
            "docker.io/library/busybox:1.36",
            "spec.image",
        ),
        ({"values": {"server": {"repository": "r/server", "tag": "2"}}}, "r/server:2", "spec.values.server"),
        ({"sidecarImage": {"repository": "r/side", "tag": "3"}}, "r/side:3", "spec.sidecarImage"),
        ({"images": {"server": "r/a:1"}}, "r/a:1", "spec.images.server"),
        ({"images": [{"repository": "r/b", "tag": "4"}]}, "r/b:4", "spec.images[0]"),
        # a repository beside the image's name (the GPU Operator's ClusterPolicy)
        (
            {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "550.1"}},
            "nvcr.io/nvidia/driver:550.1",
            "spec.driver.image",
        ),
        ({"image": {"repository": "r/x", "tag": 2}}, "r/x:2", "spec.image"),  # an unquoted YAML tag
    ],
)
def test_image_objects_name_their_image(spec: dict[str, Any], reference: str, path: str) -> None:
    images, problems = find_images({"spec": spec})
    assert [(use.reference, use.path) for use in images] == [(reference, path)]
    assert problems == []


@pytest.mark.parametrize(
    ("spec", "readings"),
    [
        # Helm-style operators run REPO:v1; the Prometheus Operator runs `image` as written (attack 29, F2)
        (
            {"server": {"image": "r/server", "tag": "v1"}},
            [("r/server", "spec.server.image"), ("r/server:v1", "spec.server")],
        ),
        (
            {"server": {"image": "r/server", "version": 2}},
            [("r/server", "spec.server.image"), ("r/server:2", "spec.server")],
        ),
        (
            {"server": {"image": "r/server:v1", "digest": DIGEST}},
            [("r/server:v1", "spec.server.image"), (f"r/server:v1@sha256:{DIGEST}", "spec.server")],
        ),
        (
            {"sidecarImage": "r/side", "sidecarTag": "3", "tag": "9"},
            [("r/side", "spec.sidecarImage"), ("r/side:3", "spec")],
        ),
        (
            {"m": {"a.b": {"image": "r/x", "tag": "1"}}},
            [("r/x", "spec.m[a.b].image"), ("r/x:1", "spec.m[a.b]")],
        ),
        # a tag already in the image: no operator can add another; still not pinned, the tag beside it stays
        ({"server": {"image": "r/server:v1", "tag": "v2"}}, [("r/server:v1", "spec.server.image")]),
    ],
)
def test_an_image_with_a_tag_beside_it_is_judged_as_written_and_composed_and_never_pinned(
    spec: dict[str, Any], readings: list[tuple[str, str]]
) -> None:
    images, problems = find_images({"spec": spec})
    assert [(use.reference, use.path) for use in images] == readings
    assert [use.prefix for use in images] == [None] * len(readings) and problems == []


def test_an_image_with_nothing_beside_it_can_be_pinned() -> None:
    images, _ = find_images({"spec": {"server": {"image": "r/server", "sidecarTag": "1"}, "imageTag": "x"}})
    assert [(use.reference, use.prefix) for use in images] == [("r/server", "")]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"image": {"pullPolicy": "Always"}}, "spec.image"),
        ({"image": 5}, "spec.image"),
        ({"image": ["r/x:1"]}, "spec.image"),
        ({"images": [7]}, "spec.images[0]"),
        ({"runtimeImage": {"pullPolicy": "Always"}}, "spec.runtimeImage"),
    ],
)
def test_an_image_field_that_names_no_readable_image_is_a_problem(spec: dict[str, Any], path: str) -> None:
    images, problems = find_images({"spec": spec})
    assert images == [] and [p.path for p in problems] == [path]


def test_what_is_no_image_is_not_one() -> None:
    spec = {
        "pullImage": True,
        "image": None,
        "imagePullPolicy": "Always",
        "name": "x",
        "tag": "1",
        "label": "image",
    }
    assert find_images({"spec": spec}) == ([], [])


class CountingBudget(Budget):
    """A budget that counts the steps it is charged (one per value a walk visits)."""

    def __init__(self) -> None:
        super().__init__(float("inf"))
        self.steps = 0

    def step(self, count: int = 1) -> None:
        self.steps += count


def test_the_pod_spec_search_visits_each_value_at_most_once() -> None:
    # Issue 24, item 10: 5,000 pod specs took 23 s (each found spec was compared with every one before).
    shards = [{"template": {"spec": {"containers": [{"name": "c", "image": "r/x:1"}]}}} for _ in range(5000)]
    budget = CountingBudget()
    found = find_pod_specs({"spec": {"shards": shards}}, budget)
    assert [f.path for f in found[:2]] == ["spec.shards[0].template.spec", "spec.shards[1].template.spec"]
    assert len(found) == 5000
    # spec, shards, and per shard: the item, its template, the pod spec (not entered)
    assert budget.steps == 2 + 3 * 5000


def test_pod_specs_inside_a_found_one_are_not_searched() -> None:
    inner = {"containers": [{"name": "inner", "image": "r/i:1"}]}
    outer = {"containers": [{"name": "outer", "image": "r/o:1"}], "extra": {"nested": inner}}
    assert [f.path for f in find_pod_specs({"spec": {"a": outer, "b": inner}})] == ["spec.a", "spec.b"]


def test_an_unknown_kind_naming_only_an_image_object_is_reported_and_judged(material: Material) -> None:
    # Issue 24, item 7: a NIMService was "a kind trtguard does not know and names no container image".
    obj = {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "llama3", "namespace": "prod"},
        "spec": {"image": {"repository": "nvcr.io/nim/meta/llama3", "tag": "1.0"}},
    }
    engine = PolicyEvaluator(
        load_policy_set([material.policy(images_policy())]), LocalEvidence(material.attestations)
    )
    reported = asyncio.run(engine.evaluate(obj))
    assert reported.unjudged is not None and "the 1 image it names was not checked" in reported.unjudged
    assert [(i.reference, i.path) for i in reported.images] == [("nvcr.io/nim/meta/llama3:1.0", "spec.image")]
    judged = asyncio.run(engine.evaluate(obj, unknown_kinds="judge"))
    assert not judged.allowed and judged.violations[0].image == "nvcr.io/nim/meta/llama3:1.0"
    obj["spec"] = {"image": {"pullPolicy": "Always"}}
    unread = asyncio.run(engine.evaluate(obj))
    assert unread.unjudged is not None
    assert "it names no image trtguard can read (spec.image: names an image" in unread.unjudged
    assert not asyncio.run(engine.evaluate(obj, unknown_kinds="judge")).allowed


class SpentBudget(Budget):
    """A budget spent before the walk starts, that counts the steps charged to it until it says so."""

    def __init__(self) -> None:
        super().__init__(-1.0)
        self.steps = 0

    def step(self, count: int = 1) -> None:
        self.steps += count
        super().step(count)


WIDE: Final = 1_000_000


@pytest.mark.parametrize(
    "obj",
    [
        {"spec": {"x": [{}] * WIDE}},  # a list of a million values in a kind trtguard does not know
        {"spec": {"predictor": {"tolerations": [{}] * WIDE}}},  # a field an operator kind does not read
        {f"k{i}": i for i in range(WIDE)},  # a million fields at the top
    ],
    ids=["list", "operator-field", "top"],
)
@pytest.mark.parametrize("search", [find_images, find_pod_specs])
def test_a_walk_too_large_for_its_budget_ends_within_a_check_and_builds_nothing_ahead(
    obj: dict[str, Any], search: Any
) -> None:
    # Attack 39d F4: a list's children were all built (a million tuples, ~250 MB, seconds of CPU) in one step,
    # before the budget had a look; now each child is built as it is counted.
    budget = SpentBudget()
    tracemalloc.start()
    try:
        with pytest.raises(BudgetExceeded, match="more than its CPU budget"):
            search(obj, budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert budget.steps == _STEPS_PER_CHECK
    assert peak < 256 * 1024, peak


def test_a_million_values_in_an_operator_kind_are_denied_by_the_budget() -> None:
    obj = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "i", "namespace": "prod"},
        "spec": {"predictor": {"tolerations": [{}] * WIDE, "model": {"storageUri": "s3://b/m"}}},
    }
    budget = SpentBudget()
    tracemalloc.start()
    try:
        with pytest.raises(BudgetExceeded, match="more than its CPU budget"):
            extract(obj, budget=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert budget.steps <= 2 * _STEPS_PER_CHECK
    assert peak < 1024 * 1024, peak


def test_the_evaluator_denies_a_million_values_with_the_budgets_message(material: Material) -> None:
    engine = PolicyEvaluator(
        load_policy_set([material.policy(images_policy())]),
        LocalEvidence(material.attestations),
        cpu_seconds=0.0,
    )
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "prod"},
        "spec": {"image": "r.io/a:1", "x": [{}] * WIDE},
    }
    tracemalloc.start()
    try:
        decision = asyncio.run(engine.evaluate(obj, unknown_kinds="judge"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not decision.allowed
    assert any("more than its CPU budget of 0 s" in v.message for v in decision.violations), (
        decision.violations
    )
    assert peak < 8 * 1024 * 1024, peak


def _chain(depth: int, key_length: int) -> dict[str, Any]:
    """An object ``depth`` maps deep, each level under a key of ``key_length`` characters."""
    inner: dict[str, Any] = {"image": "r.io/a:1"}
    for level in range(depth):
        inner = {f"{level:04d}" + "k" * (key_length - 4): inner}
    return {"spec": inner}


@pytest.mark.parametrize("search", [find_images, find_pod_specs])
def test_a_chain_under_long_keys_is_refused_before_its_paths_fill_memory(search: Any) -> None:
    # Attack 39e F1: the walk holds a path a level; 900 levels of 7,500-character keys held 2 GB. A chain of
    # 200 levels of 20,000 characters (4 MB of keys) would hold 400 MB of paths; it is refused at 8 Mi.
    obj = _chain(200, 20_000)
    tracemalloc.start()
    try:
        with pytest.raises(BudgetExceeded, match="nested under keys too long to judge"):
            search(obj, UNLIMITED)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024, peak


def test_a_chain_under_short_keys_is_walked_whole() -> None:
    images, problems = find_images(_chain(900, 8), UNLIMITED)
    assert [use.reference for use in images] == ["r.io/a:1"] and not problems
