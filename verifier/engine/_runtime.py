"""The parent side of the GPU check: run the GPU child, read its answer, and say what happened.

The child (:mod:`verifier.engine._private.child`) deserializes the engine with TensorRT in a process of its
own, under a time limit (see :mod:`verifier.engine._private.supervise`). Whatever it does — answer, crash on
a signal, hang, exit early, print garbage — :func:`inspect_on_gpu` returns a :class:`GpuRun` that says so;
it never raises because of the child.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from verifier.engine._dtypes import TENSORRT_DTYPES
from verifier.engine._private.supervise import Finished, run_supervised

#: The child program, run as a script (it imports nothing from this package).
CHILD_PROGRAM = Path(__file__).resolve().parent / "_private" / "child.py"
DEFAULT_TIMEOUT_S = 120.0
#: Module names under which the child may have imported the lean runtime.
LEAN_MODULES = frozenset({"tensorrt_lean", "tensorrt_lean_bindings"})
_STDERR_LINES = 20


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class GpuProbe(_Strict):
    """What the CUDA driver said about device 0, before any TensorRT code was loaded."""

    available: bool
    reason: str | None = None
    device_nodes: list[str] = []
    count: int | None = None
    name: str | None = None
    compute_capability: str | None = None
    total_memory: int | None = None
    driver_version: str | None = None


class RuntimeModule(_Strict):
    """The TensorRT Python module the child used."""

    module: str
    version: str


class LogMessage(_Strict):
    """One message TensorRT sent to the logger."""

    severity: str
    message: str


class EngineTensor(_Strict):
    """One I/O tensor as ``ICudaEngine`` reports it (TensorRT's own enum names)."""

    name: str
    mode: str
    dtype: str
    shape: list[int]
    format: str
    location: str
    shape_tensor: bool

    @property
    def canonical_dtype(self) -> str:
        """The dtype in the vocabulary shared with ONNX (:mod:`verifier.engine._dtypes`)."""
        return TENSORRT_DTYPES.get(self.dtype, self.dtype.lower())


class ShapeValues(_Strict):
    """Min/opt/max values of a shape-tensor input."""

    min: list[int]
    opt: list[int]
    max: list[int]


class ProfileRange(_Strict):
    """Min/opt/max shape of one input in one optimization profile."""

    min: list[int]
    opt: list[int]
    max: list[int]
    values: ShapeValues | None = None


class EngineProfile(_Strict):
    """One optimization profile: a range per input tensor."""

    inputs: dict[str, ProfileRange]


class EngineFacts(_Strict):
    """Engine-wide facts; ``None`` where this TensorRT version has no such attribute (see ``unavailable``)."""

    name: str | None
    num_layers: int | None
    io_tensors: list[EngineTensor]
    optimization_profiles: list[EngineProfile]
    hardware_compatibility_level: str | None
    profiling_verbosity: str | None
    engine_capability: str | None
    device_memory_size: int | None
    refittable: bool | None
    unavailable: list[str]


class InspectorOutput(_Strict):
    """The engine inspector's JSON, or why there is none."""

    available: bool
    reason: str | None
    information: str | None


class ChildReport(_Strict):
    """The one JSON object the child prints (protocol 1)."""

    protocol: Literal[1]
    status: Literal["ok", "no_gpu", "no_runtime", "rejected", "deserialize_failed", "error"]
    message: str
    timings: dict[str, float]
    gpu: GpuProbe | None = None
    engine_sha256: str | None = None
    runtime: RuntimeModule | None = None
    log: list[LogMessage] = []
    log_dropped: int = 0
    engine: EngineFacts | None = None
    inspector: InspectorOutput | None = None
    traceback: str | None = None


class GpuOutcome(StrEnum):
    """How the GPU check ended."""

    OK = "ok"
    NO_GPU = "no_gpu"
    NO_RUNTIME = "no_runtime"
    #: The engine file changed between hashing and loading; the child refused to deserialize it.
    REJECTED = "rejected"
    DESERIALIZE_FAILED = "deserialize_failed"
    #: A Python exception in the child.
    CHILD_ERROR = "child_error"
    TIMEOUT = "timeout"
    #: The child died on a signal or exited with an error before answering.
    CRASHED = "crashed"
    #: The child exited but what it printed is not an answer.
    BAD_OUTPUT = "bad_output"
    SPAWN_FAILED = "spawn_failed"


_CHILD_STATUS = {
    "ok": GpuOutcome.OK,
    "no_gpu": GpuOutcome.NO_GPU,
    "no_runtime": GpuOutcome.NO_RUNTIME,
    "rejected": GpuOutcome.REJECTED,
    "deserialize_failed": GpuOutcome.DESERIALIZE_FAILED,
    "error": GpuOutcome.CHILD_ERROR,
}


@dataclass(frozen=True, slots=True)
class GpuOptions:
    """How to run the GPU check."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    #: Let the runtime run host code embedded in the plan (a version-compatible plan's lean runtime).
    #: The caller sets it only after the engine's hash and its manifest's signature have passed.
    allow_host_code: bool = False
    #: The command that starts the child, before its arguments; default: this interpreter running
    #: :data:`CHILD_PROGRAM`.
    child_command: Sequence[str] | None = None
    #: The child's environment; default: this process's.
    env: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class GpuRun:
    """The result of one GPU check."""

    outcome: GpuOutcome
    message: str
    report: ChildReport | None
    elapsed_s: float
    returncode: int | None
    signal: str | None
    stderr_tail: str

    @property
    def errors(self) -> list[str]:
        """TensorRT's ERROR and INTERNAL_ERROR messages."""
        if self.report is None:
            return []
        return [m.message for m in self.report.log if m.severity in ("ERROR", "INTERNAL_ERROR")]

    def to_json(self) -> dict[str, Any]:
        """The ``gpu`` object of the JSON report (the inspector's raw JSON left out)."""
        report = self.report
        data: dict[str, Any] = {
            "outcome": self.outcome.value,
            "message": self.message,
            "elapsed_s": round(self.elapsed_s, 3),
            "returncode": self.returncode,
            "signal": self.signal,
        }
        if report is not None:
            data["device"] = report.gpu.model_dump() if report.gpu else None
            data["runtime"] = report.runtime.model_dump() if report.runtime else None
            data["log"] = [m.model_dump() for m in report.log]
            data["engine"] = report.engine.model_dump() if report.engine else None
            if report.inspector is not None:
                data["inspector"] = {
                    "available": report.inspector.available,
                    "reason": report.inspector.reason,
                }
            data["timings"] = {key: round(value, 4) for key, value in report.timings.items()}
        if self.outcome not in (GpuOutcome.OK, GpuOutcome.DESERIALIZE_FAILED, GpuOutcome.NO_GPU):
            data["stderr_tail"] = self.stderr_tail
        return data


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-_STDERR_LINES:])


def _parse_answer(text: str) -> ChildReport | None:
    """The child's answer: exactly one line holding one valid JSON object, else ``None``."""
    if text.count("\n") != 1 or not text.endswith("\n"):
        return None
    try:
        return ChildReport.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        return None


def _interpret(finished: Finished, sha256: str, timeout_s: float) -> GpuRun:
    def run(outcome: GpuOutcome, message: str, report: ChildReport | None = None) -> GpuRun:
        return GpuRun(
            outcome=outcome,
            message=message,
            report=report,
            elapsed_s=finished.elapsed_s,
            returncode=finished.returncode,
            signal=finished.signal_name,
            stderr_tail=_tail(finished.stderr_tail),
        )

    stderr = _tail(finished.stderr_tail)
    said = f"; its last output: {stderr.splitlines()[-1]}" if stderr else ""
    if finished.timed_out:
        return run(
            GpuOutcome.TIMEOUT,
            f"the GPU child did not answer within {timeout_s:g} s and was killed{said}",
        )
    if finished.output_overflow:
        return run(GpuOutcome.BAD_OUTPUT, "the GPU child printed far more than an answer and was killed")
    if finished.signal_name is not None:
        return run(
            GpuOutcome.CRASHED,
            f"the GPU child was killed by {finished.signal_name} after {finished.elapsed_s:.1f} s{said}",
        )
    if finished.returncode != 0:
        return run(
            GpuOutcome.CRASHED,
            f"the GPU child exited with status {finished.returncode} without an answer{said}",
        )
    text = finished.stdout.decode("utf-8", errors="replace")
    report = _parse_answer(text)
    if report is None:
        shown = text[:200] if text else "nothing"
        return run(GpuOutcome.BAD_OUTPUT, f"the GPU child printed something that is not an answer: {shown!r}")
    if report.engine_sha256 is not None and report.engine_sha256 != sha256:
        return run(
            GpuOutcome.REJECTED,
            f"the GPU child loaded bytes with SHA-256 {report.engine_sha256}, not the verified {sha256}",
            report,
        )
    if report.status == "ok" and report.engine_sha256 is None:
        # An engine deserialized without the hash of what was loaded says nothing about the verified file.
        return run(
            GpuOutcome.BAD_OUTPUT,
            "the GPU child answered ok without the SHA-256 of the bytes it loaded",
            report,
        )
    return run(_CHILD_STATUS[report.status], report.message, report)


def inspect_on_gpu(engine: Path, sha256: str, options: GpuOptions | None = None) -> GpuRun:
    """Deserialize ``engine`` in a GPU child process and return what happened.

    ``sha256`` is the hash the caller verified; the child re-hashes the bytes it loads and refuses to
    deserialize anything else. Call this only after the hash and the manifest signature have passed.
    Blocks until the child answers or its time limit ends.
    """
    options = options or GpuOptions()
    command = list(options.child_command or (sys.executable, str(CHILD_PROGRAM)))
    with tempfile.TemporaryDirectory(prefix="trtguard-gpu-") as scratch:
        argv = [*command, "--engine", str(engine.resolve()), "--sha256", sha256, "--tmpdir", scratch]
        if options.allow_host_code:
            argv.append("--allow-host-code")
        env = dict(options.env if options.env is not None else os.environ)
        # TensorRT writes the embedded lean runtime of version-compatible plans to a temporary file.
        env["TMPDIR"] = scratch
        try:
            finished = run_supervised(argv, timeout_s=options.timeout_s, env=env, cwd=Path(scratch))
        except OSError as error:
            return GpuRun(
                outcome=GpuOutcome.SPAWN_FAILED,
                message=f"the GPU child could not be started: {error}",
                report=None,
                elapsed_s=0.0,
                returncode=None,
                signal=None,
                stderr_tail="",
            )
    return _interpret(finished, sha256, options.timeout_s)
