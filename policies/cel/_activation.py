"""The data an expression is evaluated against: bounded and made plain before cel-cpp converts it.

:func:`prepare_activation` checks values against :class:`~policies.cel._limits.CelLimits` (list and map
lengths, string lengths, all values and all text together, nesting depth, types CEL can represent) once per
set of values; a :class:`CelActivation` then serves every program evaluated against them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from policies.cel._errors import CelEvaluationError
from policies.cel._limits import DEFAULT_LIMITS, CelLimits

__all__ = ["CelActivation", "prepare_activation"]


class CelActivation(Mapping[str, Any]):
    """Variable values checked against the limits once, to evaluate many programs against.

    Build one with :func:`prepare_activation` per set of values (the evaluator: per policy and engine):
    cel-cpp then converts each variable into its own representation once, on first use, for all programs
    compiled with the same variables.
    """

    __slots__ = ("_activations", "_answers", "_values", "limits")

    def __init__(self, values: dict[str, Any], limits: CelLimits) -> None:
        self._values = values
        self.limits = limits
        # cel-cpp activation per environment (keyed by the environment object, which this keeps alive)
        self._activations: dict[Any, Any] = {}
        # what each program evaluated in the caller's thread came to, by the program's id (the entry keeps
        # the program, so its id is not reused while it is here)
        self._answers: dict[int, tuple[object, bool]] = {}

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def answer(self, program: object) -> bool | None:
        """What ``program`` came to on these values, as :meth:`remember` kept it; None when unknown."""
        found = self._answers.get(id(program))
        return found[1] if found is not None and found[0] is program else None

    def remember(self, program: object, value: bool) -> None:
        """Keep what ``program`` came to on these values: evaluating it again on them gives the same (a
        program and its values are immutable, and CEL has no side effects, clock or randomness)."""
        self._answers[id(program)] = (program, value)

    def for_environment(self, env: Any) -> Any:
        """The cel-cpp activation of these values for one environment, built on first use."""
        activation = self._activations.get(env)
        if activation is None:
            # two threads may both build one; setdefault keeps the first, the other is dropped unused
            activation = self._activations.setdefault(env, env.Activation(self._values))
        return activation


def prepare_activation(values: Mapping[str, Any], *, limits: CelLimits = DEFAULT_LIMITS) -> CelActivation:
    """Check ``values`` (variable name → JSON-like data) against ``limits`` for repeated evaluation.

    Values are what JSON or YAML yields: dicts, lists, str, int, float, bool, None (bytes too). Other
    mappings and sequences (a ``MappingProxyType``, a tuple) are copied into dicts and lists.
    Raises :class:`CelEvaluationError` when the data exceeds a limit or has a type CEL cannot represent.
    """
    return CelActivation(_guarded(values, limits), limits)


# --------------------------------------------------------------------------------------------------
# Data handed in: bounded before cel-cpp converts it. The check runs once per workload on every value, so
# it has a fast pass (exact types, no paths) and, only when that finds a problem, a second pass that
# names where the problem is.

#: what cel-cpp takes as is (it rejects subclasses such as OrderedDict or a StrEnum member)
_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None), bytes})
_SCALARS: Final = (str, int, float, bytes)  # with their subclasses, which are copied to the base type


def _guarded(values: Mapping[str, Any], limits: CelLimits) -> dict[str, Any]:
    """Check sizes, depth and types; copy anything cel-cpp would not take as is into dicts and lists."""
    verdict = _scan(values, limits)
    if verdict is None:
        raise _locate(values, limits)
    if verdict:
        return dict(values)
    return {name: _plain_copy(value) for name, value in values.items()}


def _scan(values: Mapping[str, Any], limits: CelLimits) -> bool | None:
    """True: plain and within limits; False: within limits but needs a copy; None: a problem."""
    max_length, max_string, plain = limits.max_list_length, limits.max_string_length, True
    level = list(values.values())
    count, depth, total = len(level), 1, 0
    while level:
        children: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is str or kind is bytes:
                total += len(item)
                if len(item) > max_string:
                    return None
                continue
            if kind in _PLAIN_SCALARS:
                continue
            if kind is dict or kind is list:
                size = len(item)
                children.extend(item.values() if kind is dict else item)
            elif isinstance(item, Mapping):
                size, plain = len(item), False
                children.extend(item.values())
            elif isinstance(item, list | tuple):
                size, plain = len(item), False
                children.extend(item)
            elif isinstance(item, _SCALARS):
                if isinstance(item, str | bytes):
                    total += len(item)
                    if len(item) > max_string:
                        return None
                plain = False
                continue
            else:
                return None
            count += size
            if size > max_length or count > limits.max_values or depth > limits.max_value_depth:
                return None
        level = children
        depth += 1
    return None if total > limits.max_total_length else plain


def _locate(values: Mapping[str, Any], limits: CelLimits) -> CelEvaluationError:
    """The error for the first problem :func:`_scan` found, with the path to it."""
    # (value, depth, parent, key): a path is built from the parent links only for the message
    stack: list[tuple[Any, int, Any, Any]] = [(value, 1, None, name) for name, value in values.items()]
    count, total = len(stack), 0
    while stack:
        item, depth, parent, key = stack.pop()
        here = (parent, key)
        if isinstance(item, str | bytes) and len(item) > limits.max_string_length:
            what = "a string of {} characters" if isinstance(item, str) else "a bytes value of {} bytes"
            return _data_error(f"{what.format(len(item))} (limit {limits.max_string_length})", here)
        if isinstance(item, str | bytes):
            total += len(item)
            if total > limits.max_total_length:
                return _data_error(f"more than {limits.max_total_length} characters of text in all", here)
        if type(item) in _PLAIN_SCALARS or isinstance(item, _SCALARS):
            continue
        if isinstance(item, Mapping):
            children = [(child, depth + 1, here, child_key) for child_key, child in item.items()]
        elif isinstance(item, list | tuple):
            children = [(child, depth + 1, here, index) for index, child in enumerate(item)]
        else:
            return CelEvaluationError(
                f"cannot evaluate policy expressions on this data: {_path(here)} is a {type(item).__name__},"
                " which CEL cannot represent",
                hint="hand in JSON-like data: dicts, lists, str, int, float, bool, None"
                " (pydantic: model_dump(mode='json'); times as RFC 3339 strings)",
            )
        count += len(children)
        if len(children) > limits.max_list_length:
            what = "map" if isinstance(item, Mapping) else "list"
            return _data_error(f"a {what} of {len(children)} items (limit {limits.max_list_length})", here)
        if count > limits.max_values:
            return _data_error(f"more than {limits.max_values} values in all", here)
        if depth > limits.max_value_depth:
            return _data_error(f"nesting deeper than {limits.max_value_depth} levels", here)
        stack.extend(children)
    return _data_error("the data exceeds a limit", None)  # unreachable while _scan and this agree


def _plain_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_plain_copy(key): _plain_copy(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_copy(child) for child in value]
    if type(value) in _PLAIN_SCALARS:
        return value
    # subclasses (an IntEnum or StrEnum member) become their base type; bool needs no case: it has none
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return bytes(value)


def _path(here: Any) -> str:
    parts: list[str] = []
    while here is not None:
        parent, key = here
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}" if parent is not None else str(key))
        here = parent
    return "".join(reversed(parts))


def _data_error(what: str, here: Any) -> CelEvaluationError:
    where = f" at {_path(here)}" if here is not None else ""
    return CelEvaluationError(
        f"cannot evaluate policy expressions on this data: {what}{where}",
        hint="the limits protect the admission path; if the object is legitimate, raise them in CelLimits",
    )
