"""policies.cel._program: evaluation errors, typed and located, with a hint; never a silent pass."""

from __future__ import annotations

from typing import Any

import pytest

from policies.cel import COMPREHENSION_ITERATION_BUDGET, CelEvaluationError, compile_expression
from tests.policies.cel.conftest import program
from verifier.base._errors import TrtguardError


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
