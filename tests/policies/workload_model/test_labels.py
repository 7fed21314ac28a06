"""policies.workload_model._labels: label values and integers as Kubernetes reads them, against the upstream
test cases
(tests/data/kubernetes-label-integers) and a reference ParseInt written from Go's documentation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.workload_model._labels import is_label_value, parse_int64
from tests.conftest import DATA

CASES: dict[str, Any] = json.loads((DATA / "kubernetes-label-integers" / "cases.json").read_text())


def go_parse_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)`` from its documentation (pkg.go.dev/strconv), digit by digit.

    "The string may begin with a leading sign: "+" or "-" [...] For argument base 0 only, underscore
    characters are permitted [...] If s is empty or contains invalid digits, err.Err = ErrSyntax [...]; if
    the value corresponding to s cannot be represented by a signed integer of the given size, err.Err =
    ErrRange." Digits of base 10 are the ASCII 0-9. None stands for either error.
    """
    negative = text[:1] == "-"
    if text[:1] in ("+", "-"):
        text = text[1:]
    if not text:
        return None
    limit = 1 << 63 if negative else (1 << 63) - 1
    value = 0
    for character in text:
        if not "0" <= character <= "9":
            return None
        value = value * 10 + ord(character) - ord("0")
        if value > limit:
            return None
    return -value if negative else value


@pytest.mark.parametrize("case", CASES["parse_int64"], ids=lambda c: repr(c["in"]))
def test_parse_int64_gives_what_go_strconv_tests_expect(case: dict[str, Any]) -> None:
    expected = case["out"] if case["err"] is None else None
    assert parse_int64(case["in"]) == expected
    assert go_parse_int(case["in"]) == expected  # the reference agrees with Go's own table


def test_leading_zeros_any_number_of_them_are_read() -> None:
    # the scheduler reads `Lt 0000000000000000010` as 10 (19 characters: more than the old 18 digits)
    assert parse_int64("0000000000000000010") == 10
    assert parse_int64("0" * 5000 + "7") == 7  # past Python's limit on int() of a long string
    assert parse_int64("0" * 5000 + "x") is None


@pytest.mark.parametrize(
    "text", ["1_0", " 1", "1 ", "1\n", "\u0663", "\uff11", "+-1", "--1", "-", "+", "0x10", "1e3"]
)
def test_what_python_int_takes_and_go_does_not(text: str) -> None:
    assert parse_int64(text) is None


def _spelled(number: int, zeros: int, sign: str) -> str:
    text = str(abs(number))
    return ("-" if number < 0 else sign) + "0" * zeros + text


INTEGERS = st.integers(min_value=-(1 << 64), max_value=1 << 64)
TEXTS = st.one_of(
    st.text(alphabet="0123456789+-_ x\n\u0663\uff11", max_size=25),
    st.builds(_spelled, INTEGERS, st.integers(0, 30), st.sampled_from(["", "+"])),
    st.builds(_spelled, st.sampled_from([(1 << 63) - 1, 1 << 63, -(1 << 63), -(1 << 63) - 1]),
              st.integers(0, 3), st.sampled_from(["", "+"])),
)  # fmt: skip


@given(TEXTS)
def test_parse_int64_agrees_with_the_reference(text: str) -> None:
    assert parse_int64(text) == go_parse_int(text)


@pytest.mark.parametrize("value", CASES["label_values"]["valid"])
def test_apimachinery_label_values_are_valid(value: str) -> None:
    assert is_label_value(value)


@pytest.mark.parametrize("value", CASES["label_values"]["invalid"])
def test_apimachinery_invalid_label_values_are_invalid(value: str) -> None:
    assert not is_label_value(value)


@pytest.mark.parametrize("value", ["-5", "+5", "5\n", "\n5", "a\u0301", "9" * 64])
def test_signed_integers_and_a_final_newline_are_no_label_values(value: str) -> None:
    assert not is_label_value(value)
