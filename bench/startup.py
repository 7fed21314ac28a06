"""Start-up time of ``trtguard`` commands beside ``python -c pass`` (and, optionally, an earlier tree).

Every command runs N times, interleaved with its baselines, so that a machine busy with other work slows all
of them alike; the figures are the median and the 90th percentile of wall time, and the median CPU time
(user + system) of the child, which a busy machine disturbs less. The bytecode of the project is compiled
first: an installed package has its ``.pyc`` files (``PYTHONDONTWRITEBYTECODE`` would otherwise make every
run compile from source).

Goals (issue 15): ``--help`` and ``keygen --help`` <= 0.15 s; ``check`` of one small file with the library
policies <= 0.4 s.

Usage: ``.venv/bin/python bench/startup.py [--runs 15] [--before DIR] [--json FILE]``; ``--before`` is a
source tree of an earlier revision (``git archive REV | tar -x -C DIR``), run with the same interpreter.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("trtguard", "webhook", "policies", "verifier")
SMALL_POD = """apiVersion: v1
kind: Pod
metadata: {name: small, namespace: prod}
spec:
  containers:
    - name: server
      image: nvcr.io/nvidia/tensorrt@sha256:0000000000000000000000000000000000000000000000000000000000000000
"""
#: Each measured command and its goal in seconds (None: no goal, listed for context).
GOALS: dict[str, float | None] = {"--help": 0.15, "keygen --help": 0.15, "check (library policies)": 0.4}


def commands(pod: Path) -> dict[str, list[str]]:
    """The command lines measured, without the interpreter."""
    library = ROOT / "policies" / "library"
    keys = library / "tests" / "keys.yaml"
    check = ["check", "--policies", str(library), "--policies", str(keys), str(pod)]
    return {
        "--help": ["--help"],
        "keygen --help": ["keygen", "--help"],
        "check (library policies)": check,
    }


def _one(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (the CPU of this child alone, from the rusage difference)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # cwd outside the tree: ``python -m`` would otherwise put this tree first on sys.path, before --before
    subprocess.run(argv, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    walls = sorted(w for w, _ in samples)
    return {
        "median_s": round(statistics.median(walls), 4),
        "p90_s": round(walls[min(len(walls) - 1, int(0.9 * len(walls)))], 4),
        "min_s": round(walls[0], 4),
        "cpu_median_s": round(statistics.median(c for _, c in samples), 4),
    }


def measure(runs: int, before: Path | None) -> dict[str, Any]:
    """Every command N times, interleaved with ``python -c pass`` and the ``--before`` tree."""
    for tree in (ROOT, before) if before else (ROOT,):
        for package in PACKAGES:
            compileall.compile_dir(str(tree / package), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("PYTHONPATH", None)
    trees: dict[str, dict[str, str]] = {"now": env}
    if before is not None:
        trees["before"] = {**env, "PYTHONPATH": str(before)}
    with tempfile.TemporaryDirectory() as folder:
        pod = Path(folder) / "pod.yaml"
        pod.write_text(SMALL_POD)
        lines = commands(pod)
        samples: dict[str, list[tuple[float, float]]] = {"python -c pass": []}
        for _ in range(runs):
            samples["python -c pass"].append(_one([sys.executable, "-c", "pass"], env))
            for name, argv in lines.items():
                for label, tree_env in trees.items():
                    key = f"{name} [{label}]"
                    samples.setdefault(key, []).append(
                        _one([sys.executable, "-m", "trtguard", *argv], tree_env)
                    )
    return {name: _summary(values) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (15)")
    parser.add_argument("--before", type=Path, help="source tree of an earlier revision, for comparison")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = measure(args.runs, args.before)
    load = os.getloadavg()[0]
    print(f"start-up, {args.runs} runs each, interleaved; {os.cpu_count()} CPUs, load {load:.1f}")
    print(f"  {'command':<40} {'median s':>9} {'p90 s':>7} {'cpu s':>7}  goal")
    for name, row in figures.items():
        goal = GOALS.get(name.rsplit(" [", 1)[0])
        verdict = "" if goal is None else f"<= {goal} s: {'met' if row['median_s'] <= goal else 'NOT met'}"
        figures_text = f"{row['median_s']:>9.3f} {row['p90_s']:>7.3f} {row['cpu_median_s']:>7.3f}"
        print(f"  {name:<40} {figures_text}  {verdict}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
