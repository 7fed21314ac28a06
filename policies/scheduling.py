"""Which nodes a Pod may be scheduled on, by their labels: ``nodeSelector`` and required node affinity.

The scheduler places a Pod on a node that has every ``nodeSelector`` label and satisfies at least one term
of ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` (the kubelet checks the same
on admission, so ``nodeName`` does not get around them). :func:`read_node_selection` turns both, for one
pod spec (each template's is read on its own: :meth:`policies.pods.PodTemplate.node_selection`), into the
terms a node may satisfy, each a list of label requirements with the nodeSelector folded in, and
:meth:`NodeTerm.numbers` / :meth:`NodeTerm.texts` say which values a label can have on such a node.
Preferred affinity, taints and tolerations never confine a Pod, so they are not read.

Requirements mean what they mean to the scheduler (k8s.io/component-helpers nodeaffinity, apimachinery
labels): a term with a requirement ``labels.NewRequirement`` refuses (a ``Gt``/``Lt`` value that is not one
integer as Go's ``strconv.ParseInt`` reads it, a value that is not a label value) matches no node, though
the API server admits the Pod; ``Gt``/``Lt`` compare the node's label value read by ``ParseInt`` too, so a
node labelled ``09`` has 9 (:mod:`policies.labels`). Saying that a term matches no node admits what it
asks for, so it is said only where the scheduler says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from policies.labels import INT64_MAX, LABEL_VALUE_MAX_LENGTH, is_label_value, parse_int64

__all__ = [
    "Admitted",
    "LabelRequirement",
    "NodeSelection",
    "NodeTerm",
    "read_node_selection",
]

_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_AFFINITY: Final = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
#: A range of label numbers up to this long is listed value by value; a longer one counts as unbounded.
_MAX_RANGE: Final = 1000


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One requirement on a node label (``nodeSelector`` entries are ``In`` with one value)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Admitted:
    """The values of one numeric label on the nodes a term admits.

    ``values``: every value a node may have, when that is a finite set (empty: no node qualifies);
    None when not. ``low``: the smallest value a node may have when the values are bounded below.
    """

    values: frozenset[int] | None
    low: int | None


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """The requirements a node must meet together (the nodeSelector and one affinity term)."""

    requirements: tuple[LabelRequirement, ...]
    path: str
    """Where the term is, for messages (``spec.nodeSelector`` or ``spec.affinity...nodeSelectorTerms[1]``)."""

    @property
    def matches_no_node(self) -> bool:
        """Whether the scheduler refuses one of the term's requirements, so that no node matches it."""
        return not all(map(_parses, self.requirements))

    def texts(self, key: str) -> frozenset[str] | None:
        """Every value of label ``key`` a node may have (None: not a finite set, or the label may lack)."""
        if self.matches_no_node:
            return frozenset()
        found: frozenset[str] | None = None
        for requirement in self.requirements:
            if requirement.key == key and requirement.operator == "In":
                values = frozenset(requirement.values)
                found = values if found is None else found & values
        if found is None:
            return None
        excluded = {v for r in self.requirements if r.key == key and r.operator == "NotIn" for v in r.values}
        return found - excluded

    def numbers(self, key: str) -> Admitted:
        """The integer values of label ``key`` a node may have (a value that is no integer never counts)."""
        if self.matches_no_node:
            return Admitted(frozenset(), None)
        # A label value has no sign, so the integer ParseInt reads from it is between 0 and INT64_MAX.
        low, high, compared = 0, INT64_MAX, False
        for requirement in self.requirements:
            compares = requirement.key == key and requirement.operator in ("Gt", "Lt")
            bound = parse_int64(requirement.values[0]) if compares else None  # parses: matches_no_node
            if bound is None:
                continue
            compared = True
            if requirement.operator == "Gt":
                low = max(low, bound + 1)
            else:
                high = min(high, bound - 1)
        texts = self.texts(key)
        if texts is not None:
            numbers = {n for n in map(parse_int64, texts) if n is not None}
            if compared:
                numbers = {n for n in numbers if low <= n <= high}
            return Admitted(frozenset(numbers), min(numbers, default=None))
        if not compared:
            return Admitted(None, None)  # the label may lack, or be no integer
        if high - low <= _MAX_RANGE:
            excluded = {
                v for r in self.requirements if r.key == key and r.operator == "NotIn" for v in r.values
            }
            numbers = {n for n in range(low, high + 1) if not _spelled_out(n, excluded)}
            return Admitted(frozenset(numbers), min(numbers, default=None))
        return Admitted(None, low)


@dataclass(frozen=True, slots=True)
class NodeSelection:
    """The terms of which a node must satisfy one, and what could not be read."""

    terms: tuple[NodeTerm, ...]
    problems: tuple[str, ...]


def read_node_selection(spec: Mapping[str, Any], base: str) -> NodeSelection:
    """The node selection of the pod spec ``spec`` found at ``base``; malformed parts are listed in
    ``problems``."""
    problems: list[str] = []
    selector = spec.get("nodeSelector") or {}
    common: list[LabelRequirement] = []
    if not isinstance(selector, Mapping) or not all(isinstance(v, str) for v in selector.values()):
        problems.append(f"{base}.nodeSelector is not a map of label names to values")
    else:
        common = [LabelRequirement(str(k), "In", (v,)) for k, v in selector.items()]
    required = _at(spec, _AFFINITY)
    if required is None:
        return NodeSelection((NodeTerm(tuple(common), f"{base}.nodeSelector"),), tuple(problems))
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
        if not expressions and not fields:
            continue  # an empty term matches no node
        requirements = list(common)
        for number, item in enumerate(expressions or []):
            found = _requirement(item)
            if found is None:
                problems.append(f"{path}.matchExpressions[{number}] is not a node selector requirement")
            else:
                requirements.append(found)
        terms.append(NodeTerm(tuple(requirements), path))
    return NodeSelection(tuple(terms), tuple(problems))


def _at(data: Mapping[str, Any], dotted: str) -> Any:
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _requirement(item: object) -> LabelRequirement | None:
    if not isinstance(item, Mapping):
        return None
    key, operator, values = item.get("key"), item.get("operator"), item.get("values") or []
    if not isinstance(key, str) or operator not in _OPERATORS or not isinstance(values, list):
        return None
    if not all(isinstance(v, str) for v in values):
        return None
    return LabelRequirement(key, str(operator), tuple(values))


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


def _spelled_out(number: int, excluded: set[str]) -> bool:
    """Whether ``NotIn`` excludes every label value that reads as ``number`` (``9``, ``09``, ``009``, ...)."""
    text = str(number)
    return all("0" * zeros + text in excluded for zeros in range(LABEL_VALUE_MAX_LENGTH - len(text) + 1))
