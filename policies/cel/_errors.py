"""What goes wrong with a CEL expression, in words a policy author can act on."""

from __future__ import annotations

import re
from typing import Final

from verifier.base import InputError, TrtguardError

__all__ = [
    "LANGUAGE_DEFINITION",
    "MISSING_KEY_HINT",
    "RESOURCE_HINT",
    "CelCompileError",
    "CelEvaluationError",
    "status_text",
]

#: Where hints send an author for the language itself.
LANGUAGE_DEFINITION: Final = "https://github.com/google/cel-spec/blob/master/doc/langdef.md"
#: The hint of every error that a bound on time or memory caused (CelEvaluationError.resource).
RESOURCE_HINT: Final = (
    "the expression's cost grows with the data it reads: filter lists before nesting macros and do not "
    "build strings or lists in loops; the policy's onError applies until it is cheaper"
)

#: The hint of every error that a key missing from the data caused: callers whose data leaves out what it
#: cannot tell (attestation conditions over scans) read such an error as "could not be checked".
MISSING_KEY_HINT: Final = "test optional fields first: has(x.field), or `'key' in x`"

# cel-cpp statuses start with a code ("NOT_FOUND: ") and may end with one ("[INVALID_ARGUMENT]").
_STATUS_CODE = re.compile(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$")


def status_text(status: str) -> str:
    """A cel-cpp status without its status codes."""
    return _STATUS_CODE.sub("", status.strip())


class CelCompileError(InputError):
    """A policy expression that does not compile, names an undeclared variable or exceeds a limit.

    ``location`` is ``file:line:column`` of the first problem where the caller gave ``file:line`` of the
    expression start; ``line`` and ``column`` (1-based, in code points) are relative to the expression.
    """

    def __init__(
        self,
        message: str,
        *,
        expression: str,
        location: str,
        line: int,
        column: int,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, location=location, hint=hint)
        self.expression = expression
        self.line = line
        self.column = column


class CelEvaluationError(TrtguardError):
    """A policy expression could not be evaluated: no such key, type error, or a limit exceeded.

    A failed evaluation is never a pass: callers turn it into a violation. ``resource`` is true when a
    bound on time or memory stopped it (the iteration budget, the time limit, the memory limit, a worker
    that died), which the evaluator treats as "could not be checked": the policy's ``onError``.
    """

    def __init__(
        self, message: str, *, location: str | None = None, hint: str | None = None, resource: bool = False
    ) -> None:
        super().__init__(message, location=location, hint=hint)
        self.resource = resource
