"""Inputs built to exhaust trtguard (issue 10, items 8 and 9): time to refusal or denial, and peak memory.

1. YAML alias bomb: ``trtguard check`` of a ~510 KB Pod whose 150,000 aliases repeat one 60 KB scalar
   (9 GB written out), and of a policy file of the same shape. Baseline in the same run: ``check`` of a
   normal small Pod.
2. Expensive CEL: ``trtguard check`` of a Pod with a 16 KiB and a 64 KiB annotation against a policy whose
   expression passes every static limit but concatenates the annotation 9,801 times. Baseline: the same
   Pod and policy with a cheap expression.
3. Where expressions run: per-expression time of the fast path (inline) and of the worker process, on the
   five rules of issue 2 over the test Pod and manifest, against calling cel-expr-python directly.

Each command runs in a child process; its peak RSS is read back with ``wait4``, which covers the CEL
worker processes it started and waited for.

Usage: ``.venv/bin/python bench/bombs.py [--iterations N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from policies.cel import CelLimits, compile_expression, prepare_activation
from policies.cel.sandbox import CelSandbox

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_TESTS = ROOT / "policies" / "library" / "tests"
DATA = ROOT / "tests" / "data"
RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
ENGINE = (
    "registry.example.com/models/fp16-good"
    "@sha256:f64c3ad0b953ee69d21a4b8179ddd10189d34e71bdb074dc9bce2bb25ddd2a5e"
)
LITERAL_99 = "[" + ",".join(str(i) for i in range(99)) + "]"
NOTE = "workload.metadata.annotations.note"
COSTLY = f"{LITERAL_99}.map(x, {LITERAL_99}.map(y, {NOTE} + {NOTE})).size() > 0"
CHEAP = f"size({NOTE}) > 0"
ISSUE_2_RULES = [
    "manifest.builder_config.max_workspace_size <= 4 * 1024 * 1024 * 1024",
    'manifest.accuracy.exists(m, m.metric == "top1_acc" && m.value >= 0.75)',
    "size(manifest.builder_config.optimization_profiles) <= 4",
    'workload.metadata.namespace.startsWith("prod") && has(workload.metadata.labels.team)',
    'manifest.builder_config.plugins.all(p, p.library_sha256 != "")',
]


def pod(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "prod", "annotations": annotations or {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [
                {"name": "server", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/m"}]}
            ],
            "volumes": [{"name": "engine", "image": {"reference": ENGINE}}],
        },
    }


def alias_bomb_pod() -> str:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  namespace: prod\n  annotations:\n"
        f"    big: &a {'x' * 60_000}\n"
        f"spec:\n  containers:\n    - name: server\n      image: {RUNTIME}\n"
        f"      args: [{', '.join(['*a'] * 150_000)}]\n"
    )


def alias_bomb_policy() -> str:
    return (
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: bomb}\nspec:\n"
        f"  images:\n    - name: a\n      x-anchor: &a {'x' * 60_000}\n"
        f"      requireDigest: [{', '.join(['*a'] * 150_000)}]\n"
    )


def expression_policy(expression: str) -> str:
    return (
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: expression}\nspec:\n"
        "  match: {namespaces: [prod]}\n  action: Warn\n  onError: Deny\n  models:\n"
        "    buildManifest: {keys: [platform/build-signer]}\n    rules:\n      expressions:\n"
        f"        - {{name: rule, cel: '{expression}', message: the rule}}\n"
    )


def run(args: Sequence[str], cwd: Path) -> tuple[int, float, float, str]:
    """Exit status, wall seconds and peak RSS (MiB) of ``trtguard ARGS``, and its first output line."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "trtguard", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert child.stdout is not None
    output = child.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return (
        child.returncode,
        time.perf_counter() - start,
        usage.ru_maxrss / 1024,
        output.strip().splitlines()[0],
    )


def row(label: str, result: tuple[int, float, float, str]) -> None:
    status, seconds, rss, first = result
    shown = first if len(first) <= 90 else first[:87] + "..."
    print(f"| {label} | {status} | {seconds:.2f} | {rss:.0f} | {shown} |")


def bombs(folder: Path) -> None:
    (folder / "small.yaml").write_text(json.dumps(pod()))
    (folder / "bomb.yaml").write_text(alias_bomb_pod())
    (folder / "images.yaml").write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: images}\nspec:\n"
        '  images:\n    - name: runtime\n      match: ["nvcr.io/nvidia/tensorrt:*"]\n'
    )
    (folder / "bomb-policy.yaml").write_text(alias_bomb_policy())
    print("\n## YAML alias bomb: `trtguard check` (bomb: 510 KB, 9 GB written out)\n")
    print("| case | exit | seconds | peak RSS (MiB) | first line |")
    print("|---|---|---|---|---|")
    row("baseline: a small Pod", run(["check", "small.yaml", "--policies", "images.yaml"], folder))
    row("the bomb as check input", run(["check", "bomb.yaml", "--policies", "images.yaml"], folder))
    row("the bomb as policy file", run(["check", "small.yaml", "--policies", "bomb-policy.yaml"], folder))


def expensive_cel(folder: Path) -> None:
    evidence = [
        "--policies",
        str(LIBRARY_TESTS / "keys.yaml"),
        "--attestations",
        str(LIBRARY_TESTS / "attestations"),
    ]
    (folder / "cheap.yaml").write_text(expression_policy(CHEAP))
    (folder / "costly.yaml").write_text(expression_policy(COSTLY))
    print("\n## Expensive CEL: `trtguard check`, policy action Warn, onError Deny\n")
    print(f"costly: `{COSTLY[:40]}...{COSTLY[-45:]}` ({len(COSTLY)} characters); cheap: `{CHEAP}`\n")
    print("| case | exit | seconds | peak RSS (MiB) | first line |")
    print("|---|---|---|---|---|")
    for kib in (16, 64):
        (folder / f"pod-{kib}.yaml").write_text(json.dumps(pod({"note": "x" * (kib * 1024)})))
        for name in ("cheap", "costly"):
            result = run(["check", f"pod-{kib}.yaml", "--policies", f"{name}.yaml", *evidence], folder)
            row(f"{name} expression, {kib} KiB annotation", result)
    print("\nIn process, the sandbox alone (worker already started; the first start takes ~0.3 s more):\n")
    print("| case | ms to the answer | answer |")
    print("|---|---|---|")
    sandbox = CelSandbox()
    variables = ("manifest", "workload", "engine")
    warm = compile_expression(CHEAP, variables=variables, limits=CelLimits(inline_work=0))
    for kib in (16, 64):
        workload = {"metadata": {"annotations": {"note": "x" * (kib * 1024)}}}
        for name, source in (("cheap", CHEAP), ("costly", COSTLY)):
            program = compile_expression(source, variables=variables)
            activation = prepare_activation({"manifest": {}, "workload": workload, "engine": {}})
            asyncio.run(sandbox.evaluate_bools([warm], activation, seconds=5))
            start = time.perf_counter()
            [outcome] = asyncio.run(sandbox.evaluate_bools([program], activation, seconds=5))
            elapsed = (time.perf_counter() - start) * 1000
            where = "inline" if program.inline else "worker"
            print(f"| {name} ({where}), {kib} KiB | {elapsed:.1f} | {str(outcome).splitlines()[0]} |")
    sandbox.close()


def per_expression(iterations: int) -> None:
    manifest = json.loads((DATA / "400-cel-engine-manifest.json").read_text())
    workload = json.loads((DATA / "401-cel-pod-three-containers.json").read_text())
    variables = ("manifest", "workload")
    inline = [compile_expression(source, variables=variables) for source in ISSUE_2_RULES]
    isolated = [
        compile_expression(source, variables=variables, limits=CelLimits(inline_work=0))
        for source in ISSUE_2_RULES
    ]
    assert all(p.inline for p in inline) and not any(p.inline for p in isolated)
    sandbox = CelSandbox()

    async def timed(action: Callable[[], Awaitable[object]]) -> list[float]:
        """Microseconds per expression, in one event loop, after a warm-up."""
        for _ in range(min(50, iterations)):
            await action()
        samples = []
        for _ in range(iterations):
            start = time.perf_counter()
            await action()
            samples.append((time.perf_counter() - start) * 1e6 / len(ISSUE_2_RULES))
        return sorted(samples)

    async def direct() -> None:
        activation = prepare_activation({"manifest": manifest, "workload": workload})
        for program in inline:
            program.evaluate_bool(activation)

    def through(programs: list[Any]) -> Callable[[], Awaitable[object]]:
        async def one() -> object:
            activation = prepare_activation({"manifest": manifest, "workload": workload})
            return await sandbox.evaluate_bools(programs, activation, seconds=5)

        return one

    async def measure() -> list[tuple[str, list[float]]]:
        return [
            ("cel-expr-python through the wrapper, no sandbox (before)", await timed(direct)),
            ("sandbox, inline fast path (expressions proven cheap)", await timed(through(inline))),
            ("sandbox, worker process (all five sent together)", await timed(through(isolated))),
        ]

    print("\n## Where expressions run: microseconds per expression (5 rules, one activation per workload)\n")
    print("| path | median | p99 |")
    print("|---|---|---|")
    for label, samples in asyncio.run(measure()):
        print(f"| {label} | {statistics.median(samples):.1f} | {samples[int(len(samples) * 0.99)]:.1f} |")
    sandbox.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000, help="timed workloads per path")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        bombs(Path(scratch))
        expensive_cel(Path(scratch))
    per_expression(args.iterations)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
