"""Latency and throughput of ``POST /validate`` over TLS, beside an always-allow webhook on the same stack.

Both servers run uvicorn (httptools, uvloop) with the same TLS certificate on loopback; the load comes from a
separate process that keeps its connections alive, as kube-apiserver does. The trtguard server runs the
bundled example policies with generated keys and signed attestations, an SQLite decision log (every decision
is committed before its answer), and judges a Pod with three containers and one engine (admitted).

Measured, for each server in the same run:
  1. a fixed rate (default 200 requests/s, open loop: latency counts from each request's scheduled time, so a
     stalled server is not hidden by the client waiting for it);
  2. the most it serves with N keep-alive connections (closed loop).

Goals (issue 3): p99 <= 10 ms at 200 requests/s, and at least half the empty webhook's throughput.

``--before DIR`` adds the default server of an earlier source tree (``git archive REV | tar -x -C DIR``),
measured in the same run.

Usage:  .venv/bin/python bench/webhook_latency.py [--rate 200] [--seconds 15] [--connections 8] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import uvicorn
import uvloop
from fastapi import FastAPI, Request
from fastapi.responses import Response

from decisionlog import SQLiteStore
from trtguard.demo.material import SIDECAR_IMAGES, TENSORRT_IMAGE, make_material

SERVICE = "trtguard.trtguard.svc"
UID_PLACEHOLDER = "00000000-0000-4000-8000-000000000000"


# --- the empty webhook ------------------------------------------------------------------------------------


def empty_app() -> FastAPI:
    """The always-allow webhook: FastAPI, the body decoded, the uid answered, nothing judged or recorded."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        review = json.loads(await request.body())
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return Response(json.dumps(answer).encode(), media_type="application/json")

    return app


def serve_empty(cert: Path, key: Path) -> None:
    """An always-allow webhook on the same stack as trtguard: FastAPI, uvicorn, httptools, uvloop, TLS."""
    # Here, not at the top: bench/validate_cpu.py loads this module under older trees too (--before).
    from webhook._tls import server_context  # noqa: PLC0415

    context = server_context(cert, key)
    config = uvicorn.Config(
        empty_app(),
        host="127.0.0.1",
        port=0,
        http="httptools",
        loop="uvloop",
        log_config=None,
        access_log=False,
        timeout_keep_alive=100,
        ssl_context_factory=lambda _c, _d: context,
    )
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn has no startup event to wait on
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"listening on https://127.0.0.1:{port}", flush=True)
        await task

    uvloop.run(run())


# --- the load generator (its own process) -----------------------------------------------------------------


async def _connect(port: int, context: ssl.SSLContext) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=SERVICE)


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes, body: bytes
) -> tuple[int, bytes]:
    writer.write(head + body)
    await writer.drain()
    header = await reader.readuntil(b"\r\n\r\n")
    status = int(header[9:12])
    length = 0
    for line in header.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return status, await reader.readexactly(length)


def _request(port: int, template: bytes) -> tuple[bytes, bytes]:
    head = (
        f"POST /validate?timeout=5s HTTP/1.1\r\nHost: {SERVICE}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {len(template)}\r\n\r\n"
    ).encode()
    return head, template


async def load(
    port: int, ca: Path, template: bytes, mode: str, rate: float, seconds: float, connections: int
) -> dict[str, Any]:
    """Drive ``/validate`` and return latency and throughput figures."""
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["http/1.1"])
    head, _ = _request(port, template)
    placeholder = UID_PLACEHOLDER.encode()
    latencies: list[float] = []
    errors = 0
    statuses: dict[str, int] = {}
    links = [await _connect(port, context) for _ in range(connections)]

    async def one(link: tuple[asyncio.StreamReader, asyncio.StreamWriter], since: float) -> None:
        nonlocal errors
        body = template.replace(placeholder, str(uuid.uuid4()).encode())
        try:
            status, answer = await _exchange(*link, head, body)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            errors += 1
            return
        latencies.append(time.perf_counter() - since)
        verdict = json.loads(answer)["response"]["allowed"] if status == 200 else None
        key = f"{status}:{verdict}"
        statuses[key] = statuses.get(key, 0) + 1

    started = time.perf_counter()
    if mode == "rate":
        total = int(rate * seconds)
        queue: asyncio.Queue[float] = asyncio.Queue()

        async def worker(link: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
            while True:
                scheduled = await queue.get()
                if scheduled < 0:
                    return
                await one(link, scheduled)

        workers = [asyncio.create_task(worker(link)) for link in links]
        begin = time.perf_counter() + 0.05
        for n in range(total):
            at = begin + n / rate
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            queue.put_nowait(at)
        for _ in workers:
            queue.put_nowait(-1.0)
        await asyncio.gather(*workers)
    else:
        stop_at = started + seconds

        async def closed(link: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
            while time.perf_counter() < stop_at:
                await one(link, time.perf_counter())

        await asyncio.gather(*(closed(link) for link in links))
    elapsed = time.perf_counter() - started
    for _, writer in links:
        writer.close()
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")

    return {
        "mode": mode,
        "requests": len(latencies),
        "errors": errors,
        "statuses": statuses,
        "seconds": round(elapsed, 2),
        "throughput": round(len(latencies) / elapsed, 1),
        "p50_ms": round(pct(0.50), 2),
        "p90_ms": round(pct(0.90), 2),
        "p99_ms": round(pct(0.99), 2),
        "max_ms": round(1000 * ordered[-1], 2) if ordered else float("nan"),
        "mean_ms": round(1000 * statistics.fmean(ordered), 2) if ordered else float("nan"),
    }


def run_load(args: argparse.Namespace) -> None:
    template = Path(args.body).read_bytes()
    result = uvloop.run(
        load(args.port, Path(args.ca), template, args.mode, args.rate, args.seconds, args.connections)
    )
    print(json.dumps(result), flush=True)


# --- the orchestration ------------------------------------------------------------------------------------


def _start(
    command: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"{command[0]} exited: see {log}")
        if "listening on https://" in line:
            return process, int(line.rsplit(":", 1)[1])
    raise SystemExit(f"{command} did not start; see {log}")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _drive(
    port: int, ca: Path, body: Path, mode: str, rate: float, seconds: float, connections: int
) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--role",
        "load",
        "--port",
        str(port),
        "--ca",
        str(ca),
        "--body",
        str(body),
        "--mode",
        mode,
        "--rate",
        str(rate),
        "--seconds",
        str(seconds),
        "--connections",
        str(connections),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 120)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _review_body(material: Any, folder: Path) -> Path:
    engine = material.engines["fp16"]
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
            "volumes": [{"name": "engine", "image": {"reference": engine, "pullPolicy": "IfNotPresent"}}],
        },
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID_PLACEHOLDER,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "resnet50-7c9d8",
            "namespace": "prod",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }
    path = folder / "review.json"
    path.write_text(json.dumps(review))
    return path


def _row(name: str, result: dict[str, Any]) -> str:
    return (
        f"  {name:<30} {result['requests']:>7} {result['errors']:>6} {result['throughput']:>9.1f} "
        f"{result['p50_ms']:>8.2f} {result['p90_ms']:>8.2f} {result['p99_ms']:>8.2f} {result['max_ms']:>8.2f}"
        f"   {result['statuses']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--role", choices=("main", "empty-server", "load"), default="main")
    parser.add_argument("--rate", type=float, default=200.0, help="requests/s of the fixed-rate run (200)")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each measured run (15)")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections (8)")
    parser.add_argument(
        "--before",
        type=Path,
        help="an earlier source tree (git archive REV | tar -x -C DIR), its server measured in the same run",
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--body", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("rate", "max"), default="rate", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "empty-server":
        serve_empty(Path(args.cert), Path(args.key))
        return 0
    if args.role == "load":
        run_load(args)
        return 0

    from webhook._tls import make_self_signed  # noqa: PLC0415 - see serve_empty

    folder = Path(tempfile.mkdtemp(prefix="trtguard-bench-"))
    material = make_material(folder)
    tls = make_self_signed(folder / "tls", sans=[SERVICE])
    body = _review_body(material, folder)
    trtguard = Path(sys.executable).with_name("trtguard")
    servers: dict[str, tuple[subprocess.Popen[str], int]] = {}
    results: dict[str, dict[str, Any]] = {}
    try:
        empty_command = [sys.executable, __file__, "--role", "empty-server", "--cert", str(tls.cert)]
        servers["empty"] = _start([*empty_command, "--key", str(tls.key)], folder / "empty.log", folder)
        # The default (fsync on every commit) and ?synchronous=normal (fsync at checkpoints), side by side.
        trees = [
            ("trtguard", "decisions.db", None),
            ("trtguard sync=normal", "normal.db?synchronous=normal", None),
        ]
        if args.before is not None:  # the same server from an earlier tree, fsync per commit like the default
            trees.append(("before", "before.db", args.before.resolve()))
        for name, log, tree in trees:
            command = [str(trtguard), "serve", "--policies", str(material.policies)]
            command += ["--attestations", str(material.attestations), "--port", "0"]
            command += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
            command += ["--decision-log", f"sqlite:///{folder / log}"]
            env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
            servers[name] = _start(command, folder / f"{name.replace(' ', '-')}.log", folder, env)
        for _, port in servers.values():  # warm-up: connections, caches, the decision log's first pages
            _drive(port, tls.ca_cert, body, "rate", 50, 2, args.connections)
        for name, (_, port) in servers.items():
            results[f"{name} @ {args.rate:.0f}/s"] = _drive(
                port, tls.ca_cert, body, "rate", args.rate, args.seconds, args.connections
            )
        for name, (_, port) in servers.items():
            results[f"{name} max"] = _drive(port, tls.ca_cert, body, "max", 0, args.seconds, args.connections)
    finally:
        for process, _ in servers.values():
            _stop(process)

    report = asyncio.run(SQLiteStore(folder / "decisions.db", read_only=True).verify())
    print(
        f"\nPOST /validate over TLS 1.3, HTTP/1.1 keep-alive, {args.connections} connections, "
        f"{args.seconds:.0f} s per run, {os.cpu_count()} CPUs (load generator in its own process)"
    )
    print(
        f"  {'run':<30} {'answers':>7} {'errors':>6} {'req/s':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
        f"{'max ms':>8}   statuses"
    )
    for name, result in results.items():
        print(_row(name, result))
    print(f"\n  decision log of the default server: {report.summary()}")
    empty_p99 = results[f"empty @ {args.rate:.0f}/s"]["p99_ms"]
    for name in [n for n in servers if n != "empty"]:
        fixed = results[f"{name} @ {args.rate:.0f}/s"]
        ratio = results[f"{name} max"]["throughput"] / results["empty max"]["throughput"]
        latency_goal = "met" if fixed["p99_ms"] <= 10 and fixed["p99_ms"] <= 2 * empty_p99 else "NOT met"
        throughput_goal = "met" if ratio >= 0.5 else "NOT met"
        print(
            f"  {name}: p99 at {args.rate:.0f}/s {fixed['p99_ms']:.2f} ms, "
            f"{fixed['p99_ms'] / empty_p99:.1f}x the empty webhook's {empty_p99:.2f} ms "
            f"(goal <= 10 ms and <= 2x: {latency_goal}); max throughput "
            f"{100 * ratio:.0f}% of the empty webhook's (goal >= 50%: {throughput_goal})"
        )
    print(f"  (work files in {folder})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
