"""decisionlog/_sqlite.py against real SQLite files: chain, group commit, tampering, timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decisionlog import DecisionLogError, DecisionLogUnavailable, RecordQuery, SQLiteStore, _sql, open_store
from decisionlog import _undelivered as undelivered
from decisionlog._record import UNSTORABLE_MARK, storable
from decisionlog._schema import LATEST_VERSION
from decisionlog._sqlite import connect, migrate, write_batch
from tests.support.harness import RecordFactory, WaitUntil
from verifier.base._deadline import Deadline


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "decisions.db")
    await s.open()
    yield s
    await s.close()


async def test_appends_form_a_chain_that_verifies(store: SQLiteStore, make_record: RecordFactory) -> None:
    receipts = [await store.append(make_record(), deadline=Deadline.after(5)) for _ in range(5)]
    assert [r.seq for r in receipts] == [1, 2, 3, 4, 5]
    assert not any(r.spooled for r in receipts)
    report = await store.verify()
    assert report.ok, report.summary()
    assert report.records == 5
    assert report.head_seq == 5
    assert report.head_hash == receipts[-1].hash
    rows = await store.query(RecordQuery())
    assert [r.prev_hash for r in rows[1:]] == [r.hash for r in rows[:-1]]


async def test_concurrent_appends_are_group_committed_into_one_chain(
    store: SQLiteStore, make_record: RecordFactory
) -> None:
    records = [make_record() for _ in range(300)]
    receipts = await asyncio.gather(*(store.append(r, deadline=Deadline.after(10)) for r in records))
    assert sorted(r.seq or 0 for r in receipts) == list(range(1, 301))
    report = await store.verify()
    assert report.ok, report.summary()
    stored = {s.record.uid for s in await store.query(RecordQuery())}
    assert stored == {r.uid for r in records}


async def test_records_survive_reopening_and_the_chain_continues(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    path = tmp_path / "d.db"
    first = SQLiteStore(path)
    await first.open()
    await first.append(make_record(), deadline=Deadline.after(5))
    await first.close()
    second = SQLiteStore(path)
    await second.open()
    receipt = await second.append(make_record(), deadline=Deadline.after(5))
    await second.close()
    assert receipt.seq == 2
    assert (await second.verify()).ok
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM trtguard_schema_migrations ORDER BY version").fetchall() == [
            (v,) for v in range(1, LATEST_VERSION + 1)
        ]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_query_filters_and_tail(store: SQLiteStore, make_record: RecordFactory) -> None:
    old = datetime.now(UTC) - timedelta(days=2)
    await store.append(make_record(namespace="dev", name="a", time=old), deadline=Deadline.after(5))
    await store.append(
        make_record(namespace="prod", name="b", allowed=False, reason="PolicyViolation"),
        deadline=Deadline.after(5),
    )
    await store.append(make_record(namespace="prod", name="b", dry_run=True), deadline=Deadline.after(5))
    target = make_record(namespace="prod", name="c")
    await store.append(target, deadline=Deadline.after(5))

    assert [r.record.name for r in await store.query(RecordQuery(namespace="prod", name="b"))] == ["b", "b"]
    assert [r.seq for r in await store.query(RecordQuery(allowed=False))] == [2]
    assert [r.seq for r in await store.query(RecordQuery(dry_run=True))] == [3]
    assert [r.seq for r in await store.query(RecordQuery(uid=target.uid))] == [4]
    assert [r.seq for r in await store.query(RecordQuery(since=old + timedelta(hours=1)))] == [2, 3, 4]
    assert [r.seq for r in await store.query(RecordQuery(until=old + timedelta(hours=1)))] == [1]
    assert [r.seq for r in await store.query(RecordQuery(newest_first=True, limit=2))] == [4, 3]
    assert [r.seq for r in await store.query(RecordQuery(after_seq=2))] == [3, 4]
    assert (await store.query(RecordQuery(uid=target.uid)))[0].record == target


async def test_a_row_without_its_api_group_is_refused(store: SQLiteStore, make_record: RecordFactory) -> None:
    """What a writer of an older trtguard would insert during an upgrade: a row change control's look-up by
    API group could not find. Refused, so that writer answers deny (PostgreSQL derives it instead)."""
    await store.append(make_record(), deadline=Deadline.after(5))
    with sqlite3.connect(store.path) as conn:
        columns = ", ".join(c for c in _sql.INSERT_COLUMNS.split(", ") if c != "api_group")
        (values,) = conn.execute(f"SELECT {columns} FROM trtguard_decisions").fetchall()  # noqa: S608
        with pytest.raises(sqlite3.IntegrityError, match="needs its api_group"):
            conn.execute(
                f"INSERT INTO trtguard_decisions ({columns}) VALUES ({', '.join('?' * len(values))})",  # noqa: S608
                (2, *values[1:]),
            )


async def test_the_table_is_append_only(
    store: SQLiteStore, make_record: RecordFactory, tmp_path: Path
) -> None:
    await store.append(make_record(), deadline=Deadline.after(5))
    with sqlite3.connect(store.path) as conn:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE trtguard_decisions SET allowed = 0")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM trtguard_decisions")


def _tamper(path: Path, *statements: str) -> None:
    """What someone with write access to the file could do: drop the guards and edit rows."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER trtguard_decisions_no_update")
        conn.execute("DROP TRIGGER trtguard_decisions_no_delete")
        for statement in statements:
            conn.execute(statement)


@pytest.mark.parametrize(
    ("statement", "broken_seq", "problem"),
    [
        (
            "UPDATE trtguard_decisions SET body = replace(body, '\"allowed\":false', '\"allowed\":true') "
            "WHERE seq = 3",
            3,
            "stored hash does not match",
        ),
        ("UPDATE trtguard_decisions SET allowed = 1 WHERE seq = 3", 3, "column allowed"),
        ("UPDATE trtguard_decisions SET namespace = 'other' WHERE seq = 2", 2, "column namespace"),
        # A record moved to another API group would be found as another workload's by change control.
        ("UPDATE trtguard_decisions SET api_group = 'batch.volcano.sh' WHERE seq = 2", 2, "column api_group"),
        ("DELETE FROM trtguard_decisions WHERE seq = 2", 3, "records were removed before it"),
        ("UPDATE trtguard_decisions SET prev_hash = hash WHERE seq = 4", 4, "prev_hash does not match"),
        ("DELETE FROM trtguard_decisions WHERE seq = 5", 5, "records at the end were removed"),
        ("UPDATE trtguard_decisions SET body = '{' WHERE seq = 1", 1, "not JSON"),
    ],
)
async def test_verify_names_the_first_broken_record(
    tmp_path: Path, make_record: RecordFactory, statement: str, broken_seq: int, problem: str
) -> None:
    store = SQLiteStore(tmp_path / "d.db")
    await store.open()
    records = [make_record(allowed=(i != 3), reason="x") for i in range(1, 6)]
    for record in records:
        await store.append(record, deadline=Deadline.after(5))
    await store.close()
    _tamper(store.path, statement)
    report = await store.verify()
    assert not report.ok
    assert report.first_break is not None
    assert report.first_break.seq == broken_seq
    assert problem in report.first_break.problem
    if broken_seq < 5 and "not JSON" not in problem:
        assert report.first_break.uid == records[broken_seq - 1].uid
    assert f"seq {broken_seq}" in report.summary()


async def test_a_record_not_yet_taken_is_withdrawn_when_its_deadline_passes(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    """While another process holds the write lock, nobody waits past the deadline.

    A waiting record is withdrawn and never written; the record the writer had taken lands once the lock is
    released, followed by a record saying that its answer was not delivered (the webhook denied).
    """
    store = SQLiteStore(tmp_path / "d.db")
    await store.open()
    blocker = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(1.0, blocker.execute, args=("COMMIT",))
    release.start()
    try:
        first = make_record()
        first_task = asyncio.create_task(store.append(first, deadline=Deadline.after(0.2)))
        await asyncio.sleep(0.1)
        second = make_record()
        with pytest.raises(DecisionLogUnavailable, match="did not take the record in time"):
            await store.append(second, deadline=Deadline.after(0.2))
        with pytest.raises(DecisionLogUnavailable, match="did not confirm the record in time"):
            await first_task
    finally:
        release.join()
        blocker.close()
    third_record = make_record()
    third = await store.append(third_record, deadline=Deadline.after(5))
    await store.close()
    stored = await store.query(RecordQuery())
    assert [(s.record.uid, s.record.reason) for s in stored] == [
        (first.uid, first.reason),
        (first.uid, undelivered.REASON),
        (third_record.uid, third_record.reason),
    ]
    assert undelivered.target(stored[1].record) == first.record_id
    assert second.uid not in [s.record.uid for s in stored]
    assert third.seq == 3


async def test_a_failed_write_raises_and_marks_the_store_not_ready(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    store = SQLiteStore(tmp_path / "d.db", busy_timeout_ms=100)
    await store.open()
    assert store.ready
    blocker = sqlite3.connect(store.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(DecisionLogUnavailable, match="locked"):
            await store.append(make_record(), deadline=Deadline.after(5))
        assert not store.ready
    finally:
        blocker.execute("COMMIT")
        blocker.close()
    await store.append(make_record(), deadline=Deadline.after(5))
    assert store.ready
    await store.close()
    assert [r.seq for r in await store.query(RecordQuery())] == [1]


async def test_a_store_unready_after_a_failed_write_recovers_without_requests(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    """An unready replica gets no requests: the writer's own health check makes the store ready again."""
    store = SQLiteStore(tmp_path / "d.db", busy_timeout_ms=100, health_interval=0.1)
    await store.open()
    blocker = sqlite3.connect(store.path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(DecisionLogUnavailable, match="locked"):
            await store.append(make_record(), deadline=Deadline.after(5))
        await asyncio.sleep(0.5)
        assert not store.ready  # still locked: the health checks fail too
        blocker.execute("COMMIT")
        for _ in range(50):
            if store.ready:
                break
            await asyncio.sleep(0.05)
        assert store.ready
        assert (await store.append(make_record(), deadline=Deadline.after(5))).seq == 1
    finally:
        blocker.close()
        await store.close()


async def test_a_log_that_is_not_a_database_is_unavailable_not_a_sqlite_error(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    path.write_bytes(b"this is not an SQLite file " * 200)
    store = SQLiteStore(path, read_only=True)
    with pytest.raises(DecisionLogUnavailable, match="cannot read the decision log: file is not a database"):
        await store.query(RecordQuery())
    with pytest.raises(DecisionLogUnavailable, match="file is not a database"):
        await store.verify()


async def test_a_schema_from_a_newer_trtguard_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO trtguard_schema_migrations VALUES (99, 'future', '2030-01-01')")
    with pytest.raises(DecisionLogError, match="newer than this trtguard"):
        await SQLiteStore(path).open()


async def test_reading_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DecisionLogError, match="does not exist"):
        await SQLiteStore(tmp_path / "nope.db").verify()


def test_open_store_understands_the_url_forms(tmp_path: Path) -> None:
    relative = open_store("sqlite:///./x.db")
    assert isinstance(relative, SQLiteStore)
    assert relative.path == Path("./x.db")
    absolute = open_store(f"sqlite:///{tmp_path}/y.db")
    assert isinstance(absolute, SQLiteStore)
    assert absolute.path == tmp_path / "y.db"
    with pytest.raises(DecisionLogError, match="unsupported decision log URL") as raised:
        open_store("mysql://root:secret@db/x")
    assert "secret" not in raised.value.diagnostics()


async def test_append_before_open_is_unavailable(tmp_path: Path, make_record: RecordFactory) -> None:
    with pytest.raises(DecisionLogUnavailable, match="not open"):
        await SQLiteStore(tmp_path / "d.db").append(make_record(), deadline=Deadline.after(1))


async def test_group_commit_keeps_appends_fast(store: SQLiteStore, make_record: RecordFactory) -> None:
    """A burst of 200 appends costs a few fsyncs, not 200: well under a second on this machine."""
    started = time.perf_counter()
    await asyncio.gather(*(store.append(make_record(), deadline=Deadline.after(10)) for _ in range(200)))
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("url_option", "level", "pragma"),
    [("", "full", 2), ("?synchronous=full", "full", 2), ("?synchronous=NORMAL", "normal", 1)],
)
def test_sync_level_from_the_url(tmp_path: Path, url_option: str, level: str, pragma: int) -> None:
    store = open_store(f"sqlite:///{tmp_path}/d.db{url_option}")
    assert isinstance(store, SQLiteStore)
    assert store.synchronous == level
    conn = connect(tmp_path / "d.db", synchronous=store.synchronous)
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == pragma
    conn.close()


@pytest.mark.parametrize("url", ["sqlite:///d.db?synchronous=off", "sqlite:///d.db?journal=memory"])
def test_unknown_sqlite_options_are_refused(url: str) -> None:
    with pytest.raises(DecisionLogError, match="unsupported option"):
        open_store(url)


async def test_a_record_holding_any_characters_is_written_with_its_batch(
    store: SQLiteStore, make_record: RecordFactory
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


async def test_size_is_the_database_and_its_wal_and_grows_with_the_log(
    store: SQLiteStore, make_record: RecordFactory, wait_until: WaitUntil
) -> None:
    """The decision-log-capacity alert reads this through /metrics."""

    def on_disk() -> int:
        wal = store.path.with_name(store.path.name + "-wal")
        return store.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

    await wait_until(lambda: store.size_bytes is not None, within=5)
    empty = store.size_bytes
    assert empty is not None and empty > 0
    body = "x" * 2000
    for _ in range(200):
        await store.append(make_record(message=body), deadline=Deadline.after(5))
    await wait_until(lambda: (store.size_bytes or 0) > empty + 200 * 2000, within=10)
    # Measured after a checkpoint: nothing is written between two appends here, so the file sizes hold still.
    await wait_until(lambda: store.size_bytes == on_disk(), within=10)


async def test_the_wal_stays_bounded_under_sustained_appends(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    """Issue 31: only PASSIVE checkpoints ran, which never restart a WAL that is written all the time: it
    grew to its largest size under load and stayed there. The writer now checkpoints once the WAL is over its
    bound (the WAL then restarts and is cut back), so file + WAL stay near the pages in use."""
    limit = 512 * 1024
    store = SQLiteStore(tmp_path / "decisions.db", wal_limit_bytes=limit)
    await store.open()
    wal = store.path.with_name(store.path.name + "-wal")
    largest = 0
    body = "x" * 500
    try:

        async def appender(count: int) -> None:
            nonlocal largest
            for _ in range(count):
                await store.append(make_record(message=body), deadline=Deadline.after(30))
                largest = max(largest, wal.stat().st_size)

        # 32 appenders keep the writer busy: a batch is always waiting when one commits.
        await asyncio.gather(*(appender(100) for _ in range(32)))
        report = await store.verify()
    finally:
        await store.close()
    assert report.ok and report.records == 3200
    pages = store.path.stat().st_size
    assert pages > 3200 * 500
    # One batch (at most 32 records here) may be written past the bound before the writer checkpoints.
    assert largest <= 2 * limit, f"the WAL grew to {largest:,} bytes, bound {limit:,}"


def _images(tag: str) -> tuple[dict[str, object], ...]:
    """Image entries long enough to be kept apart in ``trtguard_shared`` (``_sql.MIN_SHARED_BYTES``)."""
    return ({"reference": f"registry.example.com/{tag}@sha256:" + "a" * 64, "signatures": [], "path": "p"},)


async def test_a_shared_part_known_stored_is_not_inserted_again_and_records_read_back_whole(
    store: SQLiteStore, make_record: RecordFactory
) -> None:
    inserts: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(lambda sql: inserts.append(sql) if "trtguard_shared" in sql else None)
    records = [make_record(images=_images(tag)) for tag in ("one", "two", "one", "two", "one")]
    for record in records:
        await store.append(record, deadline=Deadline.after(5))
    assert len(inserts) == 2  # one for each distinct part
    assert (await store.verify()).ok
    assert [s.record for s in await store.query(RecordQuery())] == [storable(r) for r in records]


def test_a_batch_that_fails_leaves_its_parts_unknown_so_the_next_one_inserts_them(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    conn = connect(tmp_path / "d.db")
    migrate(conn, where="test")
    parts = _sql.KnownParts()
    conn.execute(
        "CREATE TRIGGER fail BEFORE INSERT ON trtguard_decisions BEGIN SELECT RAISE(ABORT, 'no'); END"
    )
    with pytest.raises(sqlite3.IntegrityError, match="no"):
        write_batch(conn, [make_record(images=_images("one"))], dedupe=False, parts=parts)
    assert parts.refs == set()
    conn.execute("DROP TRIGGER fail")
    stored = write_batch(conn, [make_record(images=_images("one"))], dedupe=False, parts=parts)
    assert len(parts.refs) == 1
    assert conn.execute("SELECT ref FROM trtguard_shared").fetchall() == [(next(iter(parts.refs)),)]
    assert conn.execute("SELECT shared_ref FROM trtguard_decisions").fetchall() == [(next(iter(parts.refs)),)]
    assert stored[0].seq == 1
    conn.close()


async def test_a_backup_restored_under_the_running_writer_makes_it_insert_the_parts_again(
    store: SQLiteStore, make_record: RecordFactory, tmp_path: Path
) -> None:
    # Against the procedure (stop the webhook first), but the file must stay whole: the writer remembers
    # parts it committed, and the restored file lacks the one committed after the backup (attack 38w F1).
    await store.append(make_record(), deadline=Deadline.after(5))
    with sqlite3.connect(store.path) as live, sqlite3.connect(tmp_path / "b.db") as copy:
        live.backup(copy)
    await store.append(make_record(images=_images("one")), deadline=Deadline.after(5))
    with sqlite3.connect(tmp_path / "b.db") as copy, sqlite3.connect(store.path) as live:
        copy.backup(live)
    await store.append(make_record(images=_images("one")), deadline=Deadline.after(5))
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        missing = conn.execute(
            "SELECT seq FROM trtguard_decisions WHERE shared_ref IS NOT NULL"
            " AND shared_ref NOT IN (SELECT ref FROM trtguard_shared)"
        ).fetchall()
    assert missing == []
    assert (await store.verify()).ok


def test_the_ref_of_a_shared_part_is_its_sha256_whether_remembered_or_not() -> None:
    content = b'{"images":[' + b"x" * 300 + b"]}"
    first, again = _sql._shared_ref(content), _sql._shared_ref(bytes(bytearray(content)))
    assert first == again == hashlib.sha256(content).hexdigest()[:32]
    for n in range(_sql._REFS_MAX + 1):  # past the bound the memo starts over, still right
        assert _sql._shared_ref(b"%d" % n) == hashlib.sha256(b"%d" % n).hexdigest()[:32]
    assert len(_sql._REFS) <= _sql._REFS_MAX
