"""decisionlog/_postgres.py against the real PostgreSQL server on 127.0.0.1:5432."""

from __future__ import annotations

import asyncio
import itertools
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from decisionlog import (
    DecisionLogError,
    DecisionLogUnavailable,
    DecisionRecord,
    PostgresOptions,
    PostgresStore,
    RecordQuery,
    _sql,
    open_store,
)
from decisionlog._record import UNSTORABLE_MARK, storable
from decisionlog._schema import LATEST_VERSION, MIGRATION_LOCK_KEY
from tests.support.harness import RecordFactory, TcpProxy, WaitUntil
from verifier.base._deadline import Deadline

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(pg_url)
    await s.open()
    yield s
    await s.close()


async def test_appends_form_a_chain_that_verifies(store: PostgresStore, make_record: RecordFactory) -> None:
    assert store.ready
    receipts = await asyncio.gather(
        *(store.append(make_record(), deadline=Deadline.after(10)) for _ in range(50))
    )
    assert sorted(r.seq or 0 for r in receipts) == list(range(1, 51))
    report = await store.verify()
    assert report.ok, report.summary()
    assert report.records == 50


async def test_same_schema_and_record_form_as_sqlite(
    store: PostgresStore, pg_url: str, make_record: RecordFactory
) -> None:
    record = make_record(dry_run=True, allowed=False, reason="PolicyViolation", warnings=("w",))
    await store.append(record, deadline=Deadline.after(5))
    [stored] = await store.query(RecordQuery(uid=record.uid))
    assert stored.record == record
    with psycopg.connect(pg_url) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'trtguard_decisions'"
            " ORDER BY ordinal_position"
        ).fetchall()
        assert [c[0] for c in columns] == [
            "seq",
            "record_id",
            "time",
            "uid",
            "operation",
            "kind",
            "namespace",
            "name",
            "allowed",
            "dry_run",
            "policy_revision",
            "body",
            "prev_hash",
            "hash",
            "shared_ref",
            "api_group",
        ]
        assert conn.execute("SELECT version FROM trtguard_schema_migrations ORDER BY version").fetchall() == [
            (v,) for v in range(1, LATEST_VERSION + 1)
        ]


async def test_two_replicas_in_two_processes_write_one_valid_chain(pg_url: str, tmp_path: Path) -> None:
    """Two OS processes append 150 records each at the same time; the chain has all 300, in one line.

    The writers go in 15 rounds of 10 concurrent appends each, and neither starts a round before the other
    has finished the one before: both write during every round, whatever the scheduler does, so their records
    interleave (at least once per round) and the chain-head lock arbitrates every round.
    """
    script = textwrap.dedent(
        """
        import asyncio, pathlib, sys
        from verifier.base._deadline import Deadline
        from decisionlog import DecisionRecord, PostgresStore

        async def wait_for(mark):
            for _ in range(6000):
                if mark.exists():
                    return
                await asyncio.sleep(0.01)
            sys.exit(f"gave up waiting for {mark.name}")

        async def main(url, replica, other, barrier):
            store = PostgresStore(url)
            await store.open()
            records = [DecisionRecord(uid=f"{replica}-{i}", operation="CREATE", kind="Pod", api_version="v1",
                                      allowed=True, reason="Allowed", replica=replica) for i in range(150)]
            # Start together however long each took to start, then go round by round.
            (barrier / f"{replica}-start").touch()
            await wait_for(barrier / f"{other}-start")
            for round, chunk in enumerate(range(0, 150, 10)):
                await asyncio.gather(*(store.append(r, deadline=Deadline.after(30))
                                       for r in records[chunk:chunk + 10]))
                (barrier / f"{replica}-{round}").touch()
                await wait_for(barrier / f"{other}-{round}")
            await store.close()

        asyncio.run(main(*sys.argv[1:4], pathlib.Path(sys.argv[4])))
        """
    )
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, pg_url, replica, other, str(barrier)
        )
        for replica, other in (("replica-a", "replica-b"), ("replica-b", "replica-a"))
    ]
    codes = await asyncio.gather(*(p.wait() for p in procs))
    assert codes == [0, 0]
    store = PostgresStore(pg_url)
    await store.open()
    try:
        report = await store.verify()
        assert report.ok, report.summary()
        assert report.records == 300
        rows = await store.query(RecordQuery())
        replicas = [r.record.replica for r in rows]
        assert replicas.count("replica-a") == replicas.count("replica-b") == 150
        # Round by round: the first 20·k records hold 10·k of each writer, so the writers alternate in every
        # round (the lock really arbitrated concurrent writers), not one after the other.
        for end in range(20, 301, 20):
            assert replicas[:end].count("replica-a") == end // 2, replicas
        switches = sum(1 for a, b in itertools.pairwise(replicas) if a != b)
        assert switches >= 15
    finally:
        await store.close()


async def test_replicas_starting_together_apply_the_migration_once(pg_url: str) -> None:
    stores = [PostgresStore(pg_url) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        assert all(s.ready for s in stores)
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM trtguard_schema_migrations").fetchone() == (LATEST_VERSION,)


async def test_the_table_is_append_only(
    store: PostgresStore, pg_url: str, make_record: RecordFactory
) -> None:
    await store.append(make_record(), deadline=Deadline.after(5))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in (
            "UPDATE trtguard_decisions SET allowed = false",
            "DELETE FROM trtguard_decisions",
            "TRUNCATE trtguard_decisions",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(statement)


async def test_verify_names_the_first_broken_record(
    store: PostgresStore, pg_url: str, make_record: RecordFactory
) -> None:
    records = [make_record() for _ in range(4)]
    for record in records:
        await store.append(record, deadline=Deadline.after(5))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE trtguard_decisions DISABLE TRIGGER trtguard_decisions_append_only")
        conn.execute(
            'UPDATE trtguard_decisions SET body = replace(body, \'"operation":"CREATE"\', '
            "'\"operation\":\"DELETE\"'), operation = 'DELETE' WHERE seq = 2"
        )
    report = await store.verify()
    assert not report.ok
    assert report.first_break is not None
    assert (report.first_break.seq, report.first_break.uid) == (2, records[1].uid)
    assert "stored hash does not match" in report.first_break.problem


async def test_database_down_then_back(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    """Writes fail fast while the database is unreachable, the store says so, and it recovers by itself."""
    database = pg_url.rsplit("/", 1)[1]
    store = PostgresStore(pg_proxy.url(database), PostgresOptions(connect_timeout=1.0, write_timeout=2.0))
    await pg_proxy.stop()
    await store.open()  # does not fail: the webhook starts and reports not ready
    try:
        assert not store.ready
        with pytest.raises(DecisionLogUnavailable):
            await store.append(make_record(), deadline=Deadline.after(3))
        assert not store.ready
        await pg_proxy.start()
        await wait_until(lambda: store.ready, within=10)  # the health check closes the circuit
        receipt = await store.append(make_record(), deadline=Deadline.after(10))
        assert receipt.seq == 1
        assert store.ready
        await pg_proxy.stop()  # cuts the pooled connection mid-life
        with pytest.raises(DecisionLogUnavailable):
            await store.append(make_record(), deadline=Deadline.after(3))
        await pg_proxy.start()
        await wait_until(lambda: store.ready, within=10)
        for _ in range(20):  # the pool notices the broken connection and reconnects
            try:
                receipt = await store.append(make_record(), deadline=Deadline.after(5))
                break
            except DecisionLogUnavailable:
                await asyncio.sleep(0.2)
        assert receipt.seq == 2
        assert (await store.verify()).ok
    finally:
        await store.close()


async def test_readiness_recovers_by_itself_without_appends(
    pg_proxy: TcpProxy, pg_url: str, wait_until: WaitUntil
) -> None:
    """An unready replica gets no requests: the store's health check makes it ready again, schema and all."""
    database = pg_url.rsplit("/", 1)[1]
    options = PostgresOptions(connect_timeout=1.0, write_timeout=2.0, health_interval=0.2)
    store = PostgresStore(pg_proxy.url(database), options)
    await pg_proxy.stop()
    await store.open()
    try:
        assert not store.ready
        await pg_proxy.start()
        await wait_until(lambda: store.ready)  # the schema was applied by the health check: no append came
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM trtguard_schema_migrations").fetchone() == (
                LATEST_VERSION,
            )

        await pg_proxy.stop()
        await wait_until(lambda: not store.ready)  # down while idle: unready before any request fails
        await pg_proxy.start()
        await wait_until(lambda: store.ready)
    finally:
        await store.close()


async def test_readiness_recovers_after_a_failed_write(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    database = pg_url.rsplit("/", 1)[1]
    options = PostgresOptions(connect_timeout=1.0, write_timeout=2.0, health_interval=0.2)
    store = PostgresStore(pg_proxy.url(database), options)
    await store.open()
    try:
        assert store.ready
        await pg_proxy.stop()
        with pytest.raises(DecisionLogUnavailable):
            await store.append(make_record(), deadline=Deadline.after(5))
        assert not store.ready
        await pg_proxy.start()
        await wait_until(lambda: store.ready)
    finally:
        await store.close()


async def test_schema_setup_counts_against_the_write_timeout(
    pg_proxy: TcpProxy, pg_url: str, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    """A migration lock held elsewhere (a replica migrating) cannot hold an append past write_timeout."""
    database = pg_url.rsplit("/", 1)[1]
    options = PostgresOptions(connect_timeout=1.0, write_timeout=0.5, statement_timeout_ms=10_000)
    store = PostgresStore(pg_proxy.url(database), options)
    await pg_proxy.stop()
    await store.open()  # the schema is not in place yet
    try:
        with psycopg.connect(pg_url) as blocker:
            blocker.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
            await pg_proxy.start()
            started = time.monotonic()
            # Down at open, the store refuses appends until a health check reaches the database; that check
            # applies the schema within the same bound.
            assert not await store.check_health()
            assert time.monotonic() - started < 2.0
            with pytest.raises(DecisionLogUnavailable, match=r"did not finish within 0\.5 s"):
                await store.append(make_record(), deadline=Deadline.after(10))
        await wait_until(lambda: store.ready, within=10)
        assert (await store.append(make_record(), deadline=Deadline.after(10))).seq == 1
    finally:
        await store.close()


async def test_a_reader_never_creates_tables(pg_url: str) -> None:
    reader = open_store(pg_url, read_only=True)
    await reader.open()
    try:
        with pytest.raises(DecisionLogError, match="holds no trtguard decision log"):
            await reader.query(RecordQuery())
        with pytest.raises(DecisionLogError, match="holds no trtguard decision log"):
            await reader.verify()
        with pytest.raises(DecisionLogUnavailable, match="read-only"):
            await reader.append(make_plain_record(), deadline=Deadline.after(1))
    finally:
        await reader.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('trtguard_decisions')").fetchone() == (None,)


async def test_a_reader_reports_an_unreachable_server(pg_proxy: TcpProxy, pg_url: str) -> None:
    database = pg_url.rsplit("/", 1)[1]
    await pg_proxy.stop()
    reader = PostgresStore(pg_proxy.url(database), PostgresOptions(connect_timeout=1.0), read_only=True)
    with pytest.raises(DecisionLogUnavailable, match="not reachable"):
        await reader.open()
    await reader.close()


def make_plain_record() -> DecisionRecord:
    return DecisionRecord(
        uid="u", operation="CREATE", kind="Pod", api_version="v1", allowed=True, reason="Allowed"
    )


async def test_a_record_holding_any_characters_is_written_with_its_batch(
    store: PostgresStore, make_record: RecordFactory
) -> None:
    """Issue 10, item 11: a lone surrogate (a "\\ud800" escape in a request) failed the write of its whole
    batch; NUL is refused by PostgreSQL text. Every record is written, escaped, and the chain verifies."""
    odd = make_record(
        uid="odd-\ud800",
        name="n\x00me",
        namespace="\udc80",
        user="\x00",
        message="m" * 100_000,
        warnings=("\ud800",),
        violations=({"rule": "r", "message": "\x00\udfff", "size": 2**60},),
    )
    others = [make_record() for _ in range(20)]
    receipts = await asyncio.gather(
        *(store.append(r, deadline=Deadline.after(10)) for r in [*others[:10], odd, *others[10:]])
    )
    assert sorted(r.seq or 0 for r in receipts) == list(range(1, 22))
    assert store.ready
    report = await store.verify()
    assert report.ok, report.summary()
    assert report.records == 21
    [stored] = await store.query(RecordQuery(uid=storable(odd).uid))
    assert stored.record == storable(odd)
    assert stored.record.name == f"n{UNSTORABLE_MARK}\\u0000me"


async def test_each_health_check_measures_the_decisions_table(
    store: PostgresStore, pg_url: str, make_record: RecordFactory
) -> None:
    """The decision-log-capacity alert reads this through /metrics: the table with its indexes."""
    assert await store.check_health()
    empty = store.size_bytes
    assert empty is not None and empty > 0
    body = "x" * 2000
    await store.append_many([make_record(message=body) for _ in range(300)], dedupe=False)
    assert await store.check_health()
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT pg_total_relation_size('trtguard_decisions')").fetchone()
    assert row is not None
    assert store.size_bytes == row[0] > empty


async def test_a_row_an_older_replica_writes_without_its_api_group_gets_it(
    store: PostgresStore, pg_url: str, make_record: RecordFactory
) -> None:
    """During a rolling upgrade a replica of an older trtguard inserts rows without ``api_group``: the
    database derives it from the body, as the migration did, so change control's look-up by group finds
    them."""
    kinds = (
        ("batch.volcano.sh/v1alpha1", "Job", "batch.volcano.sh"),
        ("extensions/v1beta1", "Deployment", "apps"),
    )
    for api_version, kind, _ in kinds:
        await store.append(make_record(api_version=api_version, kind=kind), deadline=Deadline.after(5))
    columns = [c for c in _sql.INSERT_COLUMNS.split(", ") if c != "api_group"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(f"SELECT {', '.join(columns)} FROM trtguard_decisions ORDER BY seq").fetchall()  # noqa: S608
        for row in rows:  # as an older writer would insert them (another seq, record_id and hash)
            values = dict(zip(columns, row, strict=True))
            seq = values["seq"]
            values.update(seq=seq + 10, record_id=f"{seq:032x}", hash=f"{seq:064x}")
            marks = ", ".join(["%s"] * len(columns))
            insert = f"INSERT INTO trtguard_decisions ({', '.join(columns)}) VALUES ({marks})"  # noqa: S608
            conn.execute(insert, list(values.values()))
        derived = conn.execute(
            "SELECT api_group FROM trtguard_decisions WHERE seq > 10 ORDER BY seq"
        ).fetchall()
    assert [g for (g,) in derived] == [group for _, _, group in kinds]
