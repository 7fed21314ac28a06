"""Instructions per unit of work, counted by ``valgrind --tool=callgrind``: a figure the machine's load does
not move, where ``bench/validate_cpu.py`` and ``bench/log_writer.py`` measure CPU time.

Modes (units): ``validate``, one ``POST /validate`` in-process, all threads (the request, settings and ASGI
call of ``bench/validate_cpu.py``); ``empty``, the empty webhook of ``bench/webhook_latency.py`` driven the
same way, the baseline; ``judge``, ``reviewer._judge`` of the same request alone; ``writer16`` and
``writer1``, one decision-log record written by ``write_batch`` in batches of 16 and of 1 (SQLite,
``synchronous=normal``). Each figure is differential: the same child runs twice, with --n and 2 x --n units
after the same --warm units, and (Ir(2N) - Ir(N)) / N is the instructions of one unit, every thread summed,
start-up, warm-up and shutdown cancelled out. The child starts counting just before the warm-up through
``CALLGRIND_START_INSTRUMENTATION`` (a shim compiled with gcc at run time from ``valgrind/callgrind.h``);
without the header or gcc it counts from the start (``--instr-atstart=yes``), which cancels out too, only
with more of it to cancel. Printed per unit: the total, the event loop's (main) thread and the other threads,
for this tree and ``--before DIR`` (an earlier source tree, ``git archive REV | tar -x -C DIR``, run with
the same interpreter and this tree's bench drivers), beside the empty webhook of the same run.
Each child takes minutes under valgrind; --jobs run at once.

Usage: ``.venv/bin/python bench/instructions.py [--modes validate,empty,judge,writer16,writer1]
[--warm 160] [--n 320] [--jobs 2] [--before DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import dataclasses
import gc
import importlib.util
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODES = ("validate", "empty", "judge", "writer16", "writer1")
SHIM = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
"""


def _bench_module(name: str) -> Any:
    """This tree's ``bench/<name>.py``, the driver of every tree measured."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _webhook_module(name: str) -> Any:
    """``webhook._<name>``, or ``webhook.<name>`` of a tree from before its modules became private."""
    try:
        return importlib.import_module(f"webhook._{name}")
    except ModuleNotFoundError:
        return importlib.import_module(f"webhook.{name}")


def child(mode: str, warm: int, n: int, shim: str | None) -> None:
    """Run ``warm`` then ``n`` units of ``mode`` (under callgrind), counting from just before the warm-up."""
    from trtguard.demo.material import make_material  # noqa: PLC0415 - from the tree measured

    start = ctypes.CDLL(shim).cg_start if shim else (lambda: None)
    rng = random.Random(37)  # the same uids in both runs of a pair

    def body(template: str, placeholder: str) -> bytes:
        return template.replace(placeholder, str(uuid.UUID(int=rng.getrandbits(128), version=4))).encode()

    with tempfile.TemporaryDirectory() as folder, Path(os.devnull).open("w") as sink:
        root = Path(folder)
        if mode.startswith("writer"):
            from bench.evidence_export import _templates  # noqa: PLC0415
            from decisionlog._sqlite import connect, migrate, write_batch  # noqa: PLC0415

            batch = int(mode.removeprefix("writer"))
            template = asyncio.run(_templates(make_material(root / "material"), root))[0]
            conn = connect(root / "d.db", synchronous="normal")
            migrate(conn, where="bench")
            made = [
                dataclasses.replace(template, uid=f"u-{i}", record_id=f"{i:032x}") for i in range(warm + n)
            ]
            start()
            for i in range(0, warm + n, batch):
                write_batch(conn, made[i : i + batch], dedupe=False)
            conn.close()
            return
        vc, bench = _bench_module("validate_cpu"), _bench_module("webhook_latency")
        material = make_material(root)
        template = bench._review_body(material, root).read_text()
        settings = _webhook_module("settings").ServeSettings(
            policies=material.policies,
            attestations=material.attestations,
            insecure_http=True,
            decision_log=f"sqlite:///{root / 'decisions.db'}?synchronous=normal",
        )
        built = _webhook_module("server").build(settings, out=io.StringIO())
        _webhook_module("logging").configure_logging("info", stream=sink)
        gc.freeze()

        async def run() -> None:
            await built.services.store.open()
            try:
                if mode == "judge":
                    from verifier.base import Deadline  # noqa: PLC0415
                    from webhook._wire import parse_review  # noqa: PLC0415

                    request = parse_review(body(template, bench.UID_PLACEHOLDER))
                    start()
                    for _ in range(warm + n):
                        verdict = await built.services.reviewer._judge(request, Deadline.after(5.0), 5.0)
                    assert verdict.allowed, verdict
                    return
                create_app = _webhook_module("app").create_app
                if mode == "validate":
                    app = create_app(settings, built.services, owns_store=False)
                else:
                    app = bench.empty_app()
                start()
                for _ in range(warm):
                    await vc._call(app, body(template, bench.UID_PLACEHOLDER))
                bodies = [body(template, bench.UID_PLACEHOLDER) for _ in range(n)]
                for one in bodies:
                    answer = await vc._call(app, one)
                assert answer[0]["status"] == 200, answer
                assert json.loads(answer[1]["body"])["response"]["allowed"] is True, answer
            finally:
                await built.services.store.close()

        asyncio.run(run())


def compile_shim(folder: Path) -> str | None:
    """The shim's shared object in ``folder``, or None where gcc or ``valgrind/callgrind.h`` is missing."""
    source = folder / "cgreq.c"
    source.write_text(SHIM)
    if shutil.which("gcc") is None:
        return None
    done = subprocess.run(
        ["gcc", "-O1", "-shared", "-fPIC", "-o", str(folder / "cgreq.so"), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    return str(folder / "cgreq.so") if done.returncode == 0 else None


def thread_costs(prefix: Path) -> dict[int, int]:
    """Ir of each thread of one callgrind run (``--separate-threads=yes``: one file per thread)."""
    costs: dict[int, int] = {}
    for path in prefix.parent.glob(prefix.name + "-*"):
        found = re.findall(r"^(?:summary|totals):\s+(\d+)", path.read_text(), re.M)
        costs[int(path.name.rsplit("-", 1)[1])] = int(found[0]) if found else 0
    return costs


def run_child(tree: Path, mode: str, warm: int, n: int, shim: str | None, folder: Path) -> dict[int, int]:
    """One child under callgrind in ``tree``; its Ir per thread."""
    label = f"{tree.name}-{mode}-{n}-{uuid.uuid4().hex[:8]}"
    out = folder / f"{label}.out"
    command = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}"]
    command += [f"--log-file={folder / label}.log", f"--instr-atstart={'no' if shim else 'yes'}"]
    command += [sys.executable, __file__, "--role", "child", mode, str(warm), str(n)]
    command += ["--shim", shim] if shim else []
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=tree, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{label} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return thread_costs(out)


def per_unit(small: dict[int, int], large: dict[int, int], n: int) -> dict[str, float]:
    """(Ir(2N) - Ir(N)) / N: all threads, the main one (thread 1), the others."""
    main = (large.get(1, 0) - small.get(1, 0)) / n
    total = (sum(large.values()) - sum(small.values())) / n
    return {"total": total, "main": main, "other": total - main}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of " + ", ".join(MODES))
    parser.add_argument("--warm", type=int, default=160, help="units before counting (160)")
    parser.add_argument("--n", type=int, default=320, help="units of the smaller run of a pair (320)")
    parser.add_argument("--jobs", type=int, default=2, help="children under valgrind at once (2)")
    parser.add_argument("--before", type=Path, help="an earlier source tree, measured in the same run")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("child", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--shim", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "child":
        mode, warm, n = args.child
        child(mode, int(warm), int(n), args.shim)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind not found: instruction counts skipped")
        return 0
    modes = [mode for mode in args.modes.split(",") if mode]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}")
    trees = {"this tree": HERE.parent} | ({"before": args.before.resolve()} if args.before else {})
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        shim = compile_shim(folder)
        jobs: dict[tuple[str, str, int], Any] = {}
        with ThreadPoolExecutor(args.jobs) as pool:
            for mode in modes:
                # a writer's batches must fall alike in both runs of a pair
                batch = int(mode.removeprefix("writer")) if mode.startswith("writer") else 1
                warm, n = -(-args.warm // batch) * batch, -(-args.n // batch) * batch
                for tree_name, tree in trees.items() if mode != "empty" else [("this tree", HERE.parent)]:
                    for count in (n, 2 * n):
                        key = (mode, tree_name, count)
                        jobs[key] = pool.submit(run_child, tree, mode, warm, count, shim, folder)
        results = {key: job.result() for key, job in jobs.items()}
    print(
        f"Instructions (callgrind Ir) per unit, (Ir(2N) - Ir(N)) / N after {args.warm} warm-up units; "
        + ("counted from the warm-up" if shim else "counted from the start (no callgrind.h or gcc)")
    )
    figures: dict[tuple[str, str], dict[str, float]] = {}
    for (mode, tree_name, count), small in results.items():
        if (large := results.get((mode, tree_name, 2 * count))) is not None:
            figures[(mode, tree_name)] = per_unit(small, large, count)
    empty = figures.get(("empty", "this tree"))
    for (mode, tree_name), got in figures.items():
        line = f"  {mode:<9} {tree_name:<10} {got['total']:>12,.0f} Ir (main {got['main']:,.0f}, "
        line += f"other threads {got['other']:,.0f})"
        if mode == "validate" and empty:
            line += f"; {got['total'] / empty['total']:.2f}x the empty webhook"
        if tree_name == "this tree" and (before := figures.get((mode, "before"))):
            line += f"; {got['total'] / before['total']:.3f}x before"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
