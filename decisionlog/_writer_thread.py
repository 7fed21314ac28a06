"""The SQLite log's writer thread: its blocking calls run there one at a time, in the order asked, and each
answers the event loop that asked with one wake-up.

What ``loop.run_in_executor`` on a pool of one thread does, at about two thirds of its cost on the event
loop (measured: 40 against 55-65 us a call): no ``concurrent.futures.Future`` chained to the asyncio one
under locks, no work item, no idle semaphore. Every batch of decisions pays this hand-off once.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")
_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[object, ...]]


class WriterThread:
    """One thread running the calls given to :meth:`run` in order, until :meth:`shutdown`."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, call: Callable[..., _T], *args: object) -> _T:
        """``call(*args)`` on the thread, after the calls asked before it; raises what it raised.

        Once asked, the call runs even if the caller is cancelled meanwhile (as one already started on an
        executor does); its outcome then goes nowhere.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._calls.put((loop, future, call, args))
        return await future

    def shutdown(self) -> None:
        """End the thread once the calls asked before this have run (it does not wait for them)."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (asked := self._calls.get()) is not None:
            loop, future, call, args = asked
            try:
                result, error = call(*args), None
            except BaseException as raised:  # handed to the caller, as an executor does
                result, error = None, raised
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for the answer
                loop.call_soon_threadsafe(_settle, future, result, error)
            del asked, future, result, error  # nothing of a call outlives it on this thread


def _settle(future: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
