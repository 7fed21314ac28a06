"""Where policy expressions run: inline when their worst case is cheap, otherwise in a process that can be
stopped.

cel-cpp has no time or memory limit of its own (docs/cel.md): an expression within every static limit can
still spend seconds and gigabytes on a large annotation. :attr:`CelProgram.inline` says, from the static
cost bound, whether an expression is cheap whatever the data; those run in the caller's thread (on the
event loop: they take microseconds). The others go to a small pool of worker processes
(:mod:`policies.cel.worker`), each under an address-space limit, with a wall-clock limit that
kills the process when it passes. A stopped, killed or crashed evaluation is a :class:`CelEvaluationError`
with ``resource=True``, never an answer; the pool replaces the process.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import os
import pickle
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import policies
from policies.cel import RESOURCE_HINT, CelActivation, CelEvaluationError, CelProgram
from policies.cel.worker import HEADER

__all__ = ["CelSandbox", "SandboxLimits", "shared_sandbox"]

Outcome = bool | CelEvaluationError
"""What one expression came to: its value, or why there is none."""

#: The folder that holds the ``policies`` package: the workers import the same code as this process.
_CODE: Final = str(Path(policies.__file__).resolve().parent.parent)


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Bounds on the evaluation of expressions whose cost is not bounded statically."""

    #: worker processes, i.e. such evaluations at once; more wait for a free one within their time
    workers: int = 2
    #: seconds one evaluation (all such expressions of one policy) may take, less when the deadline is nearer
    seconds: float = 2.0
    #: bytes of address space a worker may add to what it holds when idle (~40 MiB resident)
    memory: int = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Failure:
    """Why a worker gave no answer, completing "the expression ..."."""

    what: str


class _Stopped(Exception):
    """The worker did not answer in time (no argument), or ended (how, in words)."""


class _Worker:
    """One worker process and the framed pipe to it."""

    def __init__(self, memory: int) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (_CODE, env.get("PYTHONPATH"))))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "policies.cel.worker", str(memory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def ask(self, payload: bytes, deadline: float) -> Any:
        """Send one request and read its answer (JSON) by ``deadline`` (``time.monotonic()``)."""
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None:
            raise _Stopped("its pipes are closed")
        self._send(stdin.fileno(), HEADER.pack(len(payload)) + payload, deadline)
        return json.loads(self._receive(stdout.fileno(), deadline))

    def _send(self, fd: int, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            if not select.select([], [fd], [], self._left(deadline))[1]:
                raise _Stopped
            try:
                view = view[os.write(fd, view[: 1 << 16]) :]
            except BrokenPipeError:
                raise _Stopped(self._ended()) from None

    def _receive(self, fd: int, deadline: float) -> bytes:
        data = b""
        wanted = HEADER.size
        while len(data) < wanted:
            if not select.select([fd], [], [], self._left(deadline))[0]:
                raise _Stopped
            chunk = os.read(fd, max(wanted - len(data), 1 << 16))
            if not chunk:
                raise _Stopped(self._ended())
            data += chunk
            if wanted == HEADER.size and len(data) >= HEADER.size:
                wanted += HEADER.unpack(data[: HEADER.size])[0]
        return data[HEADER.size : wanted]

    @staticmethod
    def _left(deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Stopped
        return left

    def _ended(self) -> str:
        status = self.process.wait()
        return f"killed by signal {-status}" if status < 0 else f"exit status {status}"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class CelSandbox:
    """Evaluates policy expressions, the expensive ones in worker processes under ``limits``.

    Thread-safe; workers start when first needed and end with this process (they exit when their pipe
    closes) or at :meth:`close`.
    """

    def __init__(self, limits: SandboxLimits = SandboxLimits()) -> None:
        self.limits = limits
        # LIFO: a warm worker is reused first; None is a slot whose worker has not been started (or died)
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        for _ in range(limits.workers):
            self._idle.put(None)
        # Threads of their own, one per worker: evaluations waiting for a worker queue here, holding no
        # thread of the event loop's default executor (which parses requests and reloads policies).
        self._threads = ThreadPoolExecutor(max(1, limits.workers), thread_name_prefix="trtguard-cel")

    async def evaluate_bools(
        self, programs: Sequence[CelProgram], activation: CelActivation, *, seconds: float
    ) -> list[Outcome]:
        """Each program's value on ``activation``, or the error that stopped it, in order.

        Inline programs run here; the others together in one worker, from a thread, within ``seconds``
        from now (the request's time left) and the sandbox's own limit, whichever is shorter.
        """
        until = time.monotonic() + seconds
        outcomes: list[Outcome | None] = []
        isolated: list[CelProgram] = []
        for program in programs:
            if program.inline:
                outcomes.append(_inline(program, activation))
            else:
                outcomes.append(None)
                isolated.append(program)
        if isolated:
            loop = asyncio.get_running_loop()
            call = functools.partial(self._evaluate, isolated, activation, until)
            answers = iter(await loop.run_in_executor(self._threads, call))
            return [outcome if outcome is not None else next(answers) for outcome in outcomes]
        return [outcome for outcome in outcomes if outcome is not None]

    def evaluate(
        self, programs: Sequence[CelProgram], values: CelActivation, *, seconds: float
    ) -> list[Outcome]:
        """Evaluate ``programs`` (same variables and limits) in a worker; blocks for at most ``seconds``."""
        return self._evaluate(programs, values, time.monotonic() + seconds)

    def _evaluate(self, programs: Sequence[CelProgram], values: CelActivation, until: float) -> list[Outcome]:
        if not programs:
            return []
        first = programs[0]
        if any(p.variables != first.variables or p.limits != first.limits for p in programs):
            raise ValueError("programs evaluated together must share their variables and limits")
        # measured from now: a call that waited for a thread has less time left, maybe none
        allowed = max(0.0, min(until - time.monotonic(), self.limits.seconds))
        if allowed == 0:  # the request's time is up: no worker to take, none to stop
            return [_stopped(p, "was not evaluated: the request's time was up") for p in programs]
        deadline = time.monotonic() + allowed
        payload = pickle.dumps(
            (sorted(first.variables), [p.source for p in programs], dict(values), first.limits, allowed),
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        try:
            worker = self._idle.get(timeout=allowed)
        except queue.Empty:
            return [
                _stopped(p, f"was not evaluated: no evaluation process was free within {allowed:.2g} s")
                for p in programs
            ]
        try:
            worker, answers = self._exchange(worker, payload, deadline, allowed)
        except BaseException:
            self._idle.put(None)  # the slot stays; its worker, in an unknown state, does not
            if worker is not None:
                worker.kill()
            raise
        self._idle.put(worker)
        if isinstance(answers, _Failure):
            return [_stopped(p, answers.what) for p in programs]
        if not isinstance(answers, list) or len(answers) != len(programs):
            return [
                _stopped(p, "was stopped: the evaluation process answered something else") for p in programs
            ]
        return [_outcome(program, answer) for program, answer in zip(programs, answers, strict=True)]

    def _exchange(
        self, worker: _Worker | None, payload: bytes, deadline: float, allowed: float
    ) -> tuple[_Worker | None, Any]:
        """Ask ``worker``, started first where needed: the worker to keep, and its answer or a
        :class:`_Failure`. A worker that did not answer is killed."""
        if worker is not None and not worker.running:  # it ended between two requests
            worker.kill()
            worker = None
        try:
            worker = worker or _Worker(self.limits.memory)
        except OSError as error:
            return None, _Failure(f"was not evaluated: no evaluation process started ({error.strerror})")
        try:
            answers = worker.ask(payload, deadline)
            if isinstance(answers, list) and any(isinstance(a, dict) and a.get("resource") for a in answers):
                worker.kill()  # it exits after hitting a bound (worker.py): do not hand it another request
                return None, answers
            return worker, answers
        except _Stopped as stopped:
            failure = (
                _Failure(f"was stopped: the process evaluating it ended ({stopped.args[0]})")
                if stopped.args
                else _Failure(f"did not finish within {allowed:.2g} s and was stopped")
            )
        except (OSError, ValueError) as error:  # a pipe that broke, an answer that is not JSON
            failure = _Failure(f"was stopped: the evaluation process failed ({error})")
        worker.kill()
        return None, failure

    def close(self) -> None:
        """End the idle workers (a busy one ends when its evaluation is done and its pipe found closed)."""
        self._threads.shutdown(wait=False, cancel_futures=True)
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                return
            if worker is not None:
                worker.kill()


def _inline(program: CelProgram, activation: CelActivation) -> Outcome:
    # An activation prepared once serves every admission of its engine (VerifiedEvidence keeps it): each
    # program is evaluated on it once. Only true and false are kept: an error is evaluated again.
    known = activation.answer(program)
    if known is not None:
        return known
    try:
        value = program.evaluate_bool(activation)
    except CelEvaluationError as error:
        return error
    activation.remember(program, value)
    return value


def _stopped(program: CelProgram, what: str) -> CelEvaluationError:
    return CelEvaluationError(
        f"the expression {what}\n    {program.source}",
        location=program.location,
        hint=RESOURCE_HINT,
        resource=True,
    )


def _outcome(program: CelProgram, answer: Any) -> Outcome:
    if isinstance(answer, dict) and isinstance(answer.get("ok"), bool):
        return bool(answer["ok"])
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        resource = answer.get("resource") is True
        hint = answer.get("hint")
        message = str(answer["error"])
        if resource and "\n" not in message:
            message += f"\n    {program.source}"
        return CelEvaluationError(
            message,
            location=program.location,
            hint=hint if isinstance(hint, str) else None,
            resource=resource,
        )
    return _stopped(program, "was stopped: the evaluation process answered something else")


_shared: CelSandbox | None = None
_shared_lock = threading.Lock()


def shared_sandbox() -> CelSandbox:
    """The process's sandbox with the default limits, made on first use and closed at exit."""
    global _shared  # noqa: PLW0603 - one pool per process, shared by every policy evaluator it builds
    with _shared_lock:
        if _shared is None:
            _shared = CelSandbox()
            atexit.register(_shared.close)
        return _shared
