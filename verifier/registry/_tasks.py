"""Concurrent fetches that fail like sequential ones: with the first error itself, not a group of them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def task_group() -> AsyncIterator[asyncio.TaskGroup]:
    """An :class:`asyncio.TaskGroup` that raises the first failure of its tasks unwrapped.

    Callers (and their callers' ``except EvidenceUnavailable``) then see the registry error as if the fetches
    had run one after the other; the group still cancels the remaining tasks on the first failure.
    """
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failures:
        raise _first(failures) from None


def _first(failures: BaseExceptionGroup[BaseException]) -> BaseException:
    error: BaseException = failures
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
