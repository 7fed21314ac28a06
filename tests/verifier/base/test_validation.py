"""verifier.base._validation: pydantic errors → one line per problem with path, expected and value."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from verifier.base._errors import InputError
from verifier.base._validation import (
    field_problems,
    format_path,
    input_error_from_validation,
    short_repr,
    shorten,
)


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    size: int = Field(ge=0)


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["weak", "strong"]
    items: list[Inner] = []
    by_name: dict[str, Inner] = {}
    low: int = 0
    high: int = 0

    @model_validator(mode="after")
    def _ordered(self) -> Outer:
        if self.low > self.high:
            raise PydanticCustomError(
                "ordered",
                "a value no larger than high ({high})",
                {"field": "low", "got": self.low, "high": self.high},
            )
        return self


def _error(data: Any, model: type[BaseModel] = Outer) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value


@pytest.mark.parametrize(
    ("loc", "text"),
    [
        ((), "(top level)"),
        (("a",), "a"),
        (("a", 0, "b"), "a[0].b"),
        (("inputs", "input.1", "max"), 'inputs["input.1"].max'),
        (("labels", "app", "[key]"), "labels.app (key)"),
        ((0,), "[0]"),
    ],
)
def test_format_path(loc: tuple[str | int, ...], text: str) -> None:
    assert format_path(loc) == text


def test_shorten_truncates_and_escapes_non_ascii() -> None:
    assert shorten("x" * 200, 20) == '"' + "x" * 16 + "..."
    assert len(shorten("x" * 200, 20)) == 20
    # A Cyrillic look-alike letter in an image name shows as an escape, so it is visible.
    assert shorten("ngin\u0445") == '"ngin\\u0445"'
    assert shorten({"a": [1, 2]}) == '{"a": [1, 2]}'


def test_each_problem_has_path_expected_and_value() -> None:
    error = _error({"kind": "mixed", "items": [{"name": "a", "size": -1}], "by_name": {"x.y": {"size": 1}}})
    problems = {problem.path: problem for problem in field_problems(error)}
    assert set(problems) == {"kind", "items[0].size", 'by_name["x.y"].name'}
    assert problems["kind"].expected == "'weak' or 'strong'"
    assert problems["kind"].got == '"mixed"'
    assert problems["items[0].size"].expected == "greater than or equal to 0"
    assert problems["items[0].size"].got == "-1"
    missing = problems['by_name["x.y"].name']
    assert missing.expected == "a value (this field is required)"
    assert missing.got is None
    assert str(missing) == 'by_name["x.y"].name: expected a value (this field is required)'
    assert str(problems["kind"]) == "kind: expected 'weak' or 'strong'; got \"mixed\""


def test_unknown_field_gets_a_suggestion_when_the_model_is_given() -> None:
    error = _error({"kind": "weak", "itmes": [], "items": [{"name": "a", "size": 1, "sise": 2}]})
    plain = {problem.path: problem.expected for problem in field_problems(error)}
    assert plain["itmes"] == "no field of this name (unknown field)"
    suggested = {problem.path: problem.expected for problem in field_problems(error, model=Outer)}
    assert suggested["itmes"] == "no field of this name (did you mean 'items'?)"
    assert suggested["items[0].sise"] == "no field of this name (did you mean 'size'?)"


def test_unknown_field_far_from_any_name_gets_no_suggestion() -> None:
    error = _error({"kind": "weak", "zzzzzz": 1})
    (problem,) = field_problems(error, model=Outer)
    assert problem.expected == "no field of this name (unknown field)"
    assert problem.got == "1"


def test_cross_field_rule_points_at_its_sub_field() -> None:
    error = _error({"kind": "weak", "low": 5, "high": 2})
    (problem,) = field_problems(error)
    assert problem.path == "low"
    assert problem.expected == "a value no larger than high (2)"
    assert problem.got == "5"


def test_prefix_is_prepended() -> None:
    error = _error({"kind": 1})
    (problem,) = field_problems(error, prefix=("predicate",))
    assert problem.path == "predicate.kind"
    assert problem.loc == ("predicate", "kind")


def test_type_errors_read_as_expectations() -> None:
    error = _error({"kind": "weak", "items": "nope", "low": "x"})
    expected = {problem.path: problem.expected for problem in field_problems(error)}
    assert expected["items"] == "a list"
    assert expected["low"] == "a valid integer, unable to parse string as an integer"


def test_input_error_lists_every_problem() -> None:
    error = _error({"kind": "mixed", "items": [{"name": 3}]})
    converted = input_error_from_validation(error, "build.json", what="engine build manifest")
    assert isinstance(converted, InputError)
    assert converted.exit_code == 2
    assert converted.location == "build.json"
    assert converted.message.splitlines() == [
        "engine build manifest is not valid (3 problems):",
        "  kind: expected 'weak' or 'strong'; got \"mixed\"",
        "  items[0].name: expected a string; got 3",
        "  items[0].size: expected a value (this field is required)",
    ]
    assert converted.hint == "correct the fields listed above"
    assert converted.diagnostics().startswith("build.json: engine build manifest is not valid (3 problems):")


def test_locate_adds_positions() -> None:
    error = _error({"kind": "mixed"})
    lines: dict[tuple[str | int, ...], str] = {("spec", "kind"): "policy.yaml:7"}
    converted = input_error_from_validation(
        error, "policy.yaml", prefix=("spec",), locate=lines.get, hint="see policies/README.md"
    )
    assert (
        converted.message.splitlines()[1]
        == "  policy.yaml:7: spec.kind: expected 'weak' or 'strong'; got \"mixed\""
    )
    assert converted.hint == "see policies/README.md"


def test_long_lists_of_problems_are_capped() -> None:
    error = _error({"kind": "weak", "items": [{"name": 1, "size": 1}] * 60})
    converted = input_error_from_validation(error, "x.json")
    lines = converted.message.splitlines()
    assert lines[0] == "document is not valid (60 problems):"
    assert len(lines) == 1 + 50 + 1
    assert lines[-1] == "  ... and 10 more"


def test_shortening_renders_only_what_it_shows() -> None:
    # 150,000 references to one 60 KB string: 9 GB if rendered whole before being cut
    huge = {"args": ["x" * 60_000] * 150_000, "more": list(range(10))}
    assert shorten(huge) == '{"args": ["' + "x" * 66 + "..."
    assert short_repr(huge) == "{'args': ['" + "x" * 46 + "..."
    assert shorten({"a": [1, 2.5, None, True], "b": "é"}) == '{"a": [1, 2.5, null, true], "b": "\\u00e9"}'
    assert short_repr({"a": (1,), "b": b"x"}) == "{'a': (1,), 'b': b'x'}"
    nested: dict[str, object] = {}
    node = nested
    for _ in range(100_000):  # deeper than any recursion limit
        child: dict[str, object] = {}
        node["k"] = child
        node = child
    assert shorten(nested).startswith('{"k": {"k": ')
