"""policies/cel/__init__.py: compile errors with positions, declared variables, limits, evaluation."""

from __future__ import annotations

import copy
import datetime as dt
import enum
import json
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from policies.cel import (
    COMPREHENSION_ITERATION_BUDGET,
    CelActivation,
    CelCompileError,
    CelEvaluationError,
    CelLimits,
    CelProgram,
    _check_shape,
    compile_expression,
    prepare_activation,
)
from verifier.errors import InputError, TrtguardError

VARIABLES = ("manifest", "workload")


@pytest.fixture(scope="module")
def manifest(data_dir: Path) -> dict[str, Any]:
    return dict(json.loads((data_dir / "400-cel-engine-manifest.json").read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def workload(data_dir: Path) -> dict[str, Any]:
    return dict(json.loads((data_dir / "401-cel-pod-three-containers.json").read_text(encoding="utf-8")))


@pytest.fixture
def values(manifest: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    # a deep copy per test: some tests change the data
    return {"manifest": copy.deepcopy(manifest), "workload": copy.deepcopy(workload)}


def program(source: str, **kwargs: Any) -> CelProgram:
    return compile_expression(source, variables=VARIABLES, **kwargs)


def compile_error(source: str, **kwargs: Any) -> CelCompileError:
    with pytest.raises(CelCompileError) as caught:
        compile_expression(source, variables=kwargs.pop("variables", VARIABLES), **kwargs)
    return caught.value


# --------------------------------------------------------------------------------------------------
# The five policy expressions of the issue, on a realistic manifest and Pod.

FIVE = [
    "manifest.builder_config.max_workspace_size <= 4 * 1024 * 1024 * 1024",
    'manifest.accuracy.exists(m, m.metric == "top1_acc" && m.value >= 0.75)',
    "size(manifest.builder_config.optimization_profiles) <= 4",
    'workload.metadata.namespace.startsWith("prod") && has(workload.metadata.labels.team)',
    'manifest.builder_config.plugins.all(p, p.library_sha256 != "")',
]


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


# --------------------------------------------------------------------------------------------------
# Times: RFC 3339 strings handed in, compared through timestamp().


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


# --------------------------------------------------------------------------------------------------
# Compile errors: where, what, and what to do.


def test_syntax_error_points_at_file_line_column() -> None:
    error = compile_error("manifest.audit_id ==", location="policies/prod.yaml:12")
    assert error.location == "policies/prod.yaml:12:21"
    assert (error.line, error.column) == (1, 21)
    assert error.expression == "manifest.audit_id =="
    assert "Syntax error" in error.message
    assert error.message.splitlines()[1:] == ["    manifest.audit_id ==", " " * 24 + "^"]
    assert error.hint is not None and "syntax" in error.hint
    assert isinstance(error, InputError) and error.exit_code == 2
    assert error.diagnostics().startswith("policies/prod.yaml:12:21: invalid CEL expression: Syntax error")


def test_error_on_a_later_line_of_the_expression_moves_the_file_line() -> None:
    source = 'manifest.audit_id != "" &&\n  wrkload.metadata.namespace == "prod"'
    error = compile_error(source, location="policy.yaml:40 spec.models.rules.expressions[1].cel")
    assert (error.line, error.column) == (2, 3)  # where the unknown name starts
    assert error.location == "policy.yaml:41:3 spec.models.rules.expressions[1].cel"
    assert "    " + source.splitlines()[1] in error.message


def test_location_forms() -> None:
    assert compile_error("manifest +").location == "<cel>:1:11"
    assert compile_error("manifest +", location="policy.yaml").location == "policy.yaml (expression 1:11)"
    assert (
        compile_error("manifest +", location=r"C:\policies\p.yaml:7").location == r"C:\policies\p.yaml:7:11"
    )


def test_columns_count_code_points_not_bytes() -> None:
    error = compile_error("'héllo€' == nosuch")
    assert error.column == 13
    assert error.message.splitlines()[2] == "    " + " " * 12 + "^"


def test_unknown_variable_is_a_compile_error_naming_the_declared_ones() -> None:
    error = compile_error("wrkload.metadata.namespace == 'prod'", location="p.yaml:3")
    assert "unknown name 'wrkload'" in error.message
    assert error.hint == "the variables here are manifest, workload; check the spelling"
    assert error.location == "p.yaml:3:1"


def test_unknown_function_and_several_unknowns_are_all_reported() -> None:
    assert "unknown name 'sha256'" in compile_error("sha256(manifest.audit_id) == ''").message
    error = compile_error("a + b == c")
    assert error.location == "<cel>:1:1"
    assert "unknown name 'a'" in error.message
    assert "also 1:5: unknown name 'b'" in error.message and "also 1:10: unknown name 'c'" in error.message


def test_only_the_declared_variables_exist() -> None:
    compile_expression("manifest.audit_id != ''", variables=["manifest"])
    error = compile_error("workload.kind == 'Pod'", variables=["manifest"])
    assert "unknown name 'workload'" in error.message


def test_type_errors_the_checker_can_see_are_compile_errors() -> None:
    error = compile_error("manifest.audit_id + 1 == 'x' + 1")
    assert "no matching overload" in error.message
    assert error.hint is not None and "converts no types" in error.hint


def test_expect_bool_rejects_expressions_of_another_known_type() -> None:
    error = compile_error("size(manifest.accuracy) + 1", expect_bool=True, location="p.yaml:9")
    assert "yields int" in error.message and error.location == "p.yaml:9:1"
    program("manifest.version_compatible", expect_bool=True)  # dyn: checked when evaluated
    program("size(manifest.accuracy) + 1")  # without expect_bool any type is fine


def test_a_lone_surrogate_in_the_source_is_a_compile_error() -> None:
    error = compile_error('manifest.audit_id == "a\ud800"', location="p.json:3")
    assert "not valid Unicode" in error.message and error.location == "p.json:3:24"


def test_a_lone_surrogate_in_the_data_is_an_evaluation_error() -> None:
    rule = compile_expression("m.a == 'x'", variables=["m"])
    with pytest.raises(CelEvaluationError) as caught:
        rule.evaluate({"m": {"a": "\ud800"}})
    assert caught.value.hint is not None and "Unicode" in caught.value.hint


def test_variable_names_must_be_identifiers() -> None:
    with pytest.raises(ValueError, match="cannot be a CEL variable name"):
        compile_expression("true", variables=["build-manifest"])


# --------------------------------------------------------------------------------------------------
# Static limits.


def test_source_length_limit() -> None:
    error = compile_error("manifest.audit_id == 'x'", limits=CelLimits(max_length=10), location="p.yaml:2")
    assert "24 characters long; the limit is 10" in error.message and error.location == "p.yaml:2:1"


def test_node_limit() -> None:
    # 4 nodes per comparison (==, select, identifier, constant) and 9 for the ||
    source = " || ".join(f"manifest.audit_id == '{i}'" for i in range(10))
    program(source, limits=CelLimits(max_nodes=49))
    assert "more than 48 nodes" in compile_error(source, limits=CelLimits(max_nodes=48)).message


def test_depth_limit() -> None:
    source = "manifest" + ".a" * 20 + " == 1"
    program(source, limits=CelLimits(max_depth=23))
    assert "deeper than 20 levels" in compile_error(source, limits=CelLimits(max_depth=20)).message


def test_the_parser_recursion_limit_is_reported_at_the_start() -> None:
    error = compile_error(" + ".join(["1"] * 60) + " == 0", location="p.yaml:4")
    assert error.location == "p.yaml:4:1"
    assert "recursion depth" in error.message and error.message.count("recursion depth") == 1
    assert error.hint is not None and "parentheses" in error.hint


def test_the_parser_nesting_limit_is_reported_without_status_codes() -> None:
    error = compile_error("(" * 40 + "manifest.audit_id" + ")" * 40 + " == ''")
    assert error.message.startswith(
        "invalid CEL expression: Expression recursion limit exceeded. limit: 32\n"
    )
    assert error.hint is not None and "parentheses" in error.hint


def test_two_nested_comprehensions_are_allowed() -> None:
    source = "workload.spec.containers.all(c, c.ports.all(p, p.containerPort > 1024))"
    assert program(source).evaluate_bool(
        {"workload": {"spec": {"containers": [{"ports": [{"containerPort": 8000}]}]}}}
    )


def test_a_third_nested_comprehension_is_rejected_where_it_starts() -> None:
    source = "workload.spec.containers.all(c,\n  c.ports.all(p,\n    c.env.exists(e, e.name == p.name)))"
    error = compile_error(source, location="p.yaml:30")
    assert "more than 2 comprehensions" in error.message
    assert (error.line, error.column) == (3, 17) and error.location == "p.yaml:32:17"


def test_chained_macros_count_as_nested() -> None:
    # the range of a comprehension is evaluated inside it, as cel-go's nesting validator counts
    chained = "manifest.accuracy.filter(m, m.value > 0.5).map(m, m.metric).exists(x, x == 'top1_acc')"
    assert "more than 2 comprehensions" in compile_error(chained).message
    program(chained, limits=CelLimits(max_comprehension_nesting=3))


def test_an_ast_that_cannot_be_read_is_refused_not_skipped() -> None:
    with pytest.raises(CelCompileError, match="cannot measure the expression") as caught:
        _check_shape(b"\xff\xff\xff", "manifest.audit_id", "p.yaml:8", CelLimits())
    assert caught.value.location == "p.yaml:8:1"


def test_comprehensions_over_an_empty_list_literal_cost_nothing() -> None:
    assert program("[].all(x, [].all(y, [].all(z, true)))").evaluate({}) is True


# --------------------------------------------------------------------------------------------------
# Evaluation errors: typed, located, with a hint; never a silent pass.


def test_a_missing_key_is_an_error_not_false(values: dict[str, Any]) -> None:
    rule = program("manifest.calibration_v2.dataset.sha256 != ''", location="p.yaml:5")
    with pytest.raises(CelEvaluationError) as caught:
        rule.evaluate_bool(values)
    error = caught.value
    assert 'Key not found in map : "calibration_v2"' in error.message and error.location == "p.yaml:5"
    assert error.hint is not None and "has(" in error.hint
    assert (
        program("has(manifest.calibration_v2) && manifest.calibration_v2 != ''").evaluate_bool(values)
        is False
    )


@pytest.mark.parametrize(
    ("source", "detail"),
    [
        ("manifest.output_engine.size / 0 > 1", "divide by zero"),
        ("manifest.output_engine.size * 9223372036854775807 > 0", "overflow"),
        ("manifest.audit_id > 3", "No matching overload"),
        ("workload.spec.containers[7].name == 'x'", "Index"),
        ("workload.metadata.name.matches('(')", "regular expression"),
    ],
)
def test_runtime_errors_are_evaluation_errors(source: str, detail: str, values: dict[str, Any]) -> None:
    with pytest.raises(CelEvaluationError, match=detail) as caught:
        program(source).evaluate(values)
    assert isinstance(caught.value, TrtguardError) and caught.value.hint
    assert source in caught.value.message


def test_errors_inside_logic_follow_the_spec(values: dict[str, Any]) -> None:
    # && and || absorb an error when the other side decides the result, in either order
    assert program("manifest.nosuch == 1 || true").evaluate_bool(values) is True
    assert program("false && manifest.nosuch == 1").evaluate_bool(values) is False
    with pytest.raises(CelEvaluationError):
        program("manifest.nosuch == 1 || false").evaluate_bool(values)


def test_a_variable_not_handed_in_is_an_evaluation_error(values: dict[str, Any]) -> None:
    with pytest.raises(CelEvaluationError, match="workload") as caught:
        program("workload.kind == 'Pod'").evaluate({"manifest": values["manifest"]})
    assert caught.value.hint is not None and "bug" in caught.value.hint


def test_the_comprehension_budget_stops_an_evaluation() -> None:
    rule = compile_expression("w.all(x, w.all(y, x + y >= 0))", variables=["w"])
    assert rule.evaluate_bool({"w": list(range(99))}) is True  # 99 * 99 + 99 <= 10,000
    with pytest.raises(
        CelEvaluationError, match=f"{COMPREHENSION_ITERATION_BUDGET} comprehension iterations"
    ):
        rule.evaluate_bool({"w": list(range(100))})


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("size(manifest.accuracy)", "int 2"),
        ("manifest.audit_id", "str 'AUD-2026-0042'"),
        ("manifest.builder_config.max_batch_size", "NoneType None"),
        ("manifest.builder_config.precision_flags", "list ['fp16', 'int8']"),
    ],
)
def test_evaluate_bool_never_takes_a_non_bool_for_true(
    source: str, shown: str, values: dict[str, Any]
) -> None:
    with pytest.raises(CelEvaluationError, match="not true or false") as caught:
        program(source).evaluate_bool(values)
    assert shown in caught.value.message


# --------------------------------------------------------------------------------------------------
# Data handed in: bounded before cel-cpp sees it.


def test_a_list_over_the_limit_is_named_by_its_path(values: dict[str, Any]) -> None:
    values["workload"]["spec"]["containers"][1]["env"] = [{"name": f"V{i}", "value": "x"} for i in range(11)]
    with pytest.raises(CelEvaluationError) as caught:
        prepare_activation(values, limits=CelLimits(max_list_length=10))
    assert "a list of 11 items (limit 10) at workload.spec.containers[1].env" in caught.value.message
    assert caught.value.hint is not None and "CelLimits" in caught.value.hint


def test_a_string_over_the_limit_is_refused(values: dict[str, Any]) -> None:
    values["workload"]["metadata"]["annotations"]["big"] = "x" * 65_537
    with pytest.raises(CelEvaluationError, match=r"string of 65537 characters \(limit 65536\)"):
        program(FIVE[0]).evaluate(values)
    values["workload"]["metadata"]["annotations"]["big"] = "x" * 65_536
    assert program(FIVE[0]).evaluate(values) is True


def test_too_many_values_in_all(values: dict[str, Any]) -> None:
    with pytest.raises(CelEvaluationError, match="more than 100 values in all"):
        prepare_activation(values, limits=CelLimits(max_values=100))


def test_too_much_text_in_all(values: dict[str, Any]) -> None:
    values["workload"]["metadata"]["annotations"] = {f"k{i}": "é" * 60_000 for i in range(70)}
    with pytest.raises(CelEvaluationError, match="more than 4194304 characters of text in all at workload"):
        prepare_activation(values)
    values["workload"]["metadata"]["annotations"] = {f"k{i}": "é" * 60_000 for i in range(69)}
    assert isinstance(prepare_activation(values), CelActivation)


def test_deep_nesting_is_refused_before_it_can_crash_cel_cpp() -> None:
    # cel-cpp converts nested data recursively and dies of a stack overflow at about 10,000 levels
    deep: Any = 1
    for _ in range(20_000):
        deep = [deep]
    rule = compile_expression("size(w) == 1", variables=["w"])
    with pytest.raises(CelEvaluationError, match="nesting deeper than 64 levels at w"):
        rule.evaluate({"w": deep})
    shallow: Any = 1
    for _ in range(63):
        shallow = [shallow]
    assert rule.evaluate_bool({"w": shallow}) is True


@pytest.mark.parametrize(
    ("value", "kind"),
    [(object(), "object"), ({1, 2}, "set"), (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "datetime")],
)
def test_values_cel_cannot_represent_are_refused_with_their_path(value: object, kind: str) -> None:
    with pytest.raises(CelEvaluationError) as caught:
        prepare_activation({"manifest": {"build": [{"when": value}]}})
    assert f"manifest.build[0].when is a {kind}" in caught.value.message
    assert caught.value.hint is not None and "mode='json'" in caught.value.hint


class Precision(enum.StrEnum):
    INT8 = "int8"


def test_tuples_other_mappings_and_enum_members_are_copied_into_plain_data() -> None:
    values: Mapping[str, Any] = {
        "manifest": MappingProxyType(
            {"builder_config": MappingProxyType({"precision_flags": (Precision.INT8, "fp16")})}
        )
    }
    rule = compile_expression("'int8' in manifest.builder_config.precision_flags", variables=["manifest"])
    assert rule.evaluate_bool(values) is True
    assert isinstance(prepare_activation(values), CelActivation)


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


# --------------------------------------------------------------------------------------------------
# Threads: the evaluator may run programs from a thread pool (cel-cpp releases the GIL while it works).


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
