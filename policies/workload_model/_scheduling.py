"""Which nodes a Pod may be scheduled on, by their labels: ``nodeSelector`` and required node affinity.

The scheduler places a Pod on a node that has every ``nodeSelector`` label and satisfies at least one term
of ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` (the kubelet checks the same
on admission, so ``nodeName`` does not get around them). :func:`read_node_selection` turns both, for one
pod spec (each template's is read once, when the workload is extracted:
:attr:`policies.workload_model._pods.PodTemplate.selection`), into the terms a node may satisfy, each a list
of label
requirements that hold together with the nodeSelector's, and :meth:`NodeTerm.numbers` and
:meth:`NodeTerm.texts` say which values a label can have on such a node. Preferred affinity, taints and
tolerations never confine a Pod, so they are not read.

Requirements mean what they mean to the scheduler (k8s.io/component-helpers nodeaffinity, apimachinery
labels): within a term they all hold (AND), and the terms are alternatives (OR). A term with a requirement
``labels.NewRequirement`` refuses (a ``Gt``/``Lt`` value that is not one integer as Go's
``strconv.ParseInt`` reads it, a value that is not a label value) matches no node, though the API server
admits the Pod; ``Gt``/``Lt`` compare the node's label value read by ``ParseInt`` too, so a node labelled
``09`` has 9 (:mod:`policies.workload_model._labels`). A term whose requirements on one label contradict each
other
(``Gt 10`` and ``Lt 5``, ``In`` and ``DoesNotExist``) matches no node either. Saying that a term matches no
node admits what it asks for, so it is said only where the scheduler says so.

Everything here is linear in the size of the node selection, and reading it counts its requirements and
values as steps of the evaluation's :class:`~policies.workload_model._budget.Budget`: a ``Gt``/``Lt`` range is
kept as its
bounds and the few numbers ``NotIn`` excludes, never listed value by value.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from policies.workload_model._budget import UNLIMITED, Budget
from policies.workload_model._labels import INT64_MAX, LABEL_VALUE_MAX_LENGTH, is_label_value, parse_int64
from verifier.base import quick_init

__all__ = [
    "Admitted",
    "LabelRequirement",
    "NodeSelection",
    "NodeTerm",
    "read_node_selection",
]

_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_AFFINITY: Final = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
#: Values a message lists before it says how many there are in all.
_LISTED: Final = 8


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One requirement on a node label (``nodeSelector`` entries are ``In`` with one value)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Admitted:
    """The values one label may have, read as integers, on the nodes a term admits.

    The integers are those of ``listed`` when an ``In`` names the label's values, otherwise every integer
    from ``low`` to ``high`` but those in ``excluded`` (the numbers ``NotIn`` names in every spelling, which
    no node can have). ``others``: a node may also lack the label or hold a value that is no integer (no
    ``In``, ``Gt`` or ``Lt`` requires an integer there), so nothing is known of its GPU.
    """

    others: bool
    low: int = 0
    high: int = INT64_MAX
    listed: frozenset[int] | None = None
    excluded: frozenset[int] = frozenset()

    @property
    def count(self) -> int:
        """How many integers are admitted."""
        if self.listed is not None:
            return len(self.listed)
        return max(0, self.high - self.low + 1 - len(self.excluded))

    @property
    def empty(self) -> bool:
        """Whether no node has the label (no integer, nor anything else)."""
        return not self.others and self.count == 0

    def within(self, allowed: Collection[int]) -> bool:
        """Whether every node of the term has one of ``allowed`` here (an integer, never another value)."""
        if self.others:
            return False
        if self.listed is not None:
            return self.listed <= frozenset(allowed)
        inside = {n for n in allowed if self.low <= n <= self.high and n not in self.excluded}
        return self.count == len(inside)

    def least(self) -> int | None:
        """The smallest integer admitted; None when there is none."""
        smallest = self.smallest(1)
        return smallest[0] if smallest else None

    def smallest(self, limit: int) -> list[int]:
        """The ``limit`` smallest integers admitted, in order (the work is bounded by ``limit`` and the
        exclusions, never by the range)."""
        if self.listed is not None:
            return heapq.nsmallest(limit, self.listed)
        found: list[int] = []
        number = self.low
        while len(found) < limit and number <= self.high:
            if number not in self.excluded:
                found.append(number)
            number += 1
        return found

    def describe(self) -> str:
        """The integers admitted, for a message: listed up to a few, otherwise as a range."""
        count = self.count
        if self.listed is not None or count <= _LISTED:
            shown = ", ".join(map(str, self.smallest(_LISTED)))
            return shown if count <= _LISTED else f"{shown}, … ({count} values)"
        text = f"{self.low} or more" if self.high == INT64_MAX else f"{self.low} to {self.high}"
        return f"{text} but {len(self.excluded)} values" if self.excluded else text


#: Any value, or none: what a term without ``In``, ``Gt`` or ``Lt`` on the label admits.
ANY: Final = Admitted(others=True)
#: No node: what a term that matches no node admits.
NONE: Final = Admitted(others=False, listed=frozenset())


@dataclass(frozen=True, slots=True)
class _Label:
    """Every requirement of one term on one label, and what they leave a node there."""

    requirements: tuple[LabelRequirement, ...]
    texts: frozenset[str] | None
    """The values an ``In`` leaves (None: no ``In``), less those ``NotIn`` names and, under ``Gt``/``Lt``,
    those out of range."""
    numbers: Admitted
    satisfiable: bool
    """Whether some node can meet them all (with the label or without it)."""

    @classmethod
    def of(cls, requirements: tuple[LabelRequirement, ...]) -> _Label:
        if not all(map(_parses, requirements)):
            return cls(requirements, frozenset(), NONE, False)  # the scheduler refuses the term
        operators = {r.operator for r in requirements}
        low, high, compared = 0, INT64_MAX, False  # a label value has no sign: 0 to INT64_MAX
        for requirement in requirements:
            if requirement.operator in ("Gt", "Lt"):
                bound = parse_int64(requirement.values[0]) or 0  # parses: one integer value
                compared = True
                if requirement.operator == "Gt":
                    low = max(low, bound + 1)
                else:
                    high = min(high, bound - 1)
        excluded = {v for r in requirements if r.operator == "NotIn" for v in r.values}
        texts: frozenset[str] | None = None
        for requirement in requirements:
            if requirement.operator == "In":
                values = frozenset(requirement.values)
                texts = values if texts is None else texts & values
        if texts is not None:
            texts = texts - excluded
            if compared:
                texts = frozenset(t for t in texts if (n := parse_int64(t)) is not None and low <= n <= high)
        present = operators & {"In", "Exists", "Gt", "Lt"}
        if "DoesNotExist" in operators and present:
            return cls(requirements, frozenset(), NONE, False)  # must lack the label and have it
        if texts is not None:
            read = [parse_int64(text) for text in texts]  # 9 and 09 are one integer, two values
            others = None in read  # an In value that is no integer: a GPU of unknown kind
            numbers = Admitted(others, listed=frozenset(n for n in read if n is not None))
            return cls(requirements, texts, numbers, bool(texts))
        if not compared:
            return cls(requirements, None, ANY, True)
        gone = frozenset(_spelled_out(excluded, low, high))
        numbers = Admitted(False, low, high, excluded=gone)
        return cls(requirements, None, numbers, numbers.count > 0)


_UNCONSTRAINED: Final = _Label((), None, ANY, True)


@quick_init
@dataclass(frozen=True, slots=True)
class NodeTerm:
    """The requirements a node must meet together: one affinity term's, and the nodeSelector's."""

    requirements: tuple[LabelRequirement, ...]
    """The term's own requirements (an affinity term's ``matchExpressions``, or the nodeSelector's)."""
    path: str
    """Where the term is, for messages (``spec.nodeSelector`` or ``spec.affinity...nodeSelectorTerms[1]``)."""
    common: NodeTerm | None = None
    """The nodeSelector, which a node must meet as well: one term shared by every affinity term, never
    copied into each (a large selector times many terms would be read again for every term)."""
    _labels: Mapping[str, _Label] = field(init=False, repr=False, compare=False)
    _void: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key: dict[str, list[LabelRequirement]] = {}
        for requirement in self.requirements:
            by_key.setdefault(requirement.key, []).append(requirement)
        shared = self.common._labels if self.common is not None else {}
        labels = {}
        for key, own in by_key.items():
            found = shared.get(key)
            labels[key] = _Label.of((*found.requirements, *own) if found is not None else tuple(own))
        void = not all(label.satisfiable for label in labels.values())
        object.__setattr__(self, "_labels", labels)
        object.__setattr__(self, "_void", void or (self.common is not None and self.common._void))

    @property
    def matches_no_node(self) -> bool:
        """Whether no node matches the term: the scheduler refuses one of its requirements, or those on one
        label contradict each other."""
        return self._void

    def texts(self, key: str) -> frozenset[str] | None:
        """Every value of label ``key`` a node may have (None: not a finite set, or the label may lack)."""
        return frozenset() if self._void else self._label(key).texts

    def numbers(self, key: str) -> Admitted:
        """The integer values of label ``key`` a node may have, and whether it may have anything else."""
        return NONE if self._void else self._label(key).numbers

    def _label(self, key: str) -> _Label:
        found = self._labels.get(key)
        if found is None and self.common is not None:
            found = self.common._labels.get(key)
        return found if found is not None else _UNCONSTRAINED


@quick_init
@dataclass(frozen=True, slots=True)
class NodeSelection:
    """The terms of which a node must satisfy one, and what could not be read."""

    terms: tuple[NodeTerm, ...]
    problems: tuple[str, ...]


def read_node_selection(spec: Mapping[str, Any], base: str, budget: Budget = UNLIMITED) -> NodeSelection:
    """The node selection of the pod spec ``spec`` found at ``base``; malformed parts are listed in
    ``problems``. Each requirement and value read is a step of ``budget``."""
    problems: list[str] = []
    selector = spec.get("nodeSelector") or {}
    common: list[LabelRequirement] = []
    if not isinstance(selector, _MAPPINGS) or not all(isinstance(v, str) for v in selector.values()):
        problems.append(f"{base}.nodeSelector is not a map of label names to values")
    else:
        budget.step(len(selector))
        common = [LabelRequirement(str(k), "In", (v,)) for k, v in selector.items()]
        # The API server refuses such a Pod; an operator's template is not checked until its Pods are made.
        problems += [
            f"{base}.nodeSelector[{r.key}] is not a label value: {r.values[0]!r}"
            for r in common
            if not is_label_value(r.values[0])
        ]
    selection = NodeTerm(tuple(common), f"{base}.nodeSelector")
    required = _at(spec, _AFFINITY)
    if required is None:
        return NodeSelection((selection,), tuple(problems))
    where = f"{base}.{_AFFINITY}.nodeSelectorTerms"
    raw_terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(raw_terms, list) or not raw_terms:
        problems.append(f"{where} is not a list of at least one term")
        return NodeSelection((), tuple(problems))
    terms = []
    for index, raw in enumerate(raw_terms):
        path = f"{where}[{index}]"
        expressions = raw.get("matchExpressions") if isinstance(raw, Mapping) else None
        fields = raw.get("matchFields") if isinstance(raw, Mapping) else None
        if not isinstance(raw, Mapping) or not isinstance(expressions or [], list):
            problems.append(f"{path} is not a node selector term")
            continue
        budget.step()
        if not expressions and not fields:
            continue  # an empty term matches no node
        requirements = []
        for number, item in enumerate(expressions or []):
            found = _requirement(item, budget)
            if found is None:
                problems.append(f"{path}.matchExpressions[{number}] is not a node selector requirement")
            else:
                requirements.append(found)
        terms.append(NodeTerm(tuple(requirements), path, selection))
    return NodeSelection(tuple(terms), tuple(problems))


#: ``isinstance`` against ``Mapping`` alone calls the ABC's check in Python, even for a dict; a dict first
#: answers in C (the same answer: a dict is a Mapping).
_MAPPINGS: Final = (dict, Mapping)


def _at(data: Mapping[str, Any], dotted: str) -> Any:
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if value is not None and isinstance(value, _MAPPINGS) else None
    return value


def _requirement(item: object, budget: Budget) -> LabelRequirement | None:
    if not isinstance(item, Mapping):
        return None
    key, operator, values = item.get("key"), item.get("operator"), item.get("values") or []
    # The operator is checked as a string first: a list or a map is no member of any set (unhashable).
    if not isinstance(key, str) or not isinstance(operator, str) or operator not in _OPERATORS:
        return None
    if not isinstance(values, list):
        return None
    budget.step(1 + len(values))
    if not all(isinstance(v, str) for v in values):
        return None
    return LabelRequirement(key, operator, tuple(values))


def _parses(requirement: LabelRequirement) -> bool:
    """Whether apimachinery's ``labels.NewRequirement`` takes the requirement (its key is not checked: the
    API server refuses a Pod with an invalid one, and a term judged as matching nodes asks for more)."""
    values = requirement.values
    if not all(map(is_label_value, values)):
        return False
    if requirement.operator in ("In", "NotIn"):
        return bool(values)
    if requirement.operator in ("Exists", "DoesNotExist"):
        return not values
    return len(values) == 1 and parse_int64(values[0]) is not None  # Gt, Lt


def _spelled_out(excluded: Collection[str], low: int, high: int) -> Iterator[int]:
    """The numbers from ``low`` to ``high`` that ``NotIn`` excludes in every spelling a label value can
    have (``9``, ``09``, ``009``, … up to the label's 63 characters), so that no node has them. Linear in
    the values: each is read once, as the number it spells."""
    spellings: dict[int, set[str]] = {}
    for value in excluded:
        if value.isascii() and value.isdigit():  # a label value with a sign is no node's
            number = parse_int64(value)
            if number is not None and low <= number <= high:
                spellings.setdefault(number, set()).add(value)
    for number, found in spellings.items():
        if len(found) == LABEL_VALUE_MAX_LENGTH - len(str(number)) + 1:
            yield number
