"""What change control's look-up of a workload's last admission costs once the log carries pruned admissions.

A SQLite log of --records decisions about --workloads workloads (each decision admits an engine), rotated as
`trtguard audit rotate` does (segments of --segment-records, pruned down to the newest --keep-records): the
last admission of most workloads is then carried forward (``trtguard_carried``), of the rest still live.

Measured in the same run, per look-up (``DecisionLogHistory.last_engines``, the webhook's path):
  1. baseline: the live records alone, as before the carried state existed (``_live``: newest first, pages,
     the undelivered check, up to the newest admission), for workloads whose last admission is live;
  2. the same workloads through ``last_engines`` for a policy (every live admission of the workload, for
     each model's last build, then one read of the carried state);
  3. workloads whose last admission was pruned: answered from the carried state.
And the rotation: sealing with the carried state folded in, beside reading and chain-checking the same rows
(what sealing did before). Then one workload's history as it grows (attack 24 g): 100, 400 and 1,600 prior
no-op UPDATEs, each naming --growth-engines engines of as many models, and the time of one policy's look-up
after each, beside the 100-record baseline of the same run (the look-up reads the same few records however
many there are).

Usage:  .venv/bin/python bench/change_control_history.py [--records 50000] [--workloads 1000]
        [--segment-records 10000] [--keep-records 10000] [--lookups 400] [--growth-engines 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from decisionlog import SQLiteStore
from decisionlog._archive import archive_segments
from decisionlog._chain import ChainVerifier
from decisionlog._record import DecisionRecord
from decisionlog._segments import Ledger
from decisionlog._sqlite import connect, migrate, write_batch
from policies.identity import WorkloadIdentity
from verifier.base._deadline import Deadline
from verifier.crypto._keys import generate_private_key
from webhook._admission_history import DecisionLogHistory

START = datetime(2026, 11, 1, tzinfo=UTC)
#: The change-control policy that confirmed each engine (``confirmed_by``), whose history is looked up.
POLICY = "change-control"


def _record(n: int, workloads: int) -> DecisionRecord:
    workload = n % workloads
    reference = f"registry.example.com/models/m{workload}@sha256:{n:064x}"
    engine = {
        "reference": reference,
        "digest": reference.split("@")[1],
        "path": "spec.volumes[0]",
        "name": "engine",
        "containers": ["server"],
        "confirmed_by": [POLICY],
    }
    return DecisionRecord(
        uid=f"bench-{n:09d}",
        operation="UPDATE",
        kind="Deployment",
        api_version="apps/v1",
        allowed=True,
        reason="Allowed",
        namespace="prod",
        name=f"model-{workload}",
        engines=(engine,),
        time=START + timedelta(seconds=n),
        record_id=f"{n:032x}",
    )


async def _timed(calls: list[Callable[[], Awaitable[object]]]) -> list[float]:
    seconds = []
    for call in calls:
        started = time.perf_counter()
        await call()
        seconds.append(time.perf_counter() - started)
    return seconds


def _line(label: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"  {label:<58} p50 {statistics.median(ordered) * 1e3:6.2f} ms   p99 {p99 * 1e3:6.2f} ms"


def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="trtguard-bench-history-") as scratch:
        log = Path(scratch) / "decisions.db"
        url = f"sqlite:///{log}"
        conn = connect(log, synchronous="normal")
        migrate(conn, where=url)
        for first in range(0, args.records, 500):
            write_batch(
                conn,
                [_record(n, args.workloads) for n in range(first, min(first + 500, args.records))],
                dedupe=False,
            )
        conn.close()
        key = generate_private_key()
        with Ledger.open(url) as ledger:
            started = time.perf_counter()
            verifier = ChainVerifier()
            rows = 0
            for row in ledger.rows(0, args.records):  # what sealing did before: read and check the chain
                verifier.feed(row)
                rows += 1
            chain_s = time.perf_counter() - started
            started = time.perf_counter()
            sealed = ledger.seal(key, segment_records=args.segment_records, partial=False)
            seal_s = time.perf_counter() - started
            archive_segments(ledger, Path(scratch) / "archive")
            pruned = ledger.prune(Path(scratch) / "archive", keep_records=args.keep_records, keep_since=None)
            base = pruned[-1].checkpoint.last_seq if pruned else 0
        sealed_records = sum(c.count for c in sealed)
        print(
            f"{args.records:,} decisions about {args.workloads:,} workloads; {len(sealed)} segments sealed, "
            f"{len(pruned)} pruned (live from seq {base + 1:,})"
        )
        print(
            f"rotation: seal with the carried state {seal_s / sealed_records * 1e6:.1f} us/record; "
            f"reading and chain-checking the rows (what sealing did before) {chain_s / rows * 1e6:.1f} "
            "us/record (baseline)"
        )

        async def lookups() -> None:
            store = SQLiteStore(log, read_only=True)
            history = DecisionLogHistory(store)
            # Workloads are admitted round robin: those admitted in the last `workloads` records are live.
            live = [f"model-{(args.records - 1 - i) % args.workloads}" for i in range(min(args.lookups, 200))]
            live_ns = set(live)
            carried = [f"model-{w}" for w in range(args.workloads) if f"model-{w}" not in live_ns]
            if args.records - args.workloads < base:
                print("  (every workload's last admission is carried: raise --keep-records for live ones)")
            carried = carried[: args.lookups]
            deadline = Deadline.after(600)

            def workload(name: str) -> WorkloadIdentity:
                return WorkloadIdentity("apps", "Deployment", "prod", name)

            def live_only(name: str) -> Callable[[], Awaitable[object]]:
                return lambda: history._live(workload(name))

            def last(name: str) -> Callable[[], Awaitable[object]]:
                return lambda: history.last_engines(workload(name), deadline, POLICY)

            baseline = await _timed([live_only(n) for n in live])
            now_live = await _timed([last(n) for n in live])
            now_carried = await _timed([last(n) for n in carried])
            print("look-up of the last admission (change control, per engine judged):")
            print(_line("baseline: live records only (as before)", baseline))
            print(_line("live last admission, with the carried state read", now_live))
            print(_line("pruned last admission, answered from the carried state", now_carried))

        asyncio.run(lookups())
        asyncio.run(_growth(Path(scratch) / "growth.db", args.growth_engines))


async def _growth(log: Path, engines: int) -> None:
    """One policy's look-up of one workload after 100, 400 and 1,600 prior no-op UPDATEs (attack 24 g)."""
    store = SQLiteStore(log)
    await store.open()
    named = tuple(
        {
            "reference": f"registry.example.com/models/m{i}@sha256:{i:064x}",
            "digest": f"sha256:{i:064x}",
            "path": f"spec.template.spec.volumes[{i}]",
            "model": f"{i:064x}",
            "containers": ["server"],
            "confirmed_by": [POLICY],
        }
        for i in range(engines)
    )
    history, workload, done = (
        DecisionLogHistory(store),
        WorkloadIdentity("apps", "Deployment", "prod", "svc"),
        0,
    )
    baseline = 0.0
    print(f"one workload's history as it grows ({engines} engines per admission), one policy's look-up:")
    for total in (100, 400, 1600):
        while done < total:
            record = DecisionRecord(
                uid=f"growth-{done}",
                operation="UPDATE",
                kind="Deployment",
                api_version="apps/v1",
                allowed=True,
                reason="Allowed",
                namespace="prod",
                name="svc",
                engines=named,
            )
            await store.append(record, deadline=Deadline.after(30))
            done += 1
        look_up = lambda: history.last_engines(workload, Deadline.after(600), POLICY)  # noqa: E731
        seconds = statistics.median(await _timed([look_up] * 5))
        baseline = baseline or seconds
        print(
            f"  {total:5,} prior records: {seconds * 1e3:8.2f} ms per admission "
            f"({seconds / baseline:.1f}x the 100)"
        )
    await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--workloads", type=int, default=1_000)
    parser.add_argument("--segment-records", type=int, default=10_000)
    parser.add_argument("--keep-records", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=400)
    parser.add_argument("--growth-engines", type=int, default=100)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
