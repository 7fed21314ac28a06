"""The process that evaluates expensive CEL expressions for :mod:`policies.cel.sandbox`.

Started as ``python -m policies.cel.worker MEMORY_BYTES``; it reads requests on standard input and
writes answers on standard output, each a frame of an 8-byte big-endian length and the payload. A request
is a pickle from the parent (which is trusted) of ``(variables, sources, values, limits, seconds)``; the
answer is JSON (the parent does not unpickle what this process writes) with one entry per source:
``{"ok": bool}`` or ``{"error": message, "hint": hint, "resource": bool}``.

Its own bounds, set before the first request: an address-space limit of what it holds once imported plus
``MEMORY_BYTES`` (cel-cpp then fails with ``std::bad_alloc``: answered, then this process exits, since
cel-cpp's state after it is not to be trusted; so it does after any other bound was hit), an OOM score
that makes the kernel pick it first, and, per request, a wall-clock timer whose signal ends the process
should the parent not stop it in time. It exits when its standard input closes.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import signal
import struct
import sys
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, BinaryIO, Final

from policies.cel import (
    CelEvaluationError,
    CelLimits,
    CelProgram,
    compile_expression,
    prepare_activation,
)

#: Frame header: the payload's length.
HEADER: Final = struct.Struct(">Q")
#: Extra seconds the worker's own timer gives the parent to stop it first.
GRACE: Final = 1.0


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's payload; ``None`` at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (length,) = HEADER.unpack(header)
    payload = stream.read(length)
    return payload if len(payload) == length else None


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


@lru_cache(maxsize=256)
def _program(variables: frozenset[str], source: str, limits: CelLimits) -> CelProgram:
    return compile_expression(source, variables=variables, limits=limits)


def answer(
    variables: Sequence[str], sources: Sequence[str], values: dict[str, Any], limits: CelLimits
) -> list[Any]:
    """Evaluate each source against ``values``; one answer entry each."""
    answers: list[Any] = []
    try:
        activation = prepare_activation(values, limits=limits)
    except CelEvaluationError as error:
        return [{"error": error.message, "hint": error.hint, "resource": error.resource}] * len(sources)
    for source in sources:
        try:
            answers.append({"ok": _program(frozenset(variables), source, limits).evaluate_bool(activation)})
        except CelEvaluationError as error:
            answers.append({"error": error.message, "hint": error.hint, "resource": error.resource})
    return answers


def _limit_memory(budget: int) -> None:
    with open("/proc/self/statm", encoding="ascii") as statm:  # noqa: PTH123 - a proc file, read once
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + budget if hard == resource.RLIM_INFINITY else min(size + budget, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as score:  # noqa: PTH123
            score.write("1000")
    except OSError:
        pass  # not on Linux, or not allowed: the address-space limit still holds


def main(argv: Sequence[str]) -> int:
    """Serve requests until standard input closes."""
    _limit_memory(int(argv[0]))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (request := read_frame(stdin)) is not None:
        variables, sources, values, limits, seconds = pickle.loads(request)  # noqa: S301 - from the parent
        # SIGALRM's default action ends the process, even inside native code that never returns
        signal.setitimer(signal.ITIMER_REAL, seconds + GRACE)
        try:
            answers = answer(variables, sources, values, limits)
        except MemoryError:
            answers = [{"error": "the evaluation ran out of memory", "hint": None, "resource": True}] * len(
                sources
            )
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        write_frame(stdout, json.dumps(answers).encode())
        if any(entry.get("resource") for entry in answers):
            return 3  # after std::bad_alloc cel-cpp's state is not to be trusted: the parent starts a new one
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
