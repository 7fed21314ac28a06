"""Run one child process with a time limit and bounded output, whatever the child does.

The child gets a process group of its own, so that on timeout the whole group (the child and anything it
started) is killed with SIGKILL. Standard output is kept up to a limit (beyond it the group is killed: a
well-behaved child prints one small JSON object); of standard error only the last bytes are kept.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: After the child exits, how long to wait for descendants that still hold its pipes open.
_DRAIN_GRACE_S = 1.0
_READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Finished:
    """How a supervised child ended."""

    #: ``Popen.returncode``: the exit status, or minus the signal number that ended it.
    returncode: int | None
    stdout: bytes
    #: The last bytes of standard error (decoded leniently).
    stderr_tail: str
    elapsed_s: float
    timed_out: bool
    #: True when standard output exceeded its limit and the child was killed for it.
    output_overflow: bool

    @property
    def signal_name(self) -> str | None:
        """``"SIGSEGV"`` etc. when a signal ended the child."""
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    # The group id is the child's pid (start_new_session); it outlives the child while descendants remain.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def run_supervised(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    max_stdout: int = 16 * 1024 * 1024,
    stderr_tail: int = 64 * 1024,
) -> Finished:
    """Run ``argv`` and return how it ended; never raises for anything the child does.

    Raises :class:`OSError` only when the program cannot be started at all.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
    )
    if process.stdout is None or process.stderr is None:  # both were asked for as pipes
        raise OSError("the child's output pipes were not created")
    out = bytearray()
    err = bytearray()
    timed_out = False
    overflow = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, "out")
        selector.register(process.stderr, selectors.EVENT_READ, "err")
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _DRAIN_GRACE_S:
                _kill_group(process)  # descendants still hold the pipes; the answer is complete
                break
            if now >= deadline:
                timed_out = exited_at is None
                _kill_group(process)
                break
            wait = min(deadline - now, 0.1 if exited_at is None else _DRAIN_GRACE_S)
            for key, _ in selector.select(timeout=wait):
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                if key.data == "out":
                    out += chunk
                    if len(out) > max_stdout:
                        overflow = True
                else:
                    err += chunk
                    if len(err) > 2 * stderr_tail:
                        del err[:-stderr_tail]
            if overflow:
                _kill_group(process)
                break
    process.stdout.close()
    process.stderr.close()
    try:
        returncode = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_group(process)
        timed_out = True
        returncode = process.wait()
    return Finished(
        returncode=returncode,
        stdout=bytes(out[:max_stdout]),
        stderr_tail=bytes(err[-stderr_tail:]).decode("utf-8", errors="replace"),
        elapsed_s=time.monotonic() - started,
        timed_out=timed_out,
        output_overflow=overflow,
    )
