"""CPU per ``POST /validate`` in-process, beside the empty webhook driven the same way, and per part.

The ASGI app is called directly (no TLS, no HTTP client, no load generator), so the figure is the webhook's
own work per request. The request is ``bench/webhook_latency.py``'s (a Pod of 3 containers and 1 engine, the
bundled library policies, admitted), each with a fresh uid; the decision log is SQLite with
``?synchronous=normal`` (no fsync per commit, which costs wall time, not CPU); the decision line is logged as
JSON (to /dev/null) and the long-lived objects are frozen out of the collector, as ``trtguard serve`` does.

Printed per request, median over --runs: CPU of the whole process (the event loop and the decision log's
writer thread), CPU of the event loop's thread alone, and wall time; the same for the empty webhook of
``bench/webhook_latency.py`` (FastAPI, the body decoded, the uid answered) in the same process, and the
ratio. ``--parts`` adds the CPU of each part of one request, called alone: decoding the AdmissionReview,
judging it (policies), building the record, building and encoding the answer, the decision line and metrics,
the check that the record keeps every engine, the writer's encoding and hashing of the record (``link``),
and the writer's whole transaction for one record (``commit``: link, insert, chain head, commit, no fsync).
``--before DIR`` measures an earlier source tree (``git archive REV | tar -x -C DIR``) in the same run,
interleaved with this one. The CPU of each thread of the process is printed too (``--threads``).

Usage: ``.venv/bin/python bench/validate_cpu.py [--requests N] [--runs 3] [--parts] [--before DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import importlib.util
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
Message = MutableMapping[str, Any]
App = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


def _webhook_bench() -> Any:
    """This tree's ``bench/webhook_latency.py`` (the request, the empty webhook), for any tree measured."""
    spec = importlib.util.spec_from_file_location("webhook_latency_bench", HERE / "webhook_latency.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _webhook_module(name: str) -> Any:
    """``webhook._<name>`` of the tree measured, or ``webhook.<name>`` of a tree from before its modules
    became private (issue 26, S7), so that ``--before`` measures either."""
    try:
        return importlib.import_module(f"webhook._{name}")
    except ModuleNotFoundError:
        return importlib.import_module(f"webhook.{name}")


def measure(requests: int, parts: bool) -> dict[str, float]:
    """The figures of the tree this interpreter imports ``webhook`` and ``decisionlog`` from."""
    from trtguard.demo.material import make_material  # noqa: PLC0415 - from the tree measured

    configure_logging = _webhook_module("logging").configure_logging
    build = _webhook_module("server").build
    ServeSettings = _webhook_module("settings").ServeSettings

    bench = _webhook_bench()
    with tempfile.TemporaryDirectory() as folder, Path(os.devnull).open("w") as sink:
        root = Path(folder)
        material = make_material(root)
        template = bench._review_body(material, root).read_text()
        settings = ServeSettings(
            policies=material.policies,
            attestations=material.attestations,
            insecure_http=True,
            decision_log=f"sqlite:///{root / 'decisions.db'}?synchronous=normal",
        )
        built = build(settings, out=io.StringIO())
        configure_logging("info", stream=sink)
        gc.freeze()
        return asyncio.run(_drive(settings, built, template, requests, parts, bench))


def _body(template: str, placeholder: str) -> bytes:
    return template.replace(placeholder, str(uuid.uuid4())).encode()


async def _call(app: App, body: bytes) -> list[Message]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/validate",
        "raw_path": b"/validate",
        "query_string": b"timeout=10s",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8443),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[Message] = []

    async def receive() -> Message:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def _per_request(app: App, template: str, placeholder: str, requests: int) -> dict[str, float]:
    answer = await _call(app, _body(template, placeholder))
    review = json.loads(answer[1]["body"])
    assert answer[0]["status"] == 200 and review["response"]["allowed"] is True, review
    for _ in range(300):  # warm: verified evidence cached, the log's first pages written
        await _call(app, _body(template, placeholder))
    bodies = [_body(template, placeholder) for _ in range(requests)]
    threads = _thread_cpu()
    process, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
    for body in bodies:
        await _call(app, body)
    figures = {
        "cpu_us": (time.process_time() - process) / requests * 1e6,
        "loop_cpu_us": (time.thread_time() - thread) / requests * 1e6,
        "wall_us": (time.perf_counter() - wall) / requests * 1e6,
    }
    for name, seconds in _thread_cpu().items():
        figures[f"thread_{name}_us"] = (seconds - threads.get(name, 0.0)) / requests * 1e6
    return figures


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each named thread of this process so far (Linux ``/proc``; nothing elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue
        user, system = stat.rsplit(")", 1)[1].split()[11:13]
        found[thread.name] = (int(user) + int(system)) / ticks
    return found


async def _drive(
    settings: Any, built: Any, template: str, requests: int, parts: bool, bench: Any
) -> dict[str, float]:
    create_app = _webhook_module("app").create_app

    app = create_app(settings, built.services, owns_store=False)
    await built.services.store.open()
    try:
        figures = await _per_request(app, template, bench.UID_PLACEHOLDER, requests)
        empty = await _per_request(bench.empty_app(), template, bench.UID_PLACEHOLDER, requests)
        figures |= {f"empty_{key}": value for key, value in empty.items() if not key.startswith("thread_")}
        figures["cpu_ratio_to_empty"] = figures["cpu_us"] / figures["empty_cpu_us"]
        if parts:
            figures |= await _parts(built, _body(template, bench.UID_PLACEHOLDER))
    finally:
        await built.services.store.close()
    return figures


async def _parts(built: Any, body: bytes) -> dict[str, float]:
    """CPU of each part of one request, called alone (the thread's CPU, best of 5 rounds)."""
    from decisionlog import _sql, engines_left_out  # noqa: PLC0415 - from the tree measured
    from decisionlog._record import GENESIS_HASH  # noqa: PLC0415
    from decisionlog._sqlite import connect, migrate, write_batch  # noqa: PLC0415
    from verifier.base import Deadline  # noqa: PLC0415
    from webhook._wire import encode, parse_review  # noqa: PLC0415

    reviewer = built.services.reviewer
    request = parse_review(body)

    def judge() -> Any:
        return reviewer._judge(request, Deadline.after(5.0), 5.0)

    verdict = await judge()
    record = reviewer._record(request, verdict, 0.001)

    def answer() -> bytes:
        review = reviewer._response(request, verdict)
        return review if isinstance(review, bytes) else encode(review)

    def rounds(call: Callable[[], object], calls: int = 500) -> float:
        best = float("inf")
        for _ in range(5):
            started = time.thread_time()
            for _ in range(calls):
                call()
            best = min(best, (time.thread_time() - started) / calls * 1e6)
        return best

    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        for _ in range(100):
            await judge()
        best = min(best, (time.thread_time() - started) / 100 * 1e6)
    with tempfile.TemporaryDirectory() as folder:
        # One record a transaction, as one request at a time gets: the writer thread's whole share of it.
        conn = connect(Path(folder) / "parts.db", synchronous="normal")
        migrate(conn, where="parts")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        records = iter([dataclasses.replace(record, record_id=uuid.uuid4().hex) for _ in range(2500)])
        commit = rounds(lambda: write_batch(conn, [next(records)], dedupe=False))
        conn.close()
    return {
        "part_decode_us": rounds(lambda: parse_review(body)),
        "part_judge_us": best,
        "part_record_us": rounds(lambda: reviewer._record(request, verdict, 0.001)),
        "part_answer_us": rounds(answer),
        "part_log_line_and_metrics_us": rounds(lambda: reviewer._observe(request, verdict, record, 0.001)),
        "part_engines_left_out_us": rounds(lambda: engines_left_out(record)),
        "part_writer_link_us": rounds(lambda: _sql.link(record, 1, GENESIS_HASH)),
        "part_writer_commit_us": commit,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each tree, interleaved (3)")
    parser.add_argument("--parts", action="store_true", help="the CPU of each part of a request, alone")
    parser.add_argument("--threads", action="store_true", help="the CPU of each thread per request")
    parser.add_argument("--before", type=Path, help="an earlier source tree, measured in the same run")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.requests, args.parts)))
        return 0
    trees = {"this tree": HERE.parent} | ({"before": args.before.resolve()} if args.before else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.runs):  # interleaved, so that a machine busy with other work slows both alike
        for name, tree in trees.items():
            command = [sys.executable, __file__, "--json", "--requests", str(args.requests)]
            command += ["--parts"] if args.parts else []
            env = {**os.environ, "PYTHONPATH": str(tree)}
            done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tree, env=env)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        f"POST /validate in-process, {args.requests} requests, median of {args.runs} runs; "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    for name, rows in runs.items():
        keys = dict.fromkeys(key for row in rows for key in row)  # a thread may be missing from a run
        medians = {key: statistics.median(row.get(key, 0.0) for row in rows) for key in keys}
        print(
            f"  {name:<10} CPU {medians['cpu_us']:7.1f} us/request (event loop {medians['loop_cpu_us']:.1f}, "
            f"wall {medians['wall_us']:.1f}); empty webhook {medians['empty_cpu_us']:.1f} us (event loop "
            f"{medians['empty_loop_cpu_us']:.1f}): {medians['cpu_ratio_to_empty']:.2f}x the empty webhook"
        )
        if args.threads:
            print(
                "             threads: "
                + ", ".join(
                    f"{key.removeprefix('thread_').removesuffix('_us')} {value:.1f}"
                    for key, value in medians.items()
                    if key.startswith("thread_")
                )
                + " (us CPU/request; /proc counts in clock ticks)"
            )
        if args.parts:
            print(
                "             parts: "
                + ", ".join(
                    f"{key.removeprefix('part_').removesuffix('_us')} {value:.1f}"
                    for key, value in medians.items()
                    if key.startswith("part_")
                )
                + " (us)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
