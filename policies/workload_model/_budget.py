"""The CPU one evaluation may spend on pure Python work, and the threads that work runs in.

Reading a workload (:func:`policies.workload_model._extraction.extract`) and preparing the data of CEL
expressions walk the
whole object; an object built to make that slow must not stall the admissions answered beside it. So that
work runs off the event loop, in :func:`offload`'s threads (unless the object is :func:`small`), and is
charged to the request's
:class:`Budget`: the CPU time of the threads running it (``time.thread_time``), checked every few hundred
steps, and the request's deadline. Past either, :class:`BudgetExceeded` ends the work, and the evaluator
answers with each policy's ``onError``. A thread alone would not bound anything (Python runs one thread at a
time, so unbounded work there still takes its share from the loop); the budget and the workload limits
(:mod:`policies.workload_model._pods`) do.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

from verifier.base import Deadline, TrtguardError

__all__ = [
    "DEFAULT_CPU_SECONDS",
    "INLINE_VALUES",
    "UNLIMITED",
    "Budget",
    "BudgetExceeded",
    "offload",
    "small",
    "within",
]

T = TypeVar("T")

#: CPU seconds one evaluation may spend on extraction and data preparation, unless the engine says otherwise.
DEFAULT_CPU_SECONDS: Final = 2.0
#: Objects of at most this many values together are read on the event loop: that costs under a millisecond,
#: less than the hand-over to a thread and back (about a tenth of one) is worth for them.
INLINE_VALUES: Final = 1000
#: Steps between two looks at the clock (a look costs about a microsecond; a step far less).
_STEPS_PER_CHECK: Final = 256
#: Threads evaluations run their pure work in: few, so that heavy requests queue among themselves rather
#: than take turns with the event loop many at a time.
_WORKERS: Final = 4


class BudgetExceeded(TrtguardError):
    """An evaluation used up its CPU budget or its deadline: what it was judging could not be checked."""

    exit_code = 1


class Budget:
    """The CPU seconds and the deadline of one evaluation's pure work (see the module's docstring).

    One evaluation runs its pure work one call at a time (:meth:`run`), so the budget keeps the start of the
    call under way in itself.
    """

    __slots__ = ("_deadline", "_spent", "_started", "_steps", "seconds")

    def __init__(self, seconds: float, deadline: Deadline | None = None) -> None:
        self.seconds = seconds
        self._deadline = deadline or Deadline.never()
        self._spent = 0.0
        self._steps = 0
        self._started: float | None = None

    @property
    def unbounded(self) -> bool:
        """Neither a CPU limit nor a deadline."""
        return math.isinf(self.seconds) and math.isinf(self._deadline.expires_at)

    def step(self, count: int = 1) -> None:
        """Count ``count`` steps of work; every few hundred, :meth:`check`."""
        self._steps += count
        if self._steps >= _STEPS_PER_CHECK:
            self._steps = 0
            self.check()

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` when the CPU time or the deadline is spent."""
        if self.unbounded:
            return
        started = self._started
        spent = self._spent + (time.thread_time() - started if started is not None else 0.0)
        if spent > self.seconds:
            raise BudgetExceeded(
                f"judging this object took more than its CPU budget of {self.seconds:g} s",
                hint="the object is too large or too intricate to judge in one admission; split it",
            )
        if self._deadline.remaining() <= 0:
            raise BudgetExceeded(
                "judging this object ran out of time", hint="retry; if it persists, split the object"
            )

    def run(self, call: Callable[[], T]) -> T:
        """``call()`` in this thread, its CPU time charged to the budget."""
        self.check()
        self._started = started = time.thread_time()
        try:
            return call()
        finally:
            self._started = None
            self._spent += time.thread_time() - started


#: The budget of work that nothing bounds but its input (``check`` of a file, a test).
UNLIMITED: Final = Budget(math.inf)


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="trtguard-evaluation")


async def offload(budget: Budget, call: Callable[[], T]) -> T:
    """``call()`` in an evaluation thread, charged to ``budget``; raises :class:`BudgetExceeded` there."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), budget.run, call)


async def within(budget: Budget, call: Callable[[], T], *data: object) -> T:
    """``call()`` charged to ``budget``: on the event loop when the ``data`` it walks is :func:`small`, in an
    evaluation thread (:func:`offload`) otherwise."""
    if small(*data):
        return budget.run(call)
    return await offload(budget, call)


def small(*values: object, limit: int = INLINE_VALUES) -> bool:
    """Whether ``values`` hold at most ``limit`` JSON values together (counting stops past the limit)."""
    stack = [value for value in values if value is not None]
    count = 0
    while stack:
        value = stack.pop()
        count += 1
        if count > limit:
            return False
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if count + len(stack) + len(children) > limit:
            return False  # every value on the stack counts: past the limit without copying a wide list
        stack.extend(children)
    return True
