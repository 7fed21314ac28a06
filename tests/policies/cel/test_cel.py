"""policies.cel as a whole: realistic policy expressions on a real manifest and Pod, times, threads."""

from __future__ import annotations

import datetime as dt
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from policies.cel import CelEvaluationError, compile_expression, prepare_activation
from tests.policies.cel.conftest import FIVE, program


@pytest.mark.parametrize("source", FIVE)
def test_the_five_policy_expressions_hold_on_the_sample(source: str, values: dict[str, Any]) -> None:
    assert program(source, expect_bool=True).evaluate_bool(values) is True


def test_the_five_policy_expressions_fail_where_the_data_breaks_them(values: dict[str, Any]) -> None:
    values["manifest"]["builder_config"]["max_workspace_size"] = 8 * 1024**3
    values["manifest"]["accuracy"][0]["value"] = 0.70
    values["manifest"]["builder_config"]["optimization_profiles"] *= 3
    del values["workload"]["metadata"]["labels"]["team"]
    values["manifest"]["builder_config"]["plugins"][1]["library_sha256"] = ""
    activation = prepare_activation(values)
    assert [program(source).evaluate_bool(activation) for source in FIVE] == [False] * 5


def test_one_activation_serves_many_programs_and_variable_sets(values: dict[str, Any]) -> None:
    activation = prepare_activation(values)
    assert [program(source).evaluate(activation) for source in FIVE] == [True] * 5
    only_workload = compile_expression("size(workload.spec.containers)", variables=["workload"])
    assert only_workload.evaluate(activation) == 3
    assert (
        dict(activation) == values and len(activation) == 2 and activation["workload"] is values["workload"]
    )


def test_results_come_back_as_plain_python(values: dict[str, Any]) -> None:
    assert program("workload.spec.containers.map(c, c.name)").evaluate(values) == [
        "server",
        "metrics",
        "logs",
    ]
    assert program("manifest.accuracy[0].value").evaluate(values) == 0.761
    assert program("manifest.builder_config.max_batch_size").evaluate(values) is None
    assert program("{'a': [1, 2u, true]}").evaluate(values) == {"a": [1, 2, True]}


def test_numbers_compare_across_int_and_double_in_the_data(values: dict[str, Any]) -> None:
    assert program("manifest.accuracy.all(m, m.value < 1)").evaluate_bool(values) is True
    assert program("manifest.builder_config.builder_optimization_level == 3.0").evaluate_bool(values) is True


def test_build_timestamp_compares_through_timestamp(values: dict[str, Any]) -> None:
    after = program('timestamp(manifest.build_timestamp) > timestamp("2026-01-01T00:00:00Z")')
    assert after.evaluate_bool(values) is True
    values["manifest"]["build_timestamp"] = "2025-12-31T23:00:00-02:00"  # 2026-01-01T01:00Z
    assert after.evaluate_bool(values) is True
    values["manifest"]["build_timestamp"] = "2025-12-31T23:00:00+02:00"  # 2025-12-31T21:00Z
    assert after.evaluate_bool(values) is False


def test_durations_and_timestamp_results(values: dict[str, Any]) -> None:
    young = compile_expression(
        'timestamp(now) - timestamp(manifest.build_timestamp) < duration("4320h")',
        variables=["manifest", "now"],
    )
    assert young.evaluate_bool({**values, "now": "2026-06-01T00:00:00Z"}) is True
    assert young.evaluate_bool({**values, "now": "2027-06-01T00:00:00Z"}) is False
    later = program('timestamp(manifest.build_timestamp) + duration("1h")').evaluate(values)
    assert later == dt.datetime(2026, 3, 1, 13, tzinfo=dt.UTC)


def test_a_malformed_timestamp_is_an_evaluation_error(values: dict[str, Any]) -> None:
    values["manifest"]["build_timestamp"] = "yesterday"
    with pytest.raises(CelEvaluationError, match="Timestamp"):
        program("timestamp(manifest.build_timestamp) > timestamp('2026-01-01T00:00:00Z')").evaluate(values)


def test_a_real_admission_review_object_evaluates(shared_fixtures: Path) -> None:
    review = json.loads(
        (shared_fixtures / "admission" / "kubewarden-deployment_update_bare_request.json").read_text()
    )
    deployment = review["object"]
    rule = compile_expression(
        "workload.spec.template.spec.containers.all(c, c.image != '')"
        " && has(workload.metadata.managedFields)",
        variables=["workload"],
    )
    assert rule.evaluate_bool({"workload": deployment}) is True


def test_programs_and_a_shared_activation_are_safe_across_threads(values: dict[str, Any]) -> None:
    programs = [program(source) for source in FIVE]
    counting = compile_expression("size(w.items.filter(i, i % 2 == 0))", variables=["w"])
    shared = prepare_activation(values)
    barrier = threading.Barrier(8)

    def work(worker: int) -> list[Any]:
        barrier.wait(timeout=30)
        results: list[Any] = []
        for round_ in range(200):
            results.extend(p.evaluate(shared) for p in programs)
            items = list(range(worker * 7 + round_ % 5))
            results.append(counting.evaluate({"w": {"items": items}}) == len(items[::2]))
        return results

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(work, range(8), timeout=120))
    assert all(all(result is True for result in outcome) for outcome in outcomes)
    assert sum(len(outcome) for outcome in outcomes) == 8 * 200 * 6


def test_compiling_from_threads_gives_working_programs(values: dict[str, Any]) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        programs = list(pool.map(program, FIVE * 8, timeout=120))
    assert [p.evaluate(values) for p in programs] == [True] * 40
