"""``trtguard check`` over 10,000 generated resources (goal, issue 31: at most 1.6 times the parse baseline).

The resources are Pods, Deployments, StatefulSets, Jobs and CronJobs in production namespaces, each with a
TensorRT runtime container, a sidecar and an engine image volume, checked against the whole policy library
with its test keys and attestations. Baseline in the same run: parsing the same file with PyYAML's C loader.
``check`` runs in one process (its default, ``--jobs 1``) and, on a machine of several CPUs, with one
process per CPU (``--jobs N``); ``--against DIR`` also runs the ``trtguard`` of another checkout (say,
the commit before a change) on the same file, for a before/after in one run.

Usage: ``.venv/bin/python bench/check_10k.py [--count N] [--against DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource as rusage
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "policies" / "library"
RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
ENGINE = (
    "registry.example.com/models/fp16-good"
    "@sha256:f64c3ad0b953ee69d21a4b8179ddd10189d34e71bdb074dc9bce2bb25ddd2a5e"
)


def pod_spec(i: int) -> dict[str, Any]:
    containers: list[dict[str, Any]] = [
        {
            "name": "server",
            "image": RUNTIME,
            "volumeMounts": [{"name": "engine", "mountPath": "/models"}],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
        }
    ]
    if i % 2:  # every other resource carries an unpinned, unsigned sidecar and is denied
        containers.append({"name": "metrics", "image": f"registry.example.com/inference/metrics:{i % 7}"})
    return {"containers": containers, "volumes": [{"name": "engine", "image": {"reference": ENGINE}}]}


def resource(i: int) -> dict[str, Any]:
    metadata = {"name": f"inference-{i}", "namespace": f"prod-{i % 5}", "labels": {"app": f"a{i % 13}"}}
    kind = ("Pod", "Deployment", "StatefulSet", "Job", "CronJob")[i % 5]
    template = {"metadata": {"labels": {"app": f"a{i % 13}"}}, "spec": pod_spec(i)}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": kind, "metadata": metadata, "spec": pod_spec(i)}
    if kind == "CronJob":
        return {
            "apiVersion": "batch/v1",
            "kind": kind,
            "metadata": metadata,
            "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}},
        }
    group = "batch/v1" if kind == "Job" else "apps/v1"
    return {
        "apiVersion": group,
        "kind": kind,
        "metadata": metadata,
        "spec": {"selector": {"matchLabels": {"app": f"a{i % 13}"}}, "template": template},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--against", type=Path, metavar="DIR", help="also time the trtguard of this checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        inputs = Path(folder) / "resources.yaml"
        inputs.write_text(yaml.safe_dump_all((resource(i) for i in range(args.count)), sort_keys=False))
        size = inputs.stat().st_size

        start, cpu_start = time.perf_counter(), time.process_time()
        parsed = sum(1 for _ in yaml.load_all(inputs.read_text(), Loader=yaml.CSafeLoader))
        baseline, baseline_cpu = time.perf_counter() - start, time.process_time() - cpu_start
        assert parsed == args.count

        print(f"input: {args.count} resources, {size / 1e6:.1f} MB of YAML, 5 library policies")
        print(f"baseline: PyYAML C loader, parse only  wall {baseline:6.2f} s   cpu {baseline_cpu:6.2f} s")
        runs: list[tuple[str, list[str], Path]] = [("check --jobs 1", ["--jobs", "1"], ROOT)]
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        if cpus > 1:
            runs.append((f"check --jobs {cpus}", ["--jobs", str(cpus)], ROOT))
        if args.against is not None:
            runs.insert(0, (f"check of {args.against}", [], args.against.resolve()))
        outputs = set()
        for label, options, tree in runs:
            elapsed, cpu, done = _check(inputs, options, tree)
            outputs.add(done.stdout)
            results = json.loads(done.stdout)
            denied = sum(1 for r in results if not r.get("allowed", True))
            print(
                f"{label} ({denied} denied, exit {done.returncode})  "
                f"wall {elapsed:6.2f} s ({elapsed / baseline:.1f}x the parse)   cpu {cpu:6.2f} s   "
                f"({elapsed / args.count * 1e3:.2f} ms per resource)"
            )
        print("reports: " + ("identical" if len(outputs) == 1 else f"{len(outputs)} DIFFERENT reports"))


def _check(
    inputs: Path, options: list[str], tree: Path
) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """``trtguard check`` of ``tree`` (the module run from that folder) over ``inputs``: wall and CPU seconds
    (its processes together), and what it printed."""
    command = [
        sys.executable,
        "-m",
        "trtguard",
        "check",
        *options,
        "--policies",
        str(LIBRARY),
        "--policies",
        str(LIBRARY / "tests" / "keys.yaml"),
        "--attestations",
        str(LIBRARY / "tests" / "attestations"),
        "--format",
        "json",
        str(inputs),
    ]
    cpu_before = rusage.getrusage(rusage.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False, cwd=tree)
    elapsed = time.perf_counter() - start
    cpu_after = rusage.getrusage(rusage.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return elapsed, cpu, done


if __name__ == "__main__":
    main()
