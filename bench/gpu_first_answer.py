"""Time from invoking ``verify-engine --gpu`` to its first GPU answer, against the same command without --gpu.

Signs a build manifest for ENGINE with a fresh key, then runs, ``--runs`` times and alternating: a bare
interpreter start (``python -c pass``), ``verify-engine`` with the static checks only (the baseline), and
``verify-engine --gpu``. The GPU answer is the child's: the engine's facts, or TensorRT's refusal (every
public plan is refused by the lean runtime, which loads only version-compatible engines). Prints the wall
time of each command, the GPU child's own phases (CUDA probe, read + hash, import, Runtime, deserialize),
the first (cold) run apart from the others.

The command is ``python -m trtguard verify-engine`` where the whole CLI imports; otherwise (a slim GPU
image without the webhook's dependencies) the same ``verify-engine`` handler through its own parser.

    python bench/gpu_first_answer.py --engine PLAN [--runs 4] [--timeout 120]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verifier.base._digests import hash_file  # noqa: E402
from verifier.crypto._intoto import ResourceDescriptor, Statement, sign_statement  # noqa: E402
from verifier.crypto._keys import generate_private_key  # noqa: E402
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, load_manifest  # noqa: E402

# verify-engine through the handler trtguard calls, with trtguard's error handling, for images without
# the rest of the CLI's dependencies.
_SLIM = """
import argparse, sys
from verifier._cli import engine
from verifier.base._errors import TrtguardError
parser = argparse.ArgumentParser(prog="trtguard")
engine.register(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(["verify-engine", *sys.argv[1:]])
try:
    sys.exit(args.handler(args))
except TrtguardError as error:
    print(f"trtguard: error: {error.diagnostics()}", file=sys.stderr)
    sys.exit(error.exit_code)
"""


def _manifest(engine: Path, version: str) -> dict[str, Any]:
    digest = hash_file(engine)
    return {
        "build_timestamp": "2025-05-01T12:00:00Z",
        "toolchain": {
            "image": "nvcr.io/nvidia/tensorrt:24.10-py3@sha256:" + "1" * 64,
            "tensorrt_version": version,
            "cuda_version": "12.6.2",
        },
        "build_node": {
            "gpu_name": "NVIDIA H200",
            "compute_capability": "9.0",
            "driver_version": "580.159.04",
        },
        "onnx": {"sha256": "2" * 64},
        "builder_config": {"typing": "weak"},
        "output_engine": {"sha256": digest.sha256, "size": digest.size, "name": engine.name},
        "audit_id": "BENCH-GPU-FIRST-ANSWER",
    }


def _command(env: dict[str, str]) -> tuple[list[str], str]:
    probe = subprocess.run(
        [sys.executable, "-c", "import trtguard.cli"], env=env, capture_output=True, check=False
    )
    if probe.returncode == 0:
        return [sys.executable, "-m", "trtguard", "verify-engine"], "python -m trtguard verify-engine"
    return [sys.executable, "-c", _SLIM], "verify-engine handler (slim: the webhook CLI does not import here)"


def _timed(
    argv: list[str], env: dict[str, str], timeout: float
) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return time.perf_counter() - started, result


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s" if values else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", type=Path, required=True)
    parser.add_argument(
        "--tensorrt-version", default=None, help="for the manifest (default: from the header)"
    )
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    engine: Path = args.engine.resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    from verifier.engine import read_plan_header  # noqa: PLC0415 (after sys.path is set)

    version = args.tensorrt_version or read_plan_header(engine).tensorrt_version or "10.0.0"
    with tempfile.TemporaryDirectory(prefix="trtguard-gpu-bench-") as folder:
        key = generate_private_key()
        public = Path(folder) / "builder.pub"
        public.write_bytes(key.public_key().to_pem())
        manifest = _manifest(engine, version)
        load_manifest(manifest, "bench manifest")  # fail here, not in the timed runs
        statement = Statement(
            subject=[
                ResourceDescriptor(name=engine.name, digest={"sha256": manifest["output_engine"]["sha256"]})
            ],
            predicate_type=ENGINE_BUILD_PREDICATE_TYPE,
            predicate=manifest,
        )
        envelope = Path(folder) / "manifest.dsse.json"
        envelope.write_bytes(sign_statement(statement, key).to_json())
        base, label = _command(env)
        static = [*base, str(engine), "--manifest", str(envelope), "--key", str(public), "--format", "json"]
        gpu = [*static, "--gpu", "--timeout", str(args.timeout)]
        print(f"engine {engine} ({engine.stat().st_size} bytes, plan TensorRT {version}); command: {label}")
        interpreter: list[float] = []
        baseline: list[float] = []
        answers: list[float] = []
        child: list[dict[str, Any]] = []
        last: dict[str, Any] = {}
        for run in range(args.runs):
            interpreter.append(_timed([sys.executable, "-c", "pass"], env, args.timeout)[0])
            seconds, result = _timed(static, env, args.timeout)
            baseline.append(seconds)
            seconds, result = _timed(gpu, env, args.timeout + 60)
            answers.append(seconds)
            try:
                last = json.loads(result.stdout)
            except ValueError:
                print(f"run {run}: no JSON report (exit {result.returncode}): {result.stderr[-2000:]}")
                return 1
            gpu_part = last.get("gpu") or {}
            child.append({"elapsed_s": gpu_part.get("elapsed_s"), **(gpu_part.get("timings") or {})})
            print(
                f"run {run}: interpreter {interpreter[-1]:.3f} s, static {baseline[-1]:.3f} s, "
                f"--gpu {answers[-1]:.3f} s (exit {result.returncode}, outcome {gpu_part.get('outcome')}), "
                f"child phases {json.dumps(child[-1])}"
            )
    gpu_part = last.get("gpu") or {}
    device = gpu_part.get("device") or {}
    runtime = gpu_part.get("runtime") or {}
    print(
        f"GPU: {device.get('name')} (cc {device.get('compute_capability')}, "
        f"driver {device.get('driver_version')}); runtime: {runtime.get('module')} {runtime.get('version')}"
    )
    print(f"GPU answer: {gpu_part.get('outcome')}: {gpu_part.get('message')}")
    print(f"first (cold) run: --gpu {answers[0]:.3f} s, static {baseline[0]:.3f} s")
    warm = slice(1, None) if args.runs > 1 else slice(0, None)
    print(
        f"median of the warm runs: interpreter {_median(interpreter[warm])}, static baseline "
        f"{_median(baseline[warm])}, time to first GPU answer {_median(answers[warm])} "
        f"(GPU step adds {statistics.median(answers[warm]) - statistics.median(baseline[warm]):.3f} s)"
    )
    medians = []
    for phase in sorted({phase for entry in child for phase in entry}):
        values = [entry[phase] for entry in child[warm] if entry.get(phase) is not None]
        if values:
            medians.append(f"{phase} {statistics.median(values):.3f} s")
    print("median GPU child phases (warm): " + ", ".join(medians))
    return 0


if __name__ == "__main__":
    sys.exit(main())
