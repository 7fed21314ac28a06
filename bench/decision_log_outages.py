"""Answer times of the decision log during PostgreSQL outages (issue 13), at the store the webhook writes to.

Decisions arrive at a fixed rate (open loop); each is appended with the deadline the webhook gives its
record for the chart's 5 s API-server timeout (5 s less the 0.5 s margin, plus half the margin back for the
log: 4.75 s). The answer time of a decision is from its arrival until ``append`` returns (written or refused).

Scenarios, each against a fresh database on the local PostgreSQL server (127.0.0.1:5432, trust auth):
  up    the baseline: PostgreSQL reachable through the same proxy, the same load.
  down  the store is opened while PostgreSQL cannot be reached (a closed proxy): deny mode, answer times.
  hang  PostgreSQL stops answering (a proxy that forwards nothing, as under SIGSTOP) while decisions flow,
        and answers again after the load: answer times, seconds until the store reports not ready, and allow
        records of decisions whose append was refused (answered deny) that no undelivered record marks.

Usage:  .venv/bin/python bench/decision_log_outages.py [--rate 50] [--seconds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

import psycopg

from decisionlog import DecisionLogUnavailable, DecisionRecord, PostgresStore, RecordQuery
from decisionlog._undelivered import target
from tests.support.harness import TcpProxy
from verifier.base._deadline import Deadline

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
API_TIMEOUT = 5.0
RECORD_DEADLINE = API_TIMEOUT - 0.5 + 0.25


def _record(n: int) -> DecisionRecord:
    return DecisionRecord(
        uid=f"bench-{n}-{uuid.uuid4().hex[:8]}",
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        namespace="bench",
        name=f"pod-{n}",
        allowed=True,
        reason="Allowed",
        latency_us=1000,
    )


async def _load(store: PostgresStore, rate: float, seconds: float) -> list[dict[str, Any]]:
    """Appends at ``rate`` per second for ``seconds``; one result per decision."""
    results: list[dict[str, Any]] = []

    async def one(n: int, arrived: float) -> None:
        record = _record(n)
        outcome = "written"
        try:
            await store.append(record, deadline=Deadline(arrived + RECORD_DEADLINE))
        except DecisionLogUnavailable:
            outcome = "refused"
        results.append({"uid": record.uid, "seconds": time.monotonic() - arrived, "outcome": outcome})

    tasks = []
    start = time.monotonic()
    for n in range(int(rate * seconds)):
        scheduled = start + n / rate
        await asyncio.sleep(max(0.0, scheduled - time.monotonic()))
        tasks.append(asyncio.create_task(one(n, scheduled)))
    await asyncio.gather(*tasks)
    return results


def _summary(name: str, results: list[dict[str, Any]]) -> None:
    times = sorted(r["seconds"] for r in results)
    late = sum(1 for t in times if t > API_TIMEOUT)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"{name}: {len(times)} decisions, p50 {statistics.median(times) * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms, "
        f"after the {API_TIMEOUT:g} s API timeout: {late} ({100 * late / len(times):.0f} %)"
    )


async def _up(url_of: Any, rate: float, seconds: float) -> None:
    proxy = TcpProxy()
    await proxy.start()
    store = PostgresStore(url_of(proxy))
    await store.open()
    try:
        _summary("up (baseline)", await _load(store, rate, seconds))
    finally:
        await store.close()
        await proxy.stop()


async def _down(url_of: Any, rate: float, seconds: float) -> None:
    proxy = TcpProxy()
    await proxy.start()
    await proxy.stop()
    store = PostgresStore(url_of(proxy))
    await store.open()
    try:
        _summary("down (deny mode)", await _load(store, rate, seconds))
    finally:
        await store.close()


async def _hang(url_of: Any, database: str, rate: float, seconds: float) -> None:
    proxy = TcpProxy()
    await proxy.start()
    store = PostgresStore(url_of(proxy))
    await store.open()
    unready_after: float | None = None
    try:
        load = asyncio.create_task(_load(store, rate, seconds))
        await asyncio.sleep(1.0)
        proxy.hang()
        hung_at = time.monotonic()
        while not load.done() or unready_after is None:
            if unready_after is None and not store.ready:
                unready_after = time.monotonic() - hung_at
            if time.monotonic() - hung_at > 60:
                break
            await asyncio.sleep(0.05)
        results = await load
        proxy.resume()
        await asyncio.sleep(6.0)  # a commit held by the hang lands now, if it is going to
    finally:
        await store.close()
        await proxy.stop()
    _summary("hang", results)
    print(f"hang: not ready {unready_after:.2f} s after the hang" if unready_after else "hang: stayed ready")
    late = {r["uid"] for r in results if r["outcome"] == "refused"}
    reader = PostgresStore(f"postgresql://postgres@127.0.0.1:5432/{database}", read_only=True)
    await reader.open()
    try:
        stored = [s.record for s in await reader.query(RecordQuery())]
    finally:
        await reader.close()
    marked = {target(r) for r in stored} - {None}
    allows = [r for r in stored if r.allowed and r.uid in late and r.record_id not in marked]
    print(f"hang: {len(marked)} undelivered records; allows of refused answers left unmarked: {len(allows)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    try:
        psycopg.connect(ADMIN, connect_timeout=2).close()
    except psycopg.OperationalError:
        print("skipped: no PostgreSQL server on 127.0.0.1:5432")
        return
    for scenario in ("up", "down", "hang"):
        database = f"trtguard_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        try:

            def url_of(proxy: TcpProxy, database: str = database) -> str:
                return proxy.url(database)

            if scenario == "up":
                await _up(url_of, args.rate, args.seconds)
            elif scenario == "down":
                await _down(url_of, args.rate, args.seconds)
            else:
                await _hang(url_of, database, args.rate, args.seconds)
        finally:
            with psycopg.connect(ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main())
