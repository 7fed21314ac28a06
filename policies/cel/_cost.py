"""Worst-case cost of a checked CEL expression over data within the wrapper's limits, before it ever runs.

The estimate decides where an expression is evaluated (docs/cel.md, "Where expressions run"): one whose
worst case is cheap runs inline, in microseconds; any other runs in a worker process that can be stopped.
It must therefore never be low. It is computed from the checked AST and from bounds on every value:

- data handed in (every variable, every field of it) is *any* value within :class:`~policies.cel.
  CelLimits`: a string of up to ``4 * max_string_length`` bytes, a list or map of up to ``max_list_length``
  items, at most ``4 * max_total_length`` bytes of text in all (variables are ``dyn``: a field may be any
  of these);
- a value the expression builds is bounded by what it is built from: ``a + b`` by both operands, a list
  literal by its elements, ``map``/``filter`` results by the range they iterate;
- every node is evaluated at most as many times as the comprehensions around it iterate, and cel-cpp stops
  an evaluation after :data:`~policies.cel._limits.COMPREHENSION_ITERATION_BUDGET` iterations in all, so
  no node runs more often than that.

*Work* is counted in units of about a nanosecond on a slow core: the call costs :data:`CALL`, a node
:data:`NODE`, each byte a string operation reads or writes one, each list item copied :data:`ITEM`.
*Memory* is what the evaluation allocates: cel-cpp keeps every intermediate value in the evaluation's arena
until it ends, so allocations add up, except regular-expression programs, which are freed after each use
(the largest counts). Calibrated in docs/cel.md; every function of the standard library has a rule below,
and anything else (an extension, a message type) makes the cost unbounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from policies.cel._limits import COMPREHENSION_ITERATION_BUDGET

#: Work of one evaluation before any node: the call into cel-cpp and the result back (measured: ~4 us).
CALL: Final = 10_000
#: Work of evaluating one node (measured: 13-25 ns on the development machine; four times that, for margin).
NODE: Final = 100
#: Bytes (and work) per item of a list or map: cel-cpp copies a value handle of about this size per item.
ITEM: Final = 64
#: Bytes of a number, bool, null, timestamp or duration.
SCALAR_BYTES: Final = 16
#: Work per byte of a regular expression compiled at evaluation time (RE2: ~1.6 us per pattern byte).
REGEX_COMPILE: Final = 2000
#: Memory of one RE2 program: its default budget, which cel-cpp leaves in place.
REGEX_MEMORY: Final = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CelCost:
    """Worst-case work (~ns) and memory (bytes) of one evaluation; ``math.inf`` where there is no bound."""

    work: float
    memory: float

    def within(self, work: float, memory: float) -> bool:
        """Whether both stay within the given bounds."""
        return self.work <= work and self.memory <= memory


class _Bound:
    """What a value can be at most: ``items`` in a list or map, ``top`` bytes at its top level (a string's
    bytes, :data:`ITEM` per item), ``deep`` bytes with everything it contains, and ``item`` bounding each of
    its items (keys and values). The data bound is its own item bound; every other bound is finite."""

    __slots__ = ("deep", "item", "items", "top")

    def __init__(self, items: float, top: float, deep: float, item: _Bound | None) -> None:
        self.items = items
        self.top = top
        self.deep = deep
        self.item = item

    def child(self) -> _Bound:
        return self.item if self.item is not None else _SCALAR


#: A number, bool, null, timestamp or duration (never a string: strings are made by :func:`_string`).
_SCALAR = _Bound(0, SCALAR_BYTES, SCALAR_BYTES, None)


def _string(length: float) -> _Bound:
    return _Bound(0, length, length + SCALAR_BYTES, None)


def _join(a: _Bound, b: _Bound) -> _Bound:
    """A bound of both ``a`` and ``b`` (of either branch of ``?:``, of the elements of one list)."""
    if a is b or _covers(a, b):
        return a
    if _covers(b, a):
        return b
    if a.item is None or b.item is None:
        item = a.item or b.item
    elif a.item is a:  # the data bound: join with the other's (finite) item bound
        item = _join(a, b.item)
    elif b.item is b:
        item = _join(a.item, b)
    else:
        item = _join(a.item, b.item)
    return _Bound(max(a.items, b.items), max(a.top, b.top), max(a.deep, b.deep), item)


def _covers(a: _Bound, b: _Bound) -> bool:
    """Whether ``a`` bounds everything ``b`` bounds (descends ``b`` only: it terminates)."""
    if a is b:
        return True
    if b.items > a.items or b.top > a.top or b.deep > a.deep:
        return False
    if b.item is None:
        return True
    if a.item is None:
        return False
    return True if b.item is b else _covers(a.item, b.item)


class Unbounded(Exception):
    """The expression uses something whose cost this module does not bound."""


# Standard functions by what their cost depends on. The names are cel-cpp's, as the checked AST holds them.
_LOGIC: Final = frozenset({"_&&_", "_||_", "!_", "@not_strictly_false", "__not_strictly_false__"})
_ARITHMETIC: Final = frozenset({"_-_", "_*_", "_/_", "_%_", "-_"})
_EQUALITY: Final = frozenset({"_==_", "_!=_"})
_ORDER: Final = frozenset({"_<_", "_<=_", "_>_", "_>=_"})
_PREFIX: Final = frozenset({"startsWith", "endsWith"})
_PARSE: Final = frozenset({"int", "uint", "double", "bool", "timestamp", "duration"})
_TIME_PARTS: Final = frozenset(
    {
        "getFullYear",
        "getMonth",
        "getDayOfYear",
        "getDayOfMonth",
        "getDate",
        "getDayOfWeek",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
    }
)


class _Estimate:
    def __init__(self, data: _Bound) -> None:
        self.data = data
        self.work = 0.0
        self.retained = 0.0
        self.transient = 0.0

    def charge(self, times: float, work: float, memory: float = 0.0) -> None:
        self.work += times * work
        self.retained += times * memory

    def walk(self, node: Any, scope: dict[str, _Bound], times: float) -> _Bound:
        kind = node.WhichOneof("expr_kind")
        self.charge(times, NODE)
        if kind == "const_expr":
            constant = node.const_expr
            which = constant.WhichOneof("constant_kind")
            if which == "string_value":
                return _string(len(constant.string_value.encode("utf-8")))
            if which == "bytes_value":
                return _string(len(constant.bytes_value))
            return _SCALAR
        if kind == "ident_expr":
            return scope.get(node.ident_expr.name, self.data)
        if kind == "select_expr":
            operand = self.walk(node.select_expr.operand, scope, times)
            self.charge(times, len(node.select_expr.field))
            return _SCALAR if node.select_expr.test_only else operand.child()
        if kind == "list_expr":
            elements = [self.walk(e, scope, times) for e in node.list_expr.elements]
            return self._collection(elements, len(elements), times)
        if kind == "struct_expr":
            entries = node.struct_expr.entries
            if any(not entry.HasField("map_key") for entry in entries):
                raise Unbounded("message construction")
            parts = [
                self.walk(part, scope, times) for entry in entries for part in (entry.map_key, entry.value)
            ]
            return self._collection(parts, len(entries), times)
        if kind == "call_expr":
            return self._call(node.call_expr, scope, times)
        if kind == "comprehension_expr":
            return self._comprehension(node.comprehension_expr, scope, times)
        raise Unbounded(f"expression kind {kind}")

    def _collection(self, parts: list[_Bound], items: int, times: float) -> _Bound:
        top = ITEM * items
        self.charge(times, top, top)
        item: _Bound | None = None
        for part in parts:
            item = part if item is None else _join(item, part)
        return _Bound(items, top, top + sum(p.deep for p in parts), item)

    def _call(self, call: Any, scope: dict[str, _Bound], times: float) -> _Bound:
        operands = [self.walk(call.target, scope, times)] if call.HasField("target") else []
        operands += [self.walk(argument, scope, times) for argument in call.args]
        name = call.function
        a = operands[0] if operands else _SCALAR
        b = operands[1] if len(operands) > 1 else _SCALAR
        if name in _LOGIC or name in _ARITHMETIC or name in ("dyn", "type"):
            return a if name == "dyn" else _SCALAR
        if name == "_?_:_":
            return _join(b, operands[2])
        if name in _EQUALITY:
            self.charge(times, min(a.deep, b.deep))
            return _SCALAR
        if name in _ORDER or name in _PREFIX:
            self.charge(times, min(a.top, b.top))
            return _SCALAR
        if name == "_+_":  # numbers or times; or a new string, bytes or list holding both operands
            if a is _SCALAR and b is _SCALAR:
                return _SCALAR
            top = a.top + b.top
            self.charge(times, top, top)
            item = b.item if a.item is None else a.item if b.item is None else _join(a.item, b.item)
            return _Bound(a.items + b.items, top, a.deep + b.deep, item)
        if name == "_[_]":
            self.charge(times, b.deep)
            return a.child()
        if name == "@in":
            self.charge(times, a.deep + b.deep + ITEM * b.items)
            return _SCALAR
        if name == "size":
            self.charge(times, a.top)  # code points are counted
            return _SCALAR
        if name == "contains":
            self.charge(times, a.top * max(b.top, 1))
            return _SCALAR
        if name == "matches":
            self.charge(times, (a.top + 1) * (b.top + 1) + REGEX_COMPILE * b.top)
            self.transient = max(self.transient, REGEX_MEMORY + REGEX_COMPILE * b.top)
            return _SCALAR
        if name in _PARSE or name in _TIME_PARTS:
            self.charge(times, sum(operand.top for operand in operands))
            return _SCALAR
        if name in ("string", "bytes"):
            size = max(a.top, SCALAR_BYTES * 4)
            self.charge(times, size, size)
            return _string(size)
        raise Unbounded(f"function {name}")

    def _comprehension(self, loop: Any, scope: dict[str, _Bound], times: float) -> _Bound:
        iterated = self.walk(loop.iter_range, scope, times)
        initial = self.walk(loop.accu_init, scope, times)
        count = min(iterated.items, COMPREHENSION_ITERATION_BUDGET)
        inner = min(times * count, COMPREHENSION_ITERATION_BUDGET + 1)
        accumulator = self._accumulator(loop, initial, count, scope, iterated.child())
        inside = {**scope, loop.iter_var: iterated.child(), loop.accu_var: accumulator}
        self.walk(loop.loop_condition, inside, inner)
        self.walk(loop.loop_step, inside, inner)
        return self.walk(loop.result, {**scope, loop.accu_var: accumulator}, times)

    def _accumulator(
        self, loop: Any, initial: _Bound, count: float, scope: dict[str, _Bound], element: _Bound
    ) -> _Bound:
        """What the accumulator can grow to: a bool or a count (``all``, ``exists``, ``exists_one``), or a
        list that gains one item per iteration (``map``, ``filter``); the step is walked once to find out."""
        trial = _Estimate(self.data)
        inside = {**scope, loop.iter_var: element, loop.accu_var: initial}
        stepped = trial.walk(loop.loop_step, inside, 1)
        if initial is _SCALAR and stepped is _SCALAR:
            return _SCALAR
        appended = _appended(loop.loop_step, loop.accu_var)
        if appended is None or initial.items != 0 or loop.accu_init.WhichOneof("expr_kind") != "list_expr":
            raise Unbounded("an accumulator that is not a macro's")
        item = trial.walk(appended, inside, 1)
        return _Bound(count, ITEM * count, count * (item.deep + ITEM), item)


def _appended(step: Any, accumulator: str) -> Any | None:
    """The element ``map``/``filter`` append: the step is ``acc + [e]`` or ``cond ? acc + [e] : acc``."""
    if step.WhichOneof("expr_kind") != "call_expr":
        return None
    call = step.call_expr
    if call.function == "_?_:_" and len(call.args) == 3:
        keep = call.args[2]
        if keep.WhichOneof("expr_kind") != "ident_expr" or keep.ident_expr.name != accumulator:
            return None
        return _appended(call.args[1], accumulator)
    if call.function != "_+_" or len(call.args) != 2:
        return None
    grown, added = call.args
    if grown.WhichOneof("expr_kind") != "ident_expr" or grown.ident_expr.name != accumulator:
        return None
    if added.WhichOneof("expr_kind") != "list_expr" or len(added.list_expr.elements) != 1:
        return None
    return added.list_expr.elements[0]


def estimate(
    expr: Any, *, max_string_length: int, max_list_length: int, max_total_length: int, max_values: int
) -> CelCost:
    """The worst-case cost of evaluating the checked expression ``expr`` on data within these limits.

    The lengths count code points, of up to four UTF-8 bytes each.
    """
    data = _Bound(
        max_list_length,
        max(4 * max_string_length, ITEM * max_list_length),
        4 * max_total_length + ITEM * max_values,
        None,
    )
    data.item = data
    estimator = _Estimate(data)
    estimator.charge(1, CALL)
    try:
        estimator.walk(expr, {}, 1)
    except Unbounded:
        return CelCost(math.inf, math.inf)
    return CelCost(estimator.work, estimator.retained + estimator.transient)
