"""Logs of earlier schemas are migrated in place: version 1's whole-body records and new ones verify as one;
a rotated version-3 log (carried state keyed without the API group) gets its state rebuilt by API group; a
version-7 log loses an index on SQLite (PostgreSQL keeps it), reads as before, and its migration queues no
writer and stops no reader."""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from decisionlog import (
    GENESIS_HASH,
    DecisionLogError,
    PostgresOptions,
    PostgresStore,
    RecordQuery,
    SQLiteStore,
    open_store,
)
from decisionlog._record import INDEXED_NAMES, canonical_json, link_hash
from decisionlog._schema import CREATE_MIGRATIONS_TABLE, LATEST_VERSION, MIGRATIONS
from policies.identity import WorkloadIdentity
from tests.support.harness import RecordFactory
from trtguard.cli import main
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable
from webhook._admission_history import DecisionLogHistory


def _version_1_log(path: Path, make_record: RecordFactory) -> list[str]:
    """A log as trtguard wrote it before schema version 2: whole bodies, no shared parts."""
    uids = []
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE trtguard_schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL,"
            " applied_at TEXT NOT NULL)"
        )
        for statement in MIGRATIONS[0].statements("sqlite"):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO trtguard_schema_migrations VALUES (1, 'v1', ?)", (datetime.now(UTC).isoformat(),)
        )
        prev = GENESIS_HASH
        for seq in (1, 2, 3):
            data = make_record().to_json()
            body = canonical_json(data)
            digest = link_hash(prev, body)
            columns = ", ".join(("seq", *INDEXED_NAMES, "body", "prev_hash", "hash"))
            marks = ", ".join("?" * (len(INDEXED_NAMES) + 4))
            conn.execute(
                f"INSERT INTO trtguard_decisions ({columns}) VALUES ({marks})",  # noqa: S608
                (seq, *(data[n] for n in INDEXED_NAMES), body.decode(), prev, digest),
            )
            conn.execute("UPDATE trtguard_chain_head SET seq = ?, hash = ?", (seq, digest))
            prev = digest
            uids.append(data["uid"])
    return uids


async def test_a_version_1_log_is_migrated_and_continues(tmp_path: Path, make_record: RecordFactory) -> None:
    path = tmp_path / "decisions.db"
    old = _version_1_log(path, make_record)
    store = SQLiteStore(path)
    await store.open()
    try:
        new = make_record()
        await store.append(new, deadline=Deadline.after(5))
    finally:
        await store.close()
    report = await store.verify()
    assert report.ok and report.records == 4, report.summary()
    stored = await store.query(RecordQuery())
    assert [s.record.uid for s in stored] == [*old, new.uid]
    assert stored[-1].record == new
    with contextlib.closing(sqlite3.connect(path)) as conn:
        versions = conn.execute("SELECT version FROM trtguard_schema_migrations ORDER BY version").fetchall()
        refs = conn.execute("SELECT shared_ref IS NOT NULL FROM trtguard_decisions ORDER BY seq").fetchall()
    assert versions == [(v,) for v in range(1, LATEST_VERSION + 1)]
    assert refs == [(0,), (0,), (0,), (1,)]  # old rows keep their whole body; new ones share images/engines


# --- schema 3 (carried state keyed without the API group) to schema 4 ---------------------------------

SCHEMA_3 = Path(__file__).resolve().parents[1] / "data" / "770-schema-3-rotated-log"
BATCH = WorkloadIdentity("batch", "Job", "prod", "train")
VOLCANO = WorkloadIdentity("batch.volcano.sh", "Job", "prod", "train")
BATCH_ENGINE = "registry.example.com/models/train@sha256:" + "a1" * 32
VOLCANO_ENGINE = "registry.example.com/models/train-volcano@sha256:" + "b2" * 32


def _cli(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def _schema_3_into_postgres(source: Path, pg_url: str) -> None:
    """The fixture's rows as a PostgreSQL log of schema 3 holds them: its tables made by migrations 1 to 3,
    every row copied (chain, checkpoints, carried state)."""
    with contextlib.closing(sqlite3.connect(source)) as lite, psycopg.connect(pg_url, autocommit=True) as pg:
        pg.execute(CREATE_MIGRATIONS_TABLE)
        for migration in MIGRATIONS[:3]:
            for statement in migration.statements("postgresql"):
                pg.execute(statement)
            pg.execute(
                "INSERT INTO trtguard_schema_migrations VALUES (%s, %s, %s)",
                (migration.version, migration.description, datetime.now(UTC).isoformat()),
            )
        for table, order in (
            ("trtguard_shared", "ref"),
            ("trtguard_decisions", "seq"),
            ("trtguard_checkpoints", "last_seq"),
            ("trtguard_carried", "through_seq"),
            ("trtguard_carried_checkpoints", "last_seq"),
        ):
            cursor = lite.execute(f"SELECT * FROM {table} ORDER BY {order}")  # noqa: S608 - fixed names
            names = [d[0] for d in cursor.description]
            for row in cursor.fetchall():
                flags = ("allowed", "dry_run", "pruned")
                values = [bool(v) if n in flags else v for n, v in zip(names, row, strict=True)]
                marks = ", ".join(["%s"] * len(names))
                pg.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values)  # noqa: S608
        seq, hash_ = lite.execute("SELECT seq, hash FROM trtguard_chain_head").fetchone()
        pg.execute("UPDATE trtguard_chain_head SET seq = %s, hash = %s", (seq, hash_))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def schema_3_log(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """The log trtguard 1a4e483 wrote and rotated (tests/data/770-…), as a URL, and its folder (a copy)."""
    folder = tmp_path / "log"
    shutil.copytree(SCHEMA_3, folder)
    if request.param == "sqlite":
        return f"sqlite:///{folder / 'decisions.db'}", folder
    pg_url: str = request.getfixturevalue("pg_url")
    _schema_3_into_postgres(folder / "decisions.db", pg_url)
    return pg_url, folder


async def _lookups(url: str, policy: str = "change-control") -> dict[WorkloadIdentity, list[str] | str]:
    """What change control reads of each Job ``train`` for ``policy`` (the engines, or why it cannot tell),
    opened as `serve` opens the log (migrated), and its live record."""
    store = open_store(url)
    await store.open()
    try:
        [live] = await store.query(RecordQuery(group="batch", kind="Job", namespace="prod", name="train"))
        assert live.seq == 5 and live.record.api_group == "batch"  # the column was filled in from the body
        found: dict[WorkloadIdentity, list[str] | str] = {}
        for workload in (BATCH, VOLCANO):
            try:
                engines = await DecisionLogHistory(store).last_engines(workload, Deadline.after(10), policy)
                found[workload] = [e.reference for e in engines]
            except EvidenceUnavailable as error:
                assert not error.transient
                found[workload] = f"{error.message} ({error.hint})"
        return found
    finally:
        await store.close()


def test_a_rotated_schema_3_log_is_upgraded_and_its_carried_state_rebuilt_by_api_group(
    schema_3_log: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under schema 3 the Volcano Job's admission was carried as the batch/v1 Job's last one (one entry for
    prod/Job/train). The upgrade drops that state; until `audit seal --archive` rebuilds it by API group,
    change control says what ran is unknown (never the other workload's engine); after, each Job has its
    own."""
    url, folder = schema_3_log
    monkeypatch.setenv("TRTGUARD_PASSWORD", "schema 3")
    # Readers never migrate: they refuse the old schema rather than read it without the API group.
    status, _, err = _cli("audit", "history", "prod/Job/train", "--decision-log", url)
    assert status == 1 and "schema (version 3) is older than this trtguard's" in err, err
    before = asyncio.run(_lookups(url))
    for workload in (BATCH, VOLCANO):
        unknown = before[workload]
        assert isinstance(unknown, str) and "is not known" in unknown and "audit seal --archive" in unknown
    status, out, _ = _cli("audit", "verify", "--decision-log", url, "--key", folder / "checkpoint.pub")
    assert status == 1 and "without carrying" in out
    status, _, err = _cli(
        "audit", "seal", "--decision-log", url, "--key", folder / "checkpoint.key", "--archive",
        folder / "archive",
    )  # fmt: skip
    assert status == 0, err
    assert asyncio.run(_lookups(url)) == {BATCH: [BATCH_ENGINE], VOLCANO: [VOLCANO_ENGINE]}
    # Its records name no confirming policies (written before they did): they count for every policy, as
    # the trtguard that wrote them read them, so that no workload loses its baseline on the upgrade.
    assert asyncio.run(_lookups(url, "any-other-policy")) == asyncio.run(_lookups(url))
    status, out, _ = _cli("audit", "verify", "--decision-log", url, "--key", folder / "checkpoint.pub")
    assert status == 0, out
    # The archives sealed under schema 3 (checkpoints v2, the earlier carried state in them) still verify.
    for segment in sorted((folder / "archive").glob("*.jsonl.gz")):
        status, out, _ = _cli("audit", "verify", "--archive", segment, "--key", folder / "checkpoint.pub")
        assert status == 0, out
    status, _, err = _cli("audit", "history", "prod/train", "--decision-log", url)
    assert status == 2 and "prod/train names 2 workloads" in err and "prod/Job.batch/train" in err
    status, out, _ = _cli("audit", "history", "prod/Job.batch.volcano.sh/train", "--decision-log", url)
    assert status == 0 and VOLCANO_ENGINE in out and BATCH_ENGINE not in out


def test_audit_seal_of_the_new_version_upgrades_the_log_before_the_webhook_does(
    schema_3_log: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upgrade out of band (docs/decision-log-storage.md, "Upgrading"): `audit seal --archive` migrates
    the log (SQLite and PostgreSQL alike) and rebuilds the carried state, so the webhook starts on a log
    that needs neither."""
    url, folder = schema_3_log
    monkeypatch.setenv("TRTGUARD_PASSWORD", "schema 3")
    status, _, err = _cli(
        "audit", "seal", "--decision-log", url, "--key", folder / "checkpoint.key", "--archive",
        folder / "archive",
    )  # fmt: skip
    assert status == 0, err
    status, out, _ = _cli("audit", "verify", "--decision-log", url, "--key", folder / "checkpoint.pub")
    assert status == 0, out
    assert asyncio.run(_lookups(url)) == {BATCH: [BATCH_ENGINE], VOLCANO: [VOLCANO_ENGINE]}


# --- schema 7 to schema 8 (SQLite drops the index by namespace, name and seq) -------------------------------


def _indexes(url: str) -> set[str]:
    """The indexes made on trtguard_decisions (not those of its UNIQUE and PRIMARY KEY columns)."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
            names = {name for (name,) in rows}
    else:
        with psycopg.connect(url) as pg:
            made = (
                "SELECT indexname FROM pg_indexes WHERE indexname NOT IN (SELECT conname FROM pg_constraint)"
            )
            names = {name for (name,) in pg.execute(made)}
    return {name for name in names if name.startswith("trtguard_decisions_")}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_log(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a log not made yet, on SQLite or PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'decisions.db'}"
    pg_url: str = request.getfixturevalue("pg_url")
    return pg_url


@contextlib.contextmanager
def _schema_7(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This trtguard as it was at schema 7 (the migrations cut back to 7): what an older replica runs."""
    with monkeypatch.context() as old:
        old.setattr("decisionlog._schema.MIGRATIONS", MIGRATIONS[:7])
        old.setattr("decisionlog._schema.LATEST_VERSION", 7)
        yield


async def test_a_schema_7_log_loses_the_index_no_reader_needs_and_reads_as_before(
    empty_log: str, make_record: RecordFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log this writer wrote at schema 7 is migrated by `serve`: on SQLite the index on namespace, name and
    seq goes (PostgreSQL keeps it: dropping it would lock the table); each workload's records come back as
    before, in seq order, and the chain verifies with the records appended after."""
    queries = [
        RecordQuery(namespace="prod", name="llm-1"),
        RecordQuery(namespace="prod", name="llm-1", newest_first=True, limit=2),
        RecordQuery(namespace="prod", name="llm-2", kind="Deployment", group="apps", dry_run=False),
        RecordQuery(namespace="prod"),
    ]
    with _schema_7(monkeypatch):
        store = open_store(empty_log)
        await store.open()
        try:
            for n in range(12):
                await store.append(make_record(name=f"llm-{1 + n % 3}"), deadline=Deadline.after(5))
            before = [[s.seq for s in await store.query(query)] for query in queries]
        finally:
            await store.close()
        assert "trtguard_decisions_workload" in _indexes(empty_log)
    store = open_store(empty_log)
    await store.open()
    try:
        await store.append(make_record(name="llm-1"), deadline=Deadline.after(5))
        after = [[s.seq for s in await store.query(query)] for query in queries]
        report = await store.verify()
    finally:
        await store.close()
    kept = set() if empty_log.startswith("sqlite:///") else {"trtguard_decisions_workload"}
    assert _indexes(empty_log) == {
        "trtguard_decisions_uid",
        "trtguard_decisions_time",
        "trtguard_decisions_workload_time",
        *kept,
    }
    assert before[0] == [1, 4, 7, 10]
    assert after == [[*before[0], 13], [13, before[0][-1]], before[2], [*before[3], 13]]
    assert report.ok and report.records == 13, report.summary()
    assert LATEST_VERSION == 8


#: Waits on a lock give up after 1 s: far longer than any statement here takes, far shorter than a reader's
#: transaction that never ends while the test runs.
_LOCK_TIMEOUT: PostgresOptions = PostgresOptions(statement_timeout_ms=1000)


@pytest.mark.postgres
@pytest.mark.parametrize("reading", [True, False], ids=["beside-a-reader", "alone"])
async def test_the_postgresql_migration_to_8_waits_for_no_reader_and_queues_no_writer(
    pg_url: str, make_record: RecordFactory, monkeypatch: pytest.MonkeyPatch, reading: bool
) -> None:
    """Attack 37a F1: a replica of schema 8 migrates a schema-7 log that another connection is reading (an
    `audit verify` holds the table in one REPEATABLE READ transaction) while an older replica keeps writing.
    A lock the migration needed on trtguard_decisions would wait for the reader (until this lock timeout, and
    every INSERT of every replica would queue behind it) or, granted, hold the older replica's INSERT until
    the migration commits. Neither may happen: the migration commits, and the older replica's append made
    while the migration's transaction is open (its statements run, not committed yet) commits too."""
    with _schema_7(monkeypatch):
        older = PostgresStore(pg_url, _LOCK_TIMEOUT)
        await older.open()
    reader = psycopg.connect(pg_url)
    try:
        for _ in range(3):
            await older.append(make_record(), deadline=Deadline.after(10))
        if reading:
            reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            assert reader.execute("SELECT count(*) FROM trtguard_decisions").fetchone() == (3,)
        during: list[object] = []
        check_head = PostgresStore._check_head

        async def append_midway(store: PostgresStore, conn: psycopg.AsyncConnection[object]) -> None:
            # The migrating store's transaction has run every step; the head is checked, then it commits.
            try:
                during.append(await older.append(make_record(), deadline=Deadline.after(10)))
            except DecisionLogError as error:
                during.append(error)
            await check_head(store, conn)

        newer = PostgresStore(pg_url, _LOCK_TIMEOUT)
        with monkeypatch.context() as hooked:
            hooked.setattr(PostgresStore, "_check_head", append_midway)
            await newer.open()
        try:
            await newer.append(make_record(), deadline=Deadline.after(10))
            report = await newer.verify()
        finally:
            await newer.close()
        if reading:  # it read its snapshot all along
            assert reader.execute("SELECT count(*) FROM trtguard_decisions").fetchone() == (3,)
    finally:
        reader.close()
        await older.close()
    assert len(during) == 1 and not isinstance(during[0], DecisionLogError), during
    assert report.ok and report.records == 5, report.summary()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT max(version) FROM trtguard_schema_migrations").fetchone() == (8,)
    assert "trtguard_decisions_workload" in _indexes(pg_url)


async def test_the_sqlite_migration_to_8_goes_past_an_open_reader(
    tmp_path: Path, make_record: RecordFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite drops the index in the migration's transaction: in WAL mode a reader on another connection,
    mid-transaction and reading by that very index, neither stops the migration nor is stopped by it: it
    reads its snapshot on, and the log as migrated once its transaction ends."""
    path = tmp_path / "decisions.db"
    with _schema_7(monkeypatch):
        store = SQLiteStore(path)
        await store.open()
        try:
            for n in range(6):
                await store.append(make_record(name=f"llm-{1 + n % 2}"), deadline=Deadline.after(5))
        finally:
            await store.close()
    workload = "SELECT seq FROM trtguard_decisions WHERE namespace = 'prod' AND name = 'llm-1' ORDER BY seq"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as reader:
        reader.execute("BEGIN")
        plan = " ".join(str(row) for row in reader.execute(f"EXPLAIN QUERY PLAN {workload}"))
        assert "trtguard_decisions_workload " in plan, plan  # the index the migration drops
        assert reader.execute(workload).fetchall() == [(1,), (3,), (5,)]
        store = SQLiteStore(path)
        await store.open()
        try:
            await store.append(make_record(name="llm-1"), deadline=Deadline.after(5))
            assert reader.execute(workload).fetchall() == [(1,), (3,), (5,)]  # its snapshot, index and all
            reader.execute("COMMIT")
            assert reader.execute(workload).fetchall() == [(1,), (3,), (5,), (7,)]
            report = await store.verify()
        finally:
            await store.close()
    assert report.ok and report.records == 7, report.summary()
    assert "trtguard_decisions_workload" not in _indexes(f"sqlite:///{path}")
