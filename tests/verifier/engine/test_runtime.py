"""verifier/engine/_runtime.py (and _private/supervise.py): the GPU child's supervisor.

The fake children in fake_children/ test what the parent does when its child hangs, crashes, floods its
output or answers nonsense; the no-GPU test runs the real child program.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.verifier.engine.helpers import FAKE_CHILDREN, FAKE_TENSORRT
from verifier.engine._runtime import GpuOptions, GpuOutcome, inspect_on_gpu

SHA = "ab" * 32


def fake(name: str, **options: object) -> GpuOptions:
    return GpuOptions(child_command=(sys.executable, str(FAKE_CHILDREN / name)), **options)  # type: ignore[arg-type]


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    path = tmp_path / "model.plan"
    path.write_bytes(b"ftrt" + bytes(60))
    return path


def test_real_child_reports_no_gpu_without_importing_tensorrt(engine: Path, tmp_path: Path) -> None:
    marker = tmp_path / "tensorrt-imported"
    env = dict(os.environ)
    # The fake tensorrt package comes first on the path; CUDA_VISIBLE_DEVICES="" hides every GPU from the
    # driver, so the test means the same on a GPU machine (cuInit: no device) and without one.
    env["PYTHONPATH"] = os.pathsep.join([str(FAKE_TENSORRT), env.get("PYTHONPATH", "")])
    env["FAKE_TENSORRT_MARKER"] = str(marker)
    env["CUDA_VISIBLE_DEVICES"] = ""
    run = inspect_on_gpu(engine, SHA, GpuOptions(env=env))
    assert run.outcome is GpuOutcome.NO_GPU, run
    assert run.message.startswith("no GPU: ")
    assert run.report is not None and run.report.gpu is not None
    assert run.report.gpu.available is False
    assert run.report.runtime is None
    assert not marker.exists(), "the child imported tensorrt although there is no GPU"
    assert run.returncode == 0


def test_hanging_child_is_killed_at_the_time_limit(engine: Path) -> None:
    started = time.monotonic()
    run = inspect_on_gpu(engine, SHA, fake("fake_hangs.py", timeout_s=1.5))
    elapsed = time.monotonic() - started
    assert run.outcome is GpuOutcome.TIMEOUT
    assert "did not answer within 1.5 s and was killed" in run.message
    assert "fake child: hanging" in run.message  # the last thing it said
    assert run.signal == "SIGKILL"
    assert elapsed < 10


def test_segfaulting_child(engine: Path) -> None:
    run = inspect_on_gpu(engine, SHA, fake("fake_segfaults.py"))
    assert run.outcome is GpuOutcome.CRASHED
    assert run.signal == "SIGSEGV"
    assert "killed by SIGSEGV" in run.message
    assert "about to crash in native code" in run.stderr_tail
    assert run.to_json()["stderr_tail"]


def test_child_printing_garbage(engine: Path) -> None:
    run = inspect_on_gpu(engine, SHA, fake("fake_prints_garbage.py"))
    assert run.outcome is GpuOutcome.BAD_OUTPUT
    assert "not an answer" in run.message
    assert "garbage" in run.message


def test_child_printing_json_that_is_not_an_answer(engine: Path) -> None:
    run = inspect_on_gpu(engine, SHA, fake("fake_prints_wrong_json.py"))
    assert run.outcome is GpuOutcome.BAD_OUTPUT


def test_child_flooding_stdout_is_killed(engine: Path) -> None:
    run = inspect_on_gpu(engine, SHA, fake("fake_floods_stdout.py", timeout_s=60))
    assert run.outcome is GpuOutcome.BAD_OUTPUT
    assert "far more than an answer" in run.message
    assert run.elapsed_s < 30


def test_child_exiting_with_an_error(engine: Path) -> None:
    run = inspect_on_gpu(engine, SHA, fake("fake_exits_nonzero.py"))
    assert run.outcome is GpuOutcome.CRASHED
    assert "exited with status 3 without an answer" in run.message
    assert "CUDA error 999" in run.message


def _gone_or_zombie(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status


def test_grandchild_holding_the_pipes_does_not_block_and_is_killed(engine: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    env = {**os.environ, "FAKE_GRANDCHILD_PIDFILE": str(pidfile)}
    started = time.monotonic()
    run = inspect_on_gpu(engine, SHA, fake("fake_leaves_grandchild.py", timeout_s=60, env=env))
    assert time.monotonic() - started < 15
    assert run.outcome is GpuOutcome.NO_GPU  # its answer still counts
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while not _gone_or_zombie(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone_or_zombie(pid)


def test_answer_for_other_bytes_is_rejected(engine: Path, tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text(
        json.dumps(
            {
                "protocol": 1,
                "status": "no_gpu",
                "message": "no GPU: fake",
                "timings": {},
                "engine_sha256": "cd" * 32,
            }
        )
    )
    run = inspect_on_gpu(
        engine, SHA, fake("fake_answers.py", env={**os.environ, "FAKE_CHILD_ANSWER": str(answer)})
    )
    assert run.outcome is GpuOutcome.REJECTED
    assert "not the verified" in run.message


def test_ok_without_the_hash_of_the_loaded_bytes_is_not_ok(engine: Path, tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text(
        json.dumps({"protocol": 1, "status": "ok", "message": "loaded", "timings": {}, "engine_sha256": None})
    )
    run = inspect_on_gpu(
        engine, SHA, fake("fake_answers.py", env={**os.environ, "FAKE_CHILD_ANSWER": str(answer)})
    )
    assert run.outcome is GpuOutcome.BAD_OUTPUT
    assert "without the SHA-256 of the bytes it loaded" in run.message


def test_arguments_passed_to_the_child(engine: Path, tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text(
        json.dumps({"protocol": 1, "status": "no_gpu", "message": "no GPU: fake", "timings": {}})
    )
    argv_file = tmp_path / "argv.json"
    env = {**os.environ, "FAKE_CHILD_ANSWER": str(answer), "FAKE_CHILD_ARGV": str(argv_file)}
    inspect_on_gpu(engine, SHA, fake("fake_answers.py", env=env))
    args = json.loads(argv_file.read_text())
    assert args[args.index("--engine") + 1] == str(engine.resolve())
    assert args[args.index("--sha256") + 1] == SHA
    assert "--allow-host-code" not in args
    inspect_on_gpu(engine, SHA, fake("fake_answers.py", env=env, allow_host_code=True))
    assert "--allow-host-code" in json.loads(argv_file.read_text())


def test_child_that_cannot_be_started(engine: Path) -> None:
    run = inspect_on_gpu(engine, SHA, GpuOptions(child_command=("/nonexistent/python3",)))
    assert run.outcome is GpuOutcome.SPAWN_FAILED
    assert "could not be started" in run.message
