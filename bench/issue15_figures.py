"""Every figure of issue 15 beside its baseline, in one run; writes a JSON file and a PNG plot.

| figure                                                        | baseline measured in the same run         |
|---------------------------------------------------------------|-------------------------------------------|
| ``/validate`` latency percentiles at each offered rate (open  | an always-allow FastAPI webhook on the    |
| loop, TLS keep-alive, 3-container Pod + 1 engine, SQLite log  | same stack (bench/webhook_latency.py),    |
| with an fsync per commit: every answered decision durable)    | and the disk's own fsync tail (a loop of  |
|                                                               | 4 KiB append + fsync beside the log)      |
| the most one ``serve`` process answers (closed loop)          | the empty webhook's                       |
| cold registry admission (tag, signature, referrers, verify)   | one bare ``GET /v2/`` on that registry    |
| ``trtguard --help``, ``keygen --help``, ``check`` (one file)  | ``python -c pass`` (bench/startup.py)     |

Rates are interleaved (the empty webhook, then trtguard, at each rate) so that a machine busy with other
work disturbs both alike; a server stops being driven harder once it answers less than 90 % of the offered
rate (saturated). The PNG (docs/images/issue15-latency.png in the README) plots p50 and p99 against the
offered rate for both servers, with the 10 ms goal and the fsync p99 floor: fsync latency is probed (4 KiB
append + fsync every 20 ms, beside the decision log) during every measured run, so each row has its own floor.

Usage: ``.venv/bin/python bench/issue15_figures.py [--seconds 4] [--rates 100,200,400,800,1600,3200]
[--json FILE] [--png FILE] [--before DIR]`` (needs the ``bench`` extra for matplotlib, and Debian's
``docker-registry`` for the registry row, which is skipped without it).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import registry_evidence as registry_bench
from bench import startup as startup_bench
from bench import webhook_latency as webhook_bench
from policies.evaluator import PolicyEvaluator
from trtguard.demo.material import make_material
from verifier.crypto._keys import generate_private_key
from verifier.registry.client import RegistryClient
from verifier.registry.evidence import RegistryEvidence
from webhook._tls import make_self_signed

GOAL_P99_MS = 10.0
GOAL_THROUGHPUT_FRACTION = 0.5
GOAL_COLD_P99_MS = 50.0


def _pct(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def fsync_floor(
    folder: Path, seconds: float, gap: float = 0.0, stop: threading.Event | None = None
) -> dict[str, float]:
    """Latency of appending 4 KiB and fsyncing it, in a loop: what one durable commit costs this disk.

    With ``stop`` it runs until the event is set (beside a measured run, ``gap`` seconds between probes, so
    that it adds little load of its own); otherwise for ``seconds``.
    """
    samples: list[float] = []
    path = folder / f"fsync-probe-{threading.get_ident()}"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        block, until = os.urandom(4096), time.perf_counter() + seconds
        while not stop.is_set() if stop is not None else time.perf_counter() < until:
            started = time.perf_counter()
            os.write(descriptor, block)
            os.fsync(descriptor)
            samples.append(1000 * (time.perf_counter() - started))
            if gap:
                time.sleep(gap)
    finally:
        os.close(descriptor)
        path.unlink()
    return {
        "count": len(samples),
        "p50_ms": round(_pct(samples, 0.5), 3) if samples else float("nan"),
        "p99_ms": round(_pct(samples, 0.99), 3) if samples else float("nan"),
        "max_ms": round(max(samples), 3) if samples else float("nan"),
    }


def _with_fsync_probe(folder: Path, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run()``'s figures, with the disk's fsync latency measured during it (the floor of that very row)."""
    stop = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        probe = pool.submit(fsync_floor, folder, 0.0, 0.02, stop)
        try:
            row = run()
        finally:
            stop.set()
        row["fsync"] = probe.result()
    return row


def webhook_figures(folder: Path, rates: list[float], seconds: float, connections: int) -> dict[str, Any]:
    """Latency per offered rate and the closed-loop maximum, for the empty webhook and trtguard."""
    material = make_material(folder)
    tls = make_self_signed(folder / "tls", sans=[webhook_bench.SERVICE])
    body = webhook_bench._review_body(material, folder)
    trtguard = Path(sys.executable).with_name("trtguard")
    empty = [sys.executable, webhook_bench.__file__, "--role", "empty-server"]
    empty += ["--cert", str(tls.cert), "--key", str(tls.key)]
    serve = [str(trtguard), "serve", "--policies", str(material.policies)]
    serve += ["--attestations", str(material.attestations), "--port", "0"]
    serve += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    serve += ["--decision-log", f"sqlite:///{folder / 'decisions.db'}"]  # an fsync per commit (the default)
    servers = {
        "empty": webhook_bench._start(empty, folder / "empty.log", folder),
        "trtguard": webhook_bench._start(serve, folder / "trtguard.log", folder),
    }
    result: dict[str, Any] = {"fsync_before": fsync_floor(folder, 2.0), "rates": {}, "max": {}}
    try:
        for _, port in servers.values():  # warm-up: connections, caches, the log's first pages
            webhook_bench._drive(port, tls.ca_cert, body, "rate", 50, 2, connections)
        saturated: set[str] = set()
        for rate in rates:
            for name, (_, port) in servers.items():
                if name in saturated:
                    continue
                drive = functools.partial(
                    webhook_bench._drive, port, tls.ca_cert, body, "rate", rate, seconds, connections
                )
                row = _with_fsync_probe(folder, drive)
                result["rates"].setdefault(name, {})[str(int(rate))] = row
                if row["throughput"] < 0.9 * rate or row["errors"]:
                    saturated.add(name)
        for name, (_, port) in servers.items():
            result["max"][name] = webhook_bench._drive(
                port, tls.ca_cert, body, "max", 0, seconds, connections
            )
    finally:
        for process, _ in servers.values():
            webhook_bench._stop(process)
    result["fsync_after"] = fsync_floor(folder, 2.0)
    return result


async def _cold_registry(folder: Path, images: int) -> dict[str, Any]:
    key = generate_private_key()
    process, host = registry_bench.start_registry(folder)
    try:
        policy_set = registry_bench.signed_images_policy(host, key, folder)
        async with RegistryClient(registry_bench.client_config(host)) as seeding:
            refs = [await registry_bench.push_signed_image(seeding, host, key) for _ in range(images)]
        async with httpx.AsyncClient() as bare:
            floor = await registry_bench.timed(lambda: bare.get(f"http://{host}/v2/"), images)
        async with RegistryClient(registry_bench.client_config(host)) as client:
            engine = PolicyEvaluator(policy_set, RegistryEvidence(client))
            queue = list(refs)
            cold = await registry_bench.timed(lambda: registry_bench.admit(engine, queue.pop()), images)
            requests = client.stats.total_requests / images
    finally:
        process.terminate()
        process.wait(timeout=10)

    def row(samples: list[float]) -> dict[str, float]:
        ms = [1000 * s for s in samples]
        return {"p50_ms": round(_pct(ms, 0.5), 2), "p99_ms": round(_pct(ms, 0.99), 2), "n": len(ms)}

    return {"cold": row(cold), "bare_get": row(floor), "requests_per_admission": round(requests, 1)}


def plot(figures: dict[str, Any], path: Path) -> None:
    """p50 and p99 against the offered rate, trtguard beside the empty webhook; goal and fsync floor."""
    import matplotlib  # noqa: PLC0415 - the bench extra; only this step needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(6.4, 3.6), dpi=110)
    colours = {"trtguard": "tab:green", "empty": "tab:gray"}
    label = {"trtguard": "trtguard (fsync per commit)", "empty": "empty FastAPI webhook"}
    for name, rows in figures["webhook"]["rates"].items():
        rates = [float(rate) for rate in rows]
        for key, style in (("p50_ms", "--"), ("p99_ms", "-")):
            values = [row[key] for row in rows.values()]
            axes.plot(
                rates, values, style, marker="o", ms=3, color=colours[name], label=f"{label[name]} {key[:3]}"
            )
    trtguard_rows = figures["webhook"]["rates"].get("trtguard", {})
    axes.plot(
        [float(rate) for rate in trtguard_rows],
        [row["fsync"]["p99_ms"] for row in trtguard_rows.values()],
        ":",
        marker="x",
        ms=3,
        color="tab:blue",
        label="disk fsync p99 during each trtguard run (the floor)",
    )
    axes.axhline(GOAL_P99_MS, color="tab:red", lw=0.8, label=f"goal: p99 <= {GOAL_P99_MS:.0f} ms")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("offered requests/s (open loop, 8 keep-alive TLS connections)")
    axes.set_ylabel("latency (ms)")
    axes.set_title("POST /validate, 3-container Pod + 1 engine", fontsize=10)
    axes.grid(True, which="both", lw=0.3)
    axes.legend(fontsize=6.5, loc="upper left", handlelength=4)  # long enough to tell dashes (p50) apart
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _summary(figures: dict[str, Any]) -> list[str]:
    web = figures["webhook"]
    lines = []
    at200 = {name: rows.get("200") for name, rows in web["rates"].items()}
    if at200.get("trtguard") and at200.get("empty"):
        lines.append(
            f"/validate p99 at 200/s: trtguard {at200['trtguard']['p99_ms']:.2f} ms, empty "
            f"{at200['empty']['p99_ms']:.2f} ms, disk fsync p99 during the trtguard run "
            f"{at200['trtguard']['fsync']['p99_ms']:.2f} ms (goal <= {GOAL_P99_MS:.0f} ms)"
        )
    maxima = web["max"]
    fraction = maxima["trtguard"]["throughput"] / maxima["empty"]["throughput"]
    lines.append(
        f"max throughput: trtguard {maxima['trtguard']['throughput']:.0f}/s, empty "
        f"{maxima['empty']['throughput']:.0f}/s = {100 * fraction:.0f} % (goal >= 50 %)"
    )
    cold = figures.get("registry")
    if cold:
        first, floor = cold["cold"], cold["bare_get"]
        lines.append(
            f"cold registry admission p99 {first['p99_ms']:.1f} ms (p50 {first['p50_ms']:.1f}), bare GET p99 "
            f"{floor['p99_ms']:.2f} ms, {cold['requests_per_admission']} requests each "
            f"(goal <= {GOAL_COLD_P99_MS:.0f} ms)"
        )
    for name, row in figures["startup"].items():
        lines.append(f"start-up {name}: median {row['median_s']:.3f} s, p90 {row['p90_s']:.3f} s")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each measured run (4)")
    parser.add_argument("--rates", default="100,200,400,800,1600,3200", help="offered requests/s, ascending")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections (8)")
    parser.add_argument("--images", type=int, default=200, help="cold registry admissions (200)")
    parser.add_argument("--runs", type=int, default=9, help="runs of each start-up command (9)")
    parser.add_argument("--before", type=Path, help="an earlier source tree, for the start-up rows")
    # Written only when asked: the committed figures (bench/issue15_figures.json, the README's plot) come from
    # a quiet run, and `make bench` on a busy machine must not replace them.
    parser.add_argument("--json", type=Path, help="write the figures here (e.g. bench/issue15_figures.json)")
    parser.add_argument("--png", type=Path, help="draw the plot here (e.g. docs/images/issue15-latency.png)")
    args = parser.parse_args()
    rates = [float(rate) for rate in args.rates.split(",")]
    figures: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_at_start": os.getloadavg()[0],
            "python": sys.version.split()[0],
        }
    }
    figures["startup"] = startup_bench.measure(args.runs, args.before)
    with tempfile.TemporaryDirectory(prefix="trtguard-issue15-") as folder:
        figures["webhook"] = webhook_figures(Path(folder), rates, args.seconds, args.connections)
    if shutil.which("docker-registry") is not None:
        with tempfile.TemporaryDirectory(prefix="trtguard-issue15-registry-") as folder:
            figures["registry"] = asyncio.run(_cold_registry(Path(folder), args.images))
    figures["machine"]["load_at_end"] = os.getloadavg()[0]
    figures["summary"] = _summary(figures)
    print("\n".join(figures["summary"]))
    print(
        f"load average {figures['machine']['load_at_start']:.1f} -> {figures['machine']['load_at_end']:.1f}"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {args.json}")
    if args.png is not None:
        args.png.parent.mkdir(parents=True, exist_ok=True)
        plot(figures, args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
