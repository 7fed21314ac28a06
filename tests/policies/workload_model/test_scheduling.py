"""policies.workload_model._scheduling: node terms mean what they mean to the scheduler: upstream cases of
apimachinery and
the scheduler's node affinity (tests/data/kubernetes-label-integers), terms over one numeric label held
against a node-by-node reference of the scheduler's matching, and GPU fit (policies.rules._gpu.misfit) over
whole node selections held against a brute-force enumeration of a small universe of nodes."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.rules._gpu import AMPERE_OR_NEWER, MAJOR_LABEL, MINOR_LABEL, PRODUCT_LABEL, GpuFit, misfit
from policies.workload_model._labels import INT64_MAX
from policies.workload_model._scheduling import Admitted, LabelRequirement, NodeTerm, read_node_selection
from tests.policies.workload_model.test_labels import CASES, go_parse_int

KEY = "nvidia.com/gpu.compute.major"


def term(*requirements: LabelRequirement) -> NodeTerm:
    return NodeTerm(tuple(requirements), "spec.affinity")


def requirement(data: dict[str, Any]) -> LabelRequirement:
    return LabelRequirement(data["key"], data["operator"], tuple(data["values"]))


def integers(admitted: Admitted) -> frozenset[int] | None:
    """The integers admitted, when that is all a node may have there and they are few enough to list."""
    if admitted.others or admitted.count > 1000:
        return None
    return frozenset(admitted.smallest(admitted.count))


@pytest.mark.parametrize("case", CASES["requirements"], ids=lambda c: str(c["key"]))
def test_a_term_with_a_requirement_apimachinery_refuses_matches_no_node(case: dict[str, Any]) -> None:
    found = term(requirement(case))
    assert found.matches_no_node is not case["valid"]
    if not case["valid"]:
        assert found.numbers(case["key"]).empty
        assert found.texts(case["key"]) == frozenset()


@pytest.mark.parametrize("case", CASES["matches"], ids=lambda c: str(c["from"]))
def test_gt_and_lt_match_the_nodes_apimachinery_matches(case: dict[str, Any]) -> None:
    # The node is named by its label value (In); the term admits it when the value stays admitted.
    [(key, label)] = case["labels"].items()
    found = term(requirement(case["requirement"]), LabelRequirement(key, "In", (label,)))
    admitted = found.numbers(key)
    assert not admitted.others
    assert (admitted.count > 0) is case["match"]
    assert found.matches_no_node is not case["match"]  # the node's value is the only one the term admits


def test_leading_zeros_do_not_make_a_bound_match_no_node() -> None:
    # Lt 0000000000000000010 is Lt 10 to the scheduler (19 characters; the old parser read 18 digits)
    found = term(LabelRequirement(KEY, "Lt", ("0000000000000000010",)))
    assert not found.matches_no_node
    assert integers(found.numbers(KEY)) == frozenset(range(10))


def test_a_node_labelled_with_leading_zeros_is_not_excluded_by_not_in() -> None:
    # NotIn ["8"] leaves a node labelled "08" admitted: Gt 7 and Lt 9 read it as 8
    found = term(
        LabelRequirement(KEY, "Gt", ("7",)),
        LabelRequirement(KEY, "Lt", ("9",)),
        LabelRequirement(KEY, "NotIn", ("8",)),
    )
    assert integers(found.numbers(KEY)) == frozenset({8})
    every = tuple("0" * zeros + "8" for zeros in range(63))
    spelled_out = term(*found.requirements[:2], LabelRequirement(KEY, "NotIn", every))
    assert spelled_out.numbers(KEY).empty and spelled_out.matches_no_node


@pytest.mark.parametrize("value", ["-1", "+1", "1 ", "x", "", "99999999999999999999"])
def test_a_bound_the_scheduler_refuses_voids_the_whole_term(value: str) -> None:
    # "-1" is an integer but no label value: labels.NewRequirement refuses it, as it refuses the others
    found = term(LabelRequirement("other", "Gt", (value,)), LabelRequirement(KEY, "In", ("7",)))
    assert found.matches_no_node
    assert found.numbers(KEY).empty


def test_without_in_gt_or_lt_the_label_may_lack() -> None:
    assert term(LabelRequirement(KEY, "Exists")).numbers(KEY).others
    found = term(LabelRequirement(KEY, "Gt", ("7",))).numbers(KEY)
    assert not found.others and (found.least(), found.high) == (8, INT64_MAX)
    # an In value that is no integer is a node whose GPU is unknown
    mixed = term(LabelRequirement(KEY, "In", ("9", "x"))).numbers(KEY)
    assert mixed.others and mixed.listed == frozenset({9}) and not mixed.within((9,))
    # two spellings of one integer are two values, and both are integers (hypothesis found this)
    spellings = term(LabelRequirement(KEY, "In", ("9", "09"))).numbers(KEY)
    assert not spellings.others and spellings.within((9,))


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
    named = [v for r in requirements for v in r.values if v not in NODE_VALUES]  # In 41: a node has it
    matched = {
        number
        for label in NODE_VALUES + named
        if _scheduler_matches(requirements, label) and (number := go_parse_int(label)) is not None
    }
    if admitted.listed is not None or admitted.count <= 1000:
        assert frozenset(admitted.smallest(admitted.count)) == matched
    else:  # unbounded above: every matched number is at least the lower bound, and the largest node value
        # matches unless the bound is above it (Gt 40: no node here; 0040 is spelled as no NotIn names it)
        assert all(n >= admitted.low for n in matched)
        if admitted.low <= max(NUMBERS):
            assert max(NUMBERS) in matched
    # anything else a node may have there: no label at all, or a value that is no integer (the empty one too)
    elsewhere = [None, "", *(label for label in NODE_VALUES if go_parse_int(label) is None)]
    assert admitted.others is any(_scheduler_matches(requirements, label) for label in elsewhere)


# --- GPU fit over whole node selections, against every node of a small universe -----------------------

MAJOR, MINOR, PRODUCT, OTHER = MAJOR_LABEL, MINOR_LABEL, PRODUCT_LABEL, "node-role.example.com/inference"
H200 = "NVIDIA-H200"
BIG = str(INT64_MAX)
#: What terms are written with: a few numbers around the build GPU's 9.0 with at most one leading zero,
#: the int64 edges, and values the scheduler refuses (a sign, a space, an overflow, an empty value).
NUMERIC_VALUES = st.one_of(
    st.builds(lambda n, zeros: "0" * zeros + str(n), st.integers(0, 12), st.integers(0, 1)),
    st.sampled_from([BIG, str(INT64_MAX - 1), str(INT64_MAX + 1), "0" * 30 + BIG, "x"]),
    st.sampled_from(["-1", "+8", "8 ", "", "-9223372036854775808"]),
)
TEXT_VALUES = {
    MAJOR: NUMERIC_VALUES,
    MINOR: NUMERIC_VALUES,
    PRODUCT: st.sampled_from([H200, "NVIDIA-A100", "9", "bad value"]),
    OTHER: st.sampled_from(["a", "b"]),
}
#: The label values of the universe's nodes besides those the terms name (None: the node lacks the
#: label): numbers spelled with two leading zeros (which no term names), and values that are no integer
#: and that no term names. Each Gt/Lt bound adds the numbers just inside it (:func:`_nodes`).
UNIVERSE: dict[str, list[str | None]] = {
    MAJOR: [None, "zz", "x", "000", "007", "008", "009", "0010", "00" + BIG],
    MINOR: [None, "zz", "x", "000", "001", "002", "00" + BIG],
    PRODUCT: [None, "zz", H200, "NVIDIA-A100"],
    OTHER: [None, "zz"],
}
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


@st.composite
def expressions(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(list(TEXT_VALUES)))
    operator = draw(st.sampled_from(OPERATORS))
    count = {"Exists": 0, "DoesNotExist": 0, "Gt": 1, "Lt": 1}.get(operator, draw(st.integers(1, 3)))
    count = draw(st.sampled_from([count, count, count, count + 1]))  # now and then one the scheduler refuses
    return {
        "key": key,
        "operator": operator,
        "values": draw(st.lists(TEXT_VALUES[key], min_size=count, max_size=count)),
    }


SPECS = st.fixed_dictionaries(
    {
        "nodeSelector": st.dictionaries(
            st.sampled_from([MAJOR, MINOR, PRODUCT]), st.sampled_from(["9", "0", "8", H200]), max_size=2
        ),
        "terms": st.lists(st.lists(expressions(), max_size=5), min_size=1, max_size=3),
    }
)
FITS = {"same capability": GpuFit(9, 0, H200, False, "H200"), "ampere_plus": GpuFit(9, 0, H200, True, "H200")}


def _valid(found: dict[str, Any]) -> bool:
    """Whether apimachinery's NewRequirement takes the requirement (from its source, not trtguard's)."""
    values = found["values"]
    if any(not _LABEL_VALUE.fullmatch(v) or len(v) > 63 for v in values):
        return False
    if found["operator"] in ("In", "NotIn"):
        return len(values) > 0
    if found["operator"] in ("Exists", "DoesNotExist"):
        return not values
    return len(values) == 1 and go_parse_int(values[0]) is not None


def _holds(found: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a node with ``labels`` meets the requirement, as labels.Requirement.Matches says."""
    has, value, operator = found["key"] in labels, labels.get(found["key"]), found["operator"]
    if operator == "In":
        return has and value in found["values"]
    if operator == "NotIn":
        return not has or value not in found["values"]
    if operator in ("Exists", "DoesNotExist"):
        return has is (operator == "Exists")
    number = go_parse_int(value) if value is not None else None
    bound = go_parse_int(found["values"][0])
    assert bound is not None
    return number is not None and (number > bound if operator == "Gt" else number < bound)


def _fits(fit: GpuFit, labels: dict[str, str]) -> bool:
    """Whether the engine loads on the node's GPU, by the labels GPU Feature Discovery writes."""
    major, minor = (go_parse_int(labels[k]) if k in labels else None for k in (MAJOR, MINOR))
    if fit.ampere_plus:  # a product label GPU Feature Discovery writes only for Ampere or newer says so too
        ampere = AMPERE_OR_NEWER | ({fit.product} if fit.major >= 8 else set())
        return labels.get(PRODUCT) in ampere or (major is not None and major >= 8)
    return labels.get(PRODUCT) == fit.product or (major, minor) == (fit.major, fit.minor)


def _nodes(spec: dict[str, Any]) -> list[dict[str, str]]:
    """Every node of the universe, of the values the spec names and of the numbers its bounds admit first
    (so that whatever a term admits has a node here)."""
    named: dict[str, set[str]] = {key: set() for key in UNIVERSE}
    for term_ in spec["terms"]:
        for found in term_:
            named[found["key"]].update(v for v in found["values"] if _LABEL_VALUE.fullmatch(v))
            bound = go_parse_int(found["values"][0]) if len(found["values"]) == 1 else None
            if found["operator"] in ("Gt", "Lt") and bound is not None:  # the first number inside it
                inside = bound + 1 if found["operator"] == "Gt" else bound - 1
                if 0 <= inside <= INT64_MAX:
                    named[found["key"]].add(f"00{inside}")
    for key, value in spec["nodeSelector"].items():
        named[key].add(value)
    keys = list(UNIVERSE)
    choices = [[*UNIVERSE[key], *sorted(named[key] - set(UNIVERSE[key]))] for key in keys]
    return [
        {key: value for key, value in zip(keys, values, strict=True) if value is not None}
        for values in itertools.product(*choices)
    ]


@settings(deadline=None, max_examples=150)
@given(SPECS, st.sampled_from(sorted(FITS)))
def test_gpu_fit_denies_exactly_the_terms_that_place_a_pod_on_a_gpu_the_engine_does_not_fit(
    spec: dict[str, Any], fit_name: str
) -> None:
    """Within a term every requirement holds and across terms any may: a term is denied if and only if some
    node the scheduler would match with it has a GPU the engine does not fit."""
    fit = FITS[fit_name]
    pod_spec = {
        "nodeSelector": spec["nodeSelector"],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in spec["terms"]]
                }
            }
        },
    }
    selection = read_node_selection(pod_spec, "spec")
    assert not selection.problems
    judged = {term_.path: misfit(term_, fit) is not None for term_ in selection.terms}
    nodes = _nodes(spec)
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    for index, expressions_ in enumerate(spec["terms"]):
        path = f"{where}[{index}]"
        if not expressions_:  # an empty term matches no node, and is not read
            assert path not in judged
            continue
        valid = all(map(_valid, expressions_))
        matched = [
            labels
            for labels in nodes
            if valid
            and all(labels.get(k) == v for k, v in spec["nodeSelector"].items())
            and all(_holds(found, labels) for found in expressions_)
        ]
        assert judged[path] is any(not _fits(fit, labels) for labels in matched), (path, matched[:3])
        term_ = next(t for t in selection.terms if t.path == path)
        assert term_.matches_no_node is (not matched)


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
