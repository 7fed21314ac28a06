"""What upgrading a decision log to schema 4 costs: every live record gets its ``api_group`` from its body.

A log of schema 3 with --records live records (as trtguard wrote them before: migrations 1 to 3, rows
without ``api_group``) is migrated as ``trtguard serve`` or ``audit seal`` does. Measured in the same run:

  1. the migration (one transaction: the column filled in from each body, its index built, the carried
     state's tables replaced);
  2. baseline: verifying the chain of the same rows (what ``audit verify`` reads), after the upgrade.

SQLite always; PostgreSQL too with --postgres URL (an empty database it may fill and leave behind).

Usage:  .venv/bin/python bench/schema_upgrade.py [--records 100000] [--postgres postgresql://…/empty_db]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from decisionlog import GENESIS_HASH, PostgresStore, SQLiteStore
from decisionlog._record import DecisionRecord
from decisionlog._schema import CREATE_MIGRATIONS_TABLE, INSERT_VERSION, MIGRATIONS, Dialect
from decisionlog._sql import INSERT_COLUMNS, INSERT_SHARED, link
from decisionlog._sqlite import connect, migrate

START = datetime(2026, 11, 1, tzinfo=UTC)
#: The columns of schema 3: every column but the one schema 4 adds.
COLUMNS = [c for c in INSERT_COLUMNS.split(", ") if c != "api_group"]


def _record(n: int) -> DecisionRecord:
    reference = f"registry.example.com/models/m{n % 997}@sha256:{n:064x}"
    engine = {"reference": reference, "digest": reference.split("@")[1], "path": "spec.volumes[0]"}
    return DecisionRecord(
        uid=f"bench-{n}",
        operation="UPDATE",
        kind="Deployment",
        api_version="apps/v1",
        allowed=True,
        reason="Allowed",
        namespace="prod",
        name=f"model-{n % 997}",
        engines=(engine,),
        time=START + timedelta(seconds=n),
        record_id=f"{n:032x}",
    )


def _schema_3(execute: Callable[[str, tuple[Any, ...]], object], records: int, mark: str) -> None:
    """Migrations 1 to 3 and ``records`` rows as schema 3 stored them (chained; shared parts inline)."""
    execute(CREATE_MIGRATIONS_TABLE, ())
    dialect: Dialect = "sqlite" if mark == "?" else "postgresql"
    for migration in MIGRATIONS[:3]:
        for statement in migration.statements(dialect):
            execute(statement, ())
        execute(INSERT_VERSION.format(p=mark), (migration.version, migration.description, "bench"))
    prev = GENESIS_HASH
    insert = (
        f"INSERT INTO trtguard_decisions ({', '.join(COLUMNS)}) VALUES ({', '.join([mark] * len(COLUMNS))})"  # noqa: S608
    )
    shared = INSERT_SHARED.format(p=mark)
    for n in range(1, records + 1):
        values, part, stored = link(_record(n), n, prev)
        if part is not None:
            execute(shared, part)
        row = dict(zip(INSERT_COLUMNS.split(", "), values, strict=True))
        execute(insert, tuple(row[c] for c in COLUMNS))
        prev = stored.hash
    execute(f"UPDATE trtguard_chain_head SET seq = {mark}, hash = {mark}", (records, prev))  # noqa: S608


async def _sqlite(records: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "decisions.db"
        conn = connect(path)
        conn.execute("BEGIN")
        _schema_3(conn.execute, records, "?")
        conn.execute("COMMIT")
        started = time.perf_counter()
        migrate(conn, where=str(path))
        migrated = time.perf_counter() - started
        conn.close()
        store = SQLiteStore(path, read_only=True)
        started = time.perf_counter()
        report = await store.verify()
        assert report.ok and report.records == records, report.summary()
        return migrated, time.perf_counter() - started


async def _postgres(url: str, records: int) -> tuple[float, float]:
    with psycopg.connect(url) as conn, conn.transaction():
        _schema_3(lambda sql, params: conn.execute(sql.replace("?", "%s"), params), records, "%s")
    store = PostgresStore(url)
    started = time.perf_counter()
    await store.open()
    await store.probe()  # the migration, if open could not finish it
    migrated = time.perf_counter() - started
    try:
        started = time.perf_counter()
        report = await store.verify()
        assert report.ok and report.records == records, report.summary()
        return migrated, time.perf_counter() - started
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database to measure on too")
    args = parser.parse_args()
    runs = [("SQLite", _sqlite(args.records))]
    if args.postgres:
        runs.append(("PostgreSQL", _postgres(args.postgres, args.records)))
    print(f"schema 3 -> 4 with {args.records:,} live records:")
    for name, run in runs:
        migrated, verified = asyncio.run(run)
        per = 1e6 / args.records
        print(
            f"  {name:<10} migration {migrated:6.2f} s ({migrated * per:5.1f} us/record); "
            f"baseline: verifying the same chain {verified:6.2f} s ({verified * per:5.1f} us/record)"
        )


if __name__ == "__main__":
    main()
