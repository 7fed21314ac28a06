"""CPU of the decision-record path of one admission (bounding, encoding and hashing the record, as the stores
do before writing it), beside an earlier tree in the same run.

The record is the one the webhook writes for ``bench/webhook_latency.py``'s Pod (three containers and one
engine, admitted, with the evidence the bundled policies count), judged offline against the same demo
material. Each figure is the median over rounds of the mean of N calls, in microseconds, and a cProfile of
the record path says where its time goes.

Usage: ``.venv/bin/python bench/record_path.py [--calls 2000] [--before DIR] [--profile]``; ``--before`` is a
source tree of an earlier revision (``git archive REV | tar -x -C DIR``), run with the same interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _record(folder: Path) -> Any:
    """The webhook's record of the benchmark Pod (as ``webhook.admission`` builds it)."""
    from policies.check import check, read_resources  # noqa: PLC0415 - imported from the tree measured
    from policies.evaluator import PolicyEngine  # noqa: PLC0415
    from policies.loader import load_policy_set  # noqa: PLC0415
    from trtguard.demo.material import SIDECAR_IMAGES, TENSORRT_IMAGE, make_material  # noqa: PLC0415
    from verifier.evidence_folder import LocalEvidence  # noqa: PLC0415
    from webhook.decisionlog import DecisionRecord  # noqa: PLC0415

    material = make_material(folder)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "resnet50-7c9d8", "namespace": "prod", "labels": {"app": "resnet50"}},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": TENSORRT_IMAGE,
                    "volumeMounts": [{"name": "engine", "mountPath": "/models", "readOnly": True}],
                },
                {"name": "metrics", "image": SIDECAR_IMAGES[0]},
                {"name": "logs", "image": SIDECAR_IMAGES[1]},
            ],
            "volumes": [
                {
                    "name": "engine",
                    "image": {"reference": material.engines["fp16"], "pullPolicy": "IfNotPresent"},
                }
            ],
        },
    }
    engine = PolicyEngine(load_policy_set([material.policies]), LocalEvidence(material.attestations))
    (folder / "pod.json").write_text(json.dumps(pod))
    resources = list(read_resources([str(folder / "pod.json")], None, []))
    [outcome] = asyncio.run(check(engine, resources))
    decision = outcome.decision
    assert decision is not None and decision.allowed, outcome
    return DecisionRecord(
        uid="00000000-0000-4000-8000-000000000000",
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        namespace="prod",
        name="resnet50-7c9d8",
        user="system:serviceaccount:kube-system:replicaset-controller",
        groups=("system:serviceaccounts", "system:authenticated"),
        allowed=True,
        reason="Allowed",
        violations=tuple(v.to_json() for v in decision.violations),
        images=tuple(i.to_json() for i in decision.images),
        engines=tuple(e.to_json() for e in decision.engines),
        policy_revision=decision.policy_revision,
        latency_us=1250,
        replica="trtguard-0",
    )


def _per_call_us(function: Callable[[], object], calls: int, rounds: int = 7) -> float:
    means = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        means.append((time.perf_counter() - started) / calls * 1e6)
    return round(statistics.median(means), 2)


def measure(calls: int, profile: bool) -> dict[str, Any]:
    """The figures of the tree this interpreter imports from."""
    from webhook.decisionlog import _sql  # noqa: PLC0415
    from webhook.decisionlog.record import GENESIS_HASH, INDEXED_NAMES, storable  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        record = _record(Path(folder))

    def record_path() -> object:
        return _sql.link(record, 1, GENESIS_HASH)

    body = _sql.link(record, 1, GENESIS_HASH)[0]
    figures: dict[str, Any] = {
        "record_body_bytes": len(str(body[len(INDEXED_NAMES) + 1])),
        "link_us": _per_call_us(record_path, calls),
        "storable_us": _per_call_us(lambda: storable(record), calls),
    }
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            record_path()
        profiler.disable()
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(12)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (2000)")
    parser.add_argument("--before", type=Path, help="source tree of an earlier revision, for comparison")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the record path")
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json_only:
        print(json.dumps(measure(args.calls, args.profile)))
        return 0
    trees = {"now": ROOT, **({"before": args.before} if args.before else {})}
    results = {}
    for label, tree in trees.items():
        env = {**os.environ, "PYTHONPATH": str(tree)}
        argv = [sys.executable, str(Path(__file__).resolve()), "--json-only", "--calls", str(args.calls)]
        argv += ["--profile"] if args.profile else []
        output = subprocess.run(argv, env=env, cwd=tree, stdout=subprocess.PIPE, text=True, check=True).stdout
        results[label] = json.loads(output.strip().splitlines()[-1])
    print(f"record path, {args.calls} calls x 7 rounds; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for label, row in results.items():
        print(f"  {label:<7} " + "  ".join(f"{key} {value}" for key, value in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
