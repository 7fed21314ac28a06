"""A compiled expression and its evaluation: plain Python values out, or an error that says what to do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cel_expr_python import cel as _cel

from policies.cel._activation import CelActivation, prepare_activation
from policies.cel._cost import CelCost
from policies.cel._errors import (
    LANGUAGE_DEFINITION,
    MISSING_KEY_HINT,
    RESOURCE_HINT,
    CelEvaluationError,
    status_text,
)
from policies.cel._limits import COMPREHENSION_ITERATION_BUDGET, CelLimits

__all__ = ["CelProgram"]


@dataclass(frozen=True)
class CelProgram:
    """A compiled policy expression. Thread-safe: evaluate it from any number of threads."""

    source: str
    location: str | None
    variables: frozenset[str]
    limits: CelLimits
    #: worst case of one evaluation over data within ``limits`` (:mod:`policies.cel._cost`)
    cost: CelCost
    _env: Any = field(repr=False, compare=False)
    _expression: Any = field(repr=False, compare=False)

    @property
    def inline(self) -> bool:
        """Whether the worst case is cheap enough to evaluate in the caller's thread, on its event loop."""
        return self.cost.within(self.limits.inline_work, self.limits.inline_memory)

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """Evaluate against ``activation`` (variable name → value, or a :class:`CelActivation`).

        Returns plain Python values (bool, int, float, str, bytes, None, list, dict, ``datetime`` for
        timestamps, ``timedelta`` for durations). Raises :class:`CelEvaluationError` when evaluation
        fails, including a missing variable, a missing key and the comprehension iteration budget.
        """
        if not isinstance(activation, CelActivation):
            activation = prepare_activation(activation, limits=self.limits)
        try:
            value = self._expression.eval(activation.for_environment(self._env))
        except RuntimeError as exc:  # cel-cpp statuses that are raised rather than returned as errors
            raise self._failure(str(exc)) from None
        except MemoryError:  # std::bad_alloc from cel-cpp, or Python's own
            raise CelEvaluationError(
                f"the expression ran out of memory while it was evaluated\n    {self.source}",
                location=self.location,
                hint=RESOURCE_HINT,
                resource=True,
            ) from None
        if value.type() == _cel.Type.ERROR:
            raise self._failure(str(value.value()))
        return value.plain_value()

    def evaluate_bool(self, activation: Mapping[str, Any]) -> bool:
        """Evaluate an expression that must yield ``true`` or ``false``; anything else is an error."""
        result = self.evaluate(activation)
        if type(result) is not bool:
            raise CelEvaluationError(
                f"the expression yields {_describe(result)}, not true or false: {self.source}",
                location=self.location,
                hint="write a comparison or a test that is true or false, e.g. `size(x) > 0`",
            )
        return result

    def _failure(self, status: str) -> CelEvaluationError:
        detail, hint = _explain_runtime(status)
        return CelEvaluationError(
            f"the expression could not be evaluated: {detail}\n    {self.source}",
            location=self.location,
            hint=hint,
            resource=hint == RESOURCE_HINT,
        )


# --------------------------------------------------------------------------------------------------
# Runtime errors: cel-cpp statuses ("NOT_FOUND: Key not found in map : \"x\"") → what to tell the user.

_RUNTIME_HINTS: Final = (
    ("key not found", MISSING_KEY_HINT),
    ("no such key", MISSING_KEY_HINT),
    ("index error", "test the length first: `size(x) > i && x[i] ...`"),
    ("no value with name", "the policy evaluator did not hand this variable in: report it as a bug"),
    ("iteration budget exceeded", RESOURCE_HINT),
    (
        "no matching overload",
        "CEL converts no types implicitly: convert with int(), double(), string(), timestamp()",
    ),
    ("overflow", "keep integers within 64 bits"),
    ("by zero", "test the divisor first: `d != 0 && n / d > 1`"),
    ("non-cel value type", "hand in JSON-like data: dicts, lists, str, int, float, bool, None"),
    # what cel-cpp says when a string handed in holds a lone surrogate (a "\ud800" escape in JSON input)
    ("basic_string", "a string handed in is probably not valid Unicode (a lone \\uD800-\\uDFFF escape)"),
)


def _explain_runtime(status: str) -> tuple[str, str]:
    detail = status_text(status)
    lowered = detail.lower()
    if "iteration budget exceeded" in lowered:
        detail = f"stopped after {COMPREHENSION_ITERATION_BUDGET} comprehension iterations (the budget)"
    for marker, hint in _RUNTIME_HINTS:
        if marker in lowered:
            return detail, hint
    return detail, f"see the CEL language definition: {LANGUAGE_DEFINITION}"


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
