"""Durable decisions/s of N ``trtguard serve`` replicas writing one decision log, and their p99.

Each replica is its own process (uvicorn, TLS, the bundled policies, the request of
``bench/webhook_latency.py``: a Pod of three containers and one engine, admitted); every answer is given
only after its record is committed, so answers/s are durable decisions/s. Each replica gets its own load
process (closed loop, --connections keep-alive connections), all started together. Afterwards the log is
verified: one contiguous chain holding every answer.

The log is one PostgreSQL database (--log postgresql, the default: a fresh database on --pg, every replica
appending to the one chain under its chain-head row lock), or one SQLite file shared by all replicas
(--log sqlite: the file's write lock orders them; "several worker processes on one log").

The baseline, measured first in the same run with the same load process: the always-allow FastAPI
webhook of ``bench/webhook_latency.py`` on the same stack (uvicorn, TLS), which writes nothing.

Printed per N: answers, aggregate decisions/s, the highest replica's p99 (the aggregate p99 is at most
that), and the records in the verified chain. On a machine with fewer cores than replicas + load
generators, the figures say what the machine can do, not what the log can: `os.cpu_count()` is printed
beside them.

Usage:  .venv/bin/python bench/replicas.py [--replicas 1,2,4] [--seconds 10] [--connections 4]
        [--log postgresql|sqlite] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import webhook_latency as single
from decisionlog import open_store
from trtguard.demo.material import make_material
from webhook._tls import make_self_signed

DATABASE = "trtguard_bench_replicas"


def _fresh_database(admin_url: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    return admin_url.rsplit("/", 1)[0] + f"/{DATABASE}"


def _load_command(port: int, ca: Path, body: Path, seconds: float, connections: int) -> list[str]:
    return [
        sys.executable,
        single.__file__,
        "--role",
        "load",
        "--port",
        str(port),
        "--ca",
        str(ca),
        "--body",
        str(body),
        "--mode",
        "max",
        "--seconds",
        str(seconds),
        "--connections",
        str(connections),
    ]


def _run_loads(commands: list[list[str]], timeout: float) -> list[dict[str, Any]]:
    processes = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in commands]
    results = []
    for process in processes:
        out, _ = process.communicate(timeout=timeout)
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


async def _verified(url: str) -> tuple[bool, int, str]:
    store = open_store(url, read_only=True)
    await store.open()
    try:
        report = await store.verify()
    finally:
        await store.close()
    return report.ok, report.records, report.summary()


def run(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = Path(tempfile.mkdtemp(prefix="trtguard-bench-replicas-"))
    material = make_material(folder)
    tls = make_self_signed(folder / "tls", sans=[single.SERVICE])
    body = single._review_body(material, folder)
    trtguard = Path(sys.executable).with_name("trtguard")
    empty_command = [sys.executable, single.__file__, "--role", "empty-server", "--cert", str(tls.cert)]
    empty = single._start([*empty_command, "--key", str(tls.key)], folder / "empty.log", folder)
    try:
        _run_loads([_load_command(empty[1], tls.ca_cert, body, 2, args.connections)], 120)
        [baseline] = _run_loads(
            [_load_command(empty[1], tls.ca_cert, body, args.seconds, args.connections)], args.seconds + 120
        )
    finally:
        single._stop(empty[0])
    rows = []
    for count in args.replicas:
        url = (
            _fresh_database(args.pg)
            if args.log == "postgresql"
            else f"sqlite:///{folder / f'shared-{count}.db'}"
        )
        servers = []
        try:
            for n in range(count):
                command = [str(trtguard), "serve", "--policies", str(material.policies)]
                command += ["--attestations", str(material.attestations), "--port", "0"]
                command += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--decision-log", url]
                servers.append(single._start(command, folder / f"replica-{count}-{n}.log", folder))
            ports = [port for _, port in servers]
            warm = [_load_command(p, tls.ca_cert, body, 2, args.connections) for p in ports]
            _run_loads(warm, 120)
            measured = [_load_command(p, tls.ca_cert, body, args.seconds, args.connections) for p in ports]
            results = _run_loads(measured, args.seconds + 120)
        finally:
            for process, _ in servers:
                single._stop(process)
        ok, records, summary = asyncio.run(_verified(url))
        answers = sum(r["requests"] for r in results)
        errors = sum(r["errors"] for r in results)
        seconds = max(r["seconds"] for r in results)
        rows.append(
            {
                "replicas": count,
                "answers": answers,
                "errors": errors,
                "decisions_per_s": round(answers / seconds, 1),
                "per_replica": [r["throughput"] for r in results],
                "p99_ms_at_most": max(r["p99_ms"] for r in results),
                "p50_ms_highest": max(r["p50_ms"] for r in results),
                "statuses": [r["statuses"] for r in results],
                "chain_ok": ok,
                "records": records,
                "chain": summary,
            }
        )
    return baseline, rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=4, help="keep-alive connections per replica (4)")
    parser.add_argument("--log", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    baseline, rows = run(args)
    print(
        f"\n{args.log} log shared by N replicas, {args.connections} connections each, {args.seconds:.0f} s, "
        f"{os.cpu_count()} CPUs for replicas and load generators together"
    )
    print(
        f"  {'N':>3} {'answers':>8} {'errors':>6} {'decisions/s':>12} {'p99 ms <=':>10}  per replica, chain"
    )
    for row in rows:
        print(
            f"  {row['replicas']:>3} {row['answers']:>8} {row['errors']:>6} {row['decisions_per_s']:>12.1f} "
            f"{row['p99_ms_at_most']:>10.2f}  {row['per_replica']}, {row['chain']}"
        )
    print(
        f"  baseline, same run: the empty webhook (one process, {args.connections} connections): "
        f"{baseline['throughput']:.1f} req/s, p99 {baseline['p99_ms']:.2f} ms"
    )
    one = rows[0]["decisions_per_s"] / rows[0]["replicas"]
    for row in rows:
        print(f"  N={row['replicas']}: {row['decisions_per_s'] / one:.2f}x one replica's decisions/s")
    return 0 if all(r["chain_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
