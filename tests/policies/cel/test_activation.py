"""policies.cel._activation: the data handed in, bounded before cel-cpp sees it."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from policies.cel import CelActivation, CelEvaluationError, CelLimits, compile_expression, prepare_activation
from tests.policies.cel.conftest import FIVE, program


def test_a_lone_surrogate_in_the_data_is_an_evaluation_error() -> None:
    rule = compile_expression("m.a == 'x'", variables=["m"])
    with pytest.raises(CelEvaluationError) as caught:
        rule.evaluate({"m": {"a": "\ud800"}})
    assert caught.value.hint is not None and "Unicode" in caught.value.hint


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
