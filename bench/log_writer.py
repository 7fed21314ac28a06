"""CPU of the SQLite decision log's writer per record: ``write_batch`` (link, hash, insert, commit) of
batches of --batch records, beside an earlier tree in the same run.

The record is the one the webhook writes for ``bench/webhook_latency.py``'s Pod (``bench/evidence_export.py``
makes it), with a fresh uid and record id each; the file is ``synchronous=normal`` (no fsync per commit:
fsyncs are wall time, not CPU). Printed: the median over --runs of the writer thread's CPU per record, in
microseconds, for this tree and for ``--before`` (a source tree of an earlier revision, ``git archive REV |
tar -x -C DIR``, run with the same interpreter), and the WAL pages each record wrote (counted once more,
with no checkpoint in between: a figure the machine's load does not move).

Usage:  .venv/bin/python bench/log_writer.py [--records 4000] [--batch 16] [--runs 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def measure(records: int, batch: int, runs: int) -> tuple[float, float]:
    """Median writer CPU per record (µs) in this interpreter's tree, and WAL pages written per record."""
    from bench.evidence_export import _templates  # noqa: PLC0415 - the tree is chosen by sys.path
    from decisionlog._sqlite import connect, migrate, write_batch  # noqa: PLC0415
    from trtguard.demo.material import make_material  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        template = asyncio.run(_templates(make_material(root / "material"), root))[0]
        figures = []
        for run in range(runs):
            conn = connect(root / f"d{run}.db", synchronous="normal")
            migrate(conn, where="bench")
            made = [
                dataclasses.replace(template, uid=f"u{run}-{n}", record_id=f"{run:08x}{n:024x}")
                for n in range(records)
            ]
            started = time.thread_time()
            for n in range(0, records, batch):
                write_batch(conn, made[n : n + batch], dedupe=False)
            figures.append((time.thread_time() - started) / records * 1e6)
            conn.close()
        return statistics.median(figures), _wal_pages(root / "pages.db", made, batch)


def _wal_pages(path: Path, made: list[Any], batch: int) -> float:
    """WAL frames per record of writing ``made`` after as many records again, no checkpoint in between."""
    from decisionlog._sqlite import connect, migrate, write_batch  # noqa: PLC0415 - the tree measured

    conn = connect(path, synchronous="normal")
    migrate(conn, where="bench")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    first = [dataclasses.replace(record, record_id=f"f{record.record_id[1:]}") for record in made]
    for n in range(0, len(first), batch):
        write_batch(conn, first[n : n + batch], dedupe=False)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for n in range(0, len(made), batch):
        write_batch(conn, made[n : n + batch], dedupe=False)
    frames = int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    conn.close()
    return frames / len(made)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=Path, help="an earlier source tree, measured in the same run")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.records, args.batch, args.runs)))
        return 0
    trees = {"this tree": ROOT} | ({"before": args.before} if args.before else {})
    results: dict[str, tuple[float, float]] = {}
    for name, tree in trees.items():
        # This script on each tree's modules (PYTHONPATH): both are measured by the same code.
        command = [sys.executable, __file__, "--json"]
        command += ["--records", str(args.records), "--batch", str(args.batch), "--runs", str(args.runs)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tree, env=env)
        cpu, pages = json.loads(done.stdout.strip().splitlines()[-1])
        results[name] = cpu, pages
    for name, (cpu, pages) in results.items():
        print(
            f"SQLite writer CPU per record, batches of {args.batch}: {name}: {cpu:.1f} us, "
            f"{pages:.2f} WAL pages a record"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
