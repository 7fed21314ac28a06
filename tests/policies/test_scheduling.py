"""policies.scheduling: node terms mean what they mean to the scheduler: upstream cases of apimachinery and
the scheduler's node affinity (tests/data/kubernetes-label-integers), and terms over one numeric label held
against a node-by-node reference of the scheduler's matching."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.scheduling import LabelRequirement, NodeTerm
from tests.policies.test_labels import CASES, go_parse_int

KEY = "nvidia.com/gpu.compute.major"


def term(*requirements: LabelRequirement) -> NodeTerm:
    return NodeTerm(tuple(requirements), "spec.affinity")


def requirement(data: dict[str, Any]) -> LabelRequirement:
    return LabelRequirement(data["key"], data["operator"], tuple(data["values"]))


@pytest.mark.parametrize("case", CASES["requirements"], ids=lambda c: str(c["key"]))
def test_a_term_with_a_requirement_apimachinery_refuses_matches_no_node(case: dict[str, Any]) -> None:
    found = term(requirement(case))
    assert found.matches_no_node is not case["valid"]
    if not case["valid"]:
        assert found.numbers(case["key"]).values == frozenset()
        assert found.texts(case["key"]) == frozenset()


@pytest.mark.parametrize("case", CASES["matches"], ids=lambda c: str(c["from"]))
def test_gt_and_lt_match_the_nodes_apimachinery_matches(case: dict[str, Any]) -> None:
    # The node is named by its label value (In); the term admits it when the value stays admitted.
    [(key, label)] = case["labels"].items()
    found = term(requirement(case["requirement"]), LabelRequirement(key, "In", (label,)))
    admitted = found.numbers(key).values
    assert admitted is not None
    assert bool(admitted) is case["match"]


def test_leading_zeros_do_not_make_a_bound_match_no_node() -> None:
    # Lt 0000000000000000010 is Lt 10 to the scheduler (19 characters; the old parser read 18 digits)
    found = term(LabelRequirement(KEY, "Lt", ("0000000000000000010",)))
    assert not found.matches_no_node
    assert found.numbers(KEY).values == frozenset(range(10))


def test_a_node_labelled_with_leading_zeros_is_not_excluded_by_not_in() -> None:
    # NotIn ["8"] leaves a node labelled "08" admitted: Gt 7 and Lt 9 read it as 8
    found = term(
        LabelRequirement(KEY, "Gt", ("7",)),
        LabelRequirement(KEY, "Lt", ("9",)),
        LabelRequirement(KEY, "NotIn", ("8",)),
    )
    assert found.numbers(KEY).values == frozenset({8})
    every = tuple("0" * zeros + "8" for zeros in range(63))
    spelled_out = term(*found.requirements[:2], LabelRequirement(KEY, "NotIn", every))
    assert spelled_out.numbers(KEY).values == frozenset()


@pytest.mark.parametrize("value", ["-1", "+1", "1 ", "x", "", "99999999999999999999"])
def test_a_bound_the_scheduler_refuses_voids_the_whole_term(value: str) -> None:
    # "-1" is an integer but no label value: labels.NewRequirement refuses it, as it refuses the others
    found = term(LabelRequirement("other", "Gt", (value,)), LabelRequirement(KEY, "In", ("7",)))
    assert found.matches_no_node
    assert found.numbers(KEY).values == frozenset()


def test_without_gt_or_lt_the_label_may_lack() -> None:
    assert term(LabelRequirement(KEY, "Exists")).numbers(KEY).values is None
    found = term(LabelRequirement(KEY, "Gt", ("7",)))
    assert (found.numbers(KEY).values, found.numbers(KEY).low) == (None, 8)


# --- the reference: the scheduler's matching, node by node ------------------------------------------

#: Label values of the nodes the reference tries: every number up to 40 spelled with up to three leading
#: zeros, and values that are no integer. Terms are written with at most two zeros, so each number has a
#: spelling no NotIn of a term names.
NUMBERS = range(41)
NODE_VALUES = [("0" * zeros) + str(n) for n in NUMBERS for zeros in range(4)] + ["x", "v2", "1a"]
TERM_VALUES = st.one_of(
    st.builds(lambda n, zeros: "0" * zeros + str(n), st.integers(0, 41), st.integers(0, 2)),
    st.sampled_from(["x", "-1", "+2", "", "1 "]),
)


def _scheduler_matches(requirements: Sequence[LabelRequirement], label: str | None) -> bool:
    """Whether a node whose label KEY is ``label`` (None: no such label) matches, as apimachinery says."""
    for found in requirements:
        values = found.values
        if any(v.startswith(("+", "-", " ")) or v.endswith(" ") for v in values):
            return False  # not a label value: NewRequirement refuses it (the values generated here)
        if found.operator in ("Gt", "Lt"):
            bound = go_parse_int(values[0]) if len(values) == 1 else None
            if bound is None:
                return False
            number = go_parse_int(label) if label is not None else None
            if number is None or not (number > bound if found.operator == "Gt" else number < bound):
                return False
        elif (label in values) is (found.operator == "NotIn"):
            return False  # In without the label's value, NotIn with it
    return True


def _requirement(operator: str, values: list[str]) -> LabelRequirement:
    return LabelRequirement(KEY, operator, tuple(values[:1] if operator in ("Gt", "Lt") else values))


REQUIREMENTS = st.lists(
    st.builds(
        _requirement,
        st.sampled_from(["Gt", "Lt", "In", "NotIn"]),
        st.lists(TERM_VALUES, min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=4,
)


@given(REQUIREMENTS)
def test_numbers_are_the_integers_of_the_nodes_the_scheduler_matches(
    requirements: list[LabelRequirement],
) -> None:
    admitted = term(*requirements).numbers(KEY)
    matched = {
        number
        for label in NODE_VALUES
        if _scheduler_matches(requirements, label) and (number := go_parse_int(label)) is not None
    }
    if admitted.values is not None:
        assert admitted.values == matched
    else:  # unbounded above: every matched number is at least the lower bound, and the largest node value
        # matches unless the bound is above it (Gt 40: no node here; 0040 is spelled as no NotIn names it)
        assert all(admitted.low is None or n >= admitted.low for n in matched)
        if admitted.low is None or admitted.low <= max(NUMBERS):
            assert max(NUMBERS) in matched
