"""The SQLite writer's thread: calls run in order, one at a time, and answer what they returned or raised."""

from __future__ import annotations

import asyncio
import threading

import pytest

from decisionlog._writer_thread import WriterThread


async def test_calls_run_in_order_on_one_thread_and_answer_their_result() -> None:
    thread = WriterThread("test-writer")
    seen: list[tuple[int, str]] = []

    def call(number: int) -> int:
        seen.append((number, threading.current_thread().name))
        return number * 2

    try:
        answers = await asyncio.gather(*(thread.run(call, n) for n in range(20)))
    finally:
        thread.shutdown()
    assert answers == [n * 2 for n in range(20)]
    assert seen == [(n, "test-writer") for n in range(20)]


async def test_what_a_call_raises_reaches_its_caller_and_the_thread_goes_on() -> None:
    thread = WriterThread("test-writer")

    def fail() -> None:
        raise ValueError("disk on fire")

    try:
        with pytest.raises(ValueError, match="disk on fire"):
            await thread.run(fail)
        assert await thread.run(lambda: "still here") == "still here"
    finally:
        thread.shutdown()


def test_a_call_whose_loop_closed_meanwhile_leaves_the_thread_working() -> None:
    thread = WriterThread("test-writer")
    release = threading.Event()

    async def ask_and_leave() -> None:
        task = asyncio.ensure_future(thread.run(release.wait))
        await asyncio.sleep(0)  # the call is queued; the loop then closes before it answers
        task.cancel()

    asyncio.run(ask_and_leave())
    release.set()
    try:
        assert asyncio.run(thread.run(lambda: 42)) == 42  # a later loop is answered as before
    finally:
        thread.shutdown()
