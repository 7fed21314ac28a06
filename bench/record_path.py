"""CPU of the decision-record path of one admission (bounding, encoding and hashing the record, as the stores
do before writing it), and of one whole ``POST /validate`` in-process, beside an earlier tree in the same run.

The record is the one the webhook writes for ``bench/webhook_latency.py``'s Pod (three containers and one
engine, admitted, with the evidence the bundled policies count), judged offline against the same demo
material. Each figure is the median over rounds of the mean of N calls, in microseconds, and a cProfile of
the record path says where its time goes. ``validate_cpu_us`` is the process CPU time (every thread) per
request of the ASGI app called through httpx's ASGI transport (no TLS, no uvicorn), judging that Pod with the
decision line logged as JSON (to /dev/null) and an SQLite decision log (``synchronous=normal``: the fsyncs
are not CPU, and they would make the run wait on the disk).

Usage: ``.venv/bin/python bench/record_path.py [--runs 3] [--calls 2000] [--requests 500] [--before DIR]``;
``--before`` is a source tree of an earlier revision (``git archive REV | tar -x -C DIR``), run with the same
interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
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
    """The webhook's record of the benchmark Pod (as ``webhook._admission`` builds it)."""
    from policies.check import check, read_resources  # noqa: PLC0415 - imported from the tree measured
    from policies.evaluator import PolicyEvaluator  # noqa: PLC0415
    from policies.loader import load_policy_set  # noqa: PLC0415
    from trtguard.demo.material import SIDECAR_IMAGES, TENSORRT_IMAGE, make_material  # noqa: PLC0415
    from verifier.evidence_folder import LocalEvidence  # noqa: PLC0415

    material = make_material(folder)
    pod = _pod(material.engines["fp16"], TENSORRT_IMAGE, SIDECAR_IMAGES)
    engine = PolicyEvaluator(load_policy_set([material.policies]), LocalEvidence(material.attestations))
    (folder / "pod.json").write_text(json.dumps(pod))
    resources = list(read_resources([str(folder / "pod.json")], None, []))
    [outcome] = asyncio.run(check(engine, resources))
    decision = outcome.decision
    assert decision is not None and decision.allowed, outcome
    return _decision_record(decision)


def _pod(engine: str, tensorrt: str, sidecars: tuple[str, ...]) -> dict[str, Any]:
    """``bench/webhook_latency.py``'s Pod: three containers, one engine in an image volume."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "resnet50-7c9d8", "namespace": "prod", "labels": {"app": "resnet50"}},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": tensorrt,
                    "volumeMounts": [{"name": "engine", "mountPath": "/models", "readOnly": True}],
                },
                {"name": "metrics", "image": sidecars[0]},
                {"name": "logs", "image": sidecars[1]},
            ],
            "volumes": [
                {
                    "name": "engine",
                    "image": {"reference": engine, "pullPolicy": "IfNotPresent"},
                }
            ],
        },
    }


def _decision_record(decision: Any) -> Any:
    from decisionlog import DecisionRecord  # noqa: PLC0415

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


async def _validate_cpu_us(folder: Path, requests: int) -> float:
    """Process CPU per ``POST /validate`` of the benchmark Pod, after a warm-up."""
    import httpx  # noqa: PLC0415 - imported from the tree measured, like the rest

    from decisionlog import SQLiteStore  # noqa: PLC0415
    from trtguard.demo.material import SIDECAR_IMAGES, TENSORRT_IMAGE, make_material  # noqa: PLC0415
    from verifier.evidence_folder import LocalEvidence  # noqa: PLC0415
    from webhook._admission import Reviewer  # noqa: PLC0415
    from webhook._app import WebhookServices, create_app  # noqa: PLC0415
    from webhook._logging import configure_logging  # noqa: PLC0415
    from webhook._metrics import Metrics  # noqa: PLC0415
    from webhook._policy_store import PolicyStore  # noqa: PLC0415
    from webhook._settings import ServeSettings  # noqa: PLC0415
    from webhook._tracing import Tracing  # noqa: PLC0415

    material = make_material(folder)
    policies = PolicyStore(material.policies, LocalEvidence(material.attestations))
    policies.load()
    store = SQLiteStore(folder / "decisions.db", synchronous="normal")
    metrics = Metrics()
    services = WebhookServices(policies, store, metrics, Reviewer(policies, store, metrics), Tracing(None))
    app = create_app(ServeSettings(policies=material.policies, insecure_http=True), services)
    pod = _pod(material.engines["fp16"], TENSORRT_IMAGE, SIDECAR_IMAGES)
    with Path(os.devnull).open("w") as sink:  # noqa: ASYNC230 - /dev/null, before the measured loop
        handler = configure_logging("info", stream=sink)
        await store.open()
        try:
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://w"
            ) as client:

                async def one(n: int) -> None:
                    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
                    body["request"] = {  # type: ignore[assignment]
                        "uid": f"00000000-0000-4000-8000-{n:012d}",
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": "prod",
                        "operation": "CREATE",
                        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                        "object": pod,
                    }
                    response = await client.post("/validate?timeout=10s", content=json.dumps(body).encode())
                    assert response.json()["response"]["allowed"], response.text

                for n in range(50):
                    await one(n)
                started = time.process_time()
                for n in range(50, 50 + requests):
                    await one(n)
                cpu = time.process_time() - started
        finally:
            await store.close()
            logging.getLogger().removeHandler(handler)
    return round(cpu / requests * 1e6, 1)


def _per_call_us(function: Callable[[], object], calls: int, rounds: int = 7) -> float:
    means = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        means.append((time.perf_counter() - started) / calls * 1e6)
    return round(statistics.median(means), 2)


def measure(calls: int, profile: bool, requests: int) -> dict[str, Any]:
    """The figures of the tree this interpreter imports from."""
    from decisionlog import _sql  # noqa: PLC0415
    from decisionlog._record import GENESIS_HASH, INDEXED_NAMES, storable  # noqa: PLC0415

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
    if requests:
        with tempfile.TemporaryDirectory() as folder:
            figures["validate_cpu_us"] = asyncio.run(_validate_cpu_us(Path(folder), requests))
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
    parser.add_argument(
        "--requests", type=int, default=500, help="in-process POST /validate measured (500; 0: none)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each tree, interleaved (3)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the record path")
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json_only:
        print(json.dumps(measure(args.calls, args.profile, args.requests)))
        return 0
    trees = {"now": ROOT, **({"before": args.before} if args.before else {})}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for _ in range(args.runs):  # interleaved, so that a machine busy with other work slows both alike
        for label, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree)}
            argv = [sys.executable, str(Path(__file__).resolve()), "--json-only", "--calls", str(args.calls)]
            argv += ["--requests", str(args.requests), *(["--profile"] if args.profile else [])]
            run = subprocess.run(argv, env=env, cwd=tree, stdout=subprocess.PIPE, text=True, check=True)
            runs[label].append(json.loads(run.stdout.strip().splitlines()[-1]))
    load = os.getloadavg()[0]
    print(f"record path, {args.runs} runs, medians; {os.cpu_count()} CPUs, load {load:.1f}")
    for label, rows in runs.items():
        medians = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(f"  {label:<7} " + "  ".join(f"{key} {value}" for key, value in medians.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
