"""``verify`` takes a stored record only as the canonical JSON its hash covers: a body (or shared part)
whose values recompute the hash but whose text is other text, a duplicate key (readers differ on which value
counts), whitespace, another order of keys, escapes, is a break at its seq, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
import pytest

from decisionlog import DataSink, DecisionStore, PostgresStore, RecordQuery
from decisionlog._chain import ChainReport, Row, verify_rows
from decisionlog._record import GENESIS_HASH, INDEXED_NAMES, canonical_json, link_hash
from tests.support.harness import RecordFactory
from trtguard.cli import main
from verifier.base._deadline import Deadline

Edit = Callable[[str], str]


def _duplicate_allowed(body: str) -> str:
    """A first ``allowed`` the other way round: a first-wins reader sees it, Python's json (last wins) not."""
    value = json.loads(body)["allowed"]
    return '{"allowed":' + json.dumps(not value) + "," + body[1:]


def _spaced(body: str) -> str:
    return json.dumps(json.loads(body))


def _reversed(body: str) -> str:
    return json.dumps(dict(reversed(json.loads(body).items())), separators=(",", ":"), ensure_ascii=False)


def _escaped(body: str) -> str:
    """The same values with one letter written as a JSON escape."""
    at = body.index('"kind":"') + len('"kind":"')
    return body[:at] + f"\\u{ord(body[at]):04x}" + body[at + 1 :]


def _leading_space(body: str) -> str:
    return " " + body


EDITS = {
    "duplicate key": _duplicate_allowed,
    "whitespace": _spaced,
    "key order": _reversed,
    "escape": _escaped,
    "leading space": _leading_space,
}


def _execute(url: str, sql: str, params: tuple[object, ...]) -> None:
    """``sql`` on the log at ``url`` with its append-only guards off."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
            for name in ("decisions_no_update", "shared_no_update"):
                conn.execute(f"DROP TRIGGER IF EXISTS trtguard_{name}")
            conn.execute(sql.replace("%s", "?"), params)
        return
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("ALTER TABLE trtguard_decisions DISABLE TRIGGER USER")
        pg.execute("ALTER TABLE trtguard_shared DISABLE TRIGGER USER")
        pg.execute(sql, params)


def _fetch(url: str, sql: str, params: tuple[object, ...]) -> tuple[object, ...]:
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            row: tuple[object, ...] = conn.execute(sql.replace("%s", "?"), params).fetchone()
            return row
    with psycopg.connect(url) as pg:
        found = pg.execute(sql, params).fetchone()
        assert found is not None
        return tuple(found)


async def _four(store: DecisionStore, make_record: RecordFactory, *, small: bool) -> list[str]:
    """Four records: with images and engines kept as a shared part, or ``small`` (whole bodies)."""
    uids = []
    for _ in range(4):
        record = make_record(images=(), engines=()) if small else make_record()
        await store.append(record, deadline=Deadline.after(5))
        uids.append(record.uid)
    return uids


async def _verify(store: DecisionStore) -> tuple[ChainReport, list[int]]:
    given: list[int] = []
    report = await store.verify(lambda stored, _: given.append(stored.seq))
    return report, given


@pytest.mark.parametrize("small", [False, True], ids=["shared part", "whole body"])
@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
async def test_a_body_stored_as_other_text_than_its_canonical_json_is_a_break_at_its_seq(
    log: tuple[DecisionStore, str], make_record: RecordFactory, edit: Edit, small: bool
) -> None:
    store, url = log
    uids = await _four(store, make_record, small=small)
    body, ref = _fetch(url, "SELECT body, shared_ref FROM trtguard_decisions WHERE seq = %s", (3,))
    assert isinstance(body, str) and (ref is None) == small
    edited = edit(body)
    assert json.loads(edited) == json.loads(body) and edited != body  # the same values to Python's json
    _execute(url, "UPDATE trtguard_decisions SET body = %s WHERE seq = %s", (edited, 3))
    report, given = await _verify(store)
    brk = report.first_break
    assert brk is not None and (brk.seq, brk.uid) == (3, uids[2])
    assert "not the canonical JSON (RFC 8785) its hash covers" in brk.problem
    if edit is _duplicate_allowed:
        assert "the key 'allowed' appears twice" in brk.problem
    assert given == [1, 2]  # neither the record nor any after it is vouched for
    assert report.records == 4


async def test_a_shared_part_stored_as_other_text_is_a_break_at_the_first_record_holding_it(
    log: tuple[DecisionStore, str], make_record: RecordFactory
) -> None:
    store, url = log
    await store.append(make_record(images=(), engines=()), deadline=Deadline.after(5))
    uids = await _four(store, make_record, small=False)
    ref, content = _fetch(
        url,
        "SELECT ref, content FROM trtguard_shared WHERE ref = (SELECT shared_ref FROM"
        " trtguard_decisions WHERE seq = %s)",
        (2,),
    )
    assert isinstance(content, str)
    engines = json.dumps(json.loads(content)["engines"], separators=(",", ":"))
    edited = '{"engines":[],' + content[1:]  # a first "engines" that a first-wins reader would take
    assert json.loads(edited)["engines"] == json.loads(engines)
    _execute(url, "UPDATE trtguard_shared SET content = %s WHERE ref = %s", (edited, ref))
    report, given = await _verify(store)
    brk = report.first_break
    assert brk is not None and (brk.seq, brk.uid) == (2, uids[0])
    assert "the key 'engines' appears twice" in brk.problem
    assert given == [1]


async def test_a_key_in_both_the_body_and_its_shared_part_is_a_break(
    log: tuple[DecisionStore, str], make_record: RecordFactory
) -> None:
    """Joined, the shared part's value wins in Python's json (last); a reader of the body alone sees its."""
    store, url = log
    uids = await _four(store, make_record, small=False)
    (body,) = _fetch(url, "SELECT body FROM trtguard_decisions WHERE seq = %s", (2,))
    assert isinstance(body, str) and '"images"' not in body
    edited = canonical_json(json.loads(body) | {"images": []}).decode()  # itself canonical JSON
    _execute(url, "UPDATE trtguard_decisions SET body = %s WHERE seq = %s", (edited, 2))
    report, given = await _verify(store)
    brk = report.first_break
    assert brk is not None and (brk.seq, brk.uid) == (2, uids[1])
    assert "a key in both the body and its shared part" in brk.problem
    assert given == [1]


async def test_records_as_stores_write_them_verify_whatever_they_hold(
    log: tuple[DecisionStore, str], make_record: RecordFactory
) -> None:
    """Text beyond ASCII, floats, escapes RFC 8785 writes, whole bodies and shared parts: all canonical."""
    store, _ = log
    records = [
        make_record(reason='héllo ✓ \U0001f600 "quoted" back\\slash \x01 tab\t'),
        make_record(violations=({"rule": "r", "score": 1e-07},), images=(), engines=()),
        make_record(violations=({"rule": "r", "score": 2.5, "note": "ünïcode"},)),
        make_record(images=(), engines=()),
        make_record(),
    ]
    for record in records:
        await store.append(record, deadline=Deadline.after(5))
    report, given = await _verify(store)
    assert report.ok, report.summary()
    assert given == [1, 2, 3, 4, 5]
    stored = await store.query(RecordQuery())
    assert [s.record for s in stored] == records


async def test_a_break_in_the_links_at_or_before_a_non_canonical_body_is_the_one_named(
    log: tuple[DecisionStore, str], make_record: RecordFactory
) -> None:
    """The links' account of an edit says more: a body rehashed after the fact and stored with whitespace
    is named as changed after the next record was written, as before."""
    store, url = log
    uids = await _four(store, make_record, small=True)
    body, prev = _fetch(url, "SELECT body, prev_hash FROM trtguard_decisions WHERE seq = %s", (2,))
    assert isinstance(body, str) and isinstance(prev, str)
    data = json.loads(body)
    data["allowed"] = not data["allowed"]
    rehashed = link_hash(prev, canonical_json(data))
    _execute(
        url,
        "UPDATE trtguard_decisions SET body = %s, hash = %s, allowed = %s WHERE seq = %s",
        (json.dumps(data), rehashed, data["allowed"], 2),
    )
    report, _ = await _verify(store)
    brk = report.first_break
    assert brk is not None and (brk.seq, brk.uid) == (2, uids[1])
    assert "changed after seq 3 was written" in brk.problem


async def test_audit_verify_names_the_seq_of_a_duplicate_key(
    log: tuple[DecisionStore, str], make_record: RecordFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    store, url = log
    await _four(store, make_record, small=False)
    (body,) = _fetch(url, "SELECT body FROM trtguard_decisions WHERE seq = %s", (4,))
    assert isinstance(body, str)
    _execute(url, "UPDATE trtguard_decisions SET body = %s WHERE seq = %s", (_duplicate_allowed(body), 4))
    if isinstance(store, PostgresStore):
        await store.close()  # the CLI opens its own connection
    assert await asyncio.to_thread(main, ["audit", "verify", "--decision-log", url]) == 1
    out = capsys.readouterr().out
    assert "chain broken at record seq 4" in out
    assert "the key 'allowed' appears twice" in out


def test_rows_read_without_a_store_are_checked_alike(make_record: RecordFactory) -> None:
    """verify_rows itself: whole bodies, the second with a duplicate key whose hash recomputes."""
    rows, prev = [], GENESIS_HASH
    for seq in (1, 2):
        data = make_record().to_json()
        body = canonical_json(data)
        digest = link_hash(prev, body)
        text = body.decode() if seq == 1 else _duplicate_allowed(body.decode())
        rows.append(Row(seq, text, prev, digest, {name: data[name] for name in INDEXED_NAMES}))
        prev = digest
    report = verify_rows(rows[:1], head_seq=1, head_hash=rows[0].hash)
    assert report.ok, report.summary()
    report = verify_rows(rows, head_seq=2, head_hash=prev)
    assert report.first_break is not None and report.first_break.seq == 2
    assert "the key 'allowed' appears twice" in report.summary()


class _Data(DataSink):
    def __init__(self, wants_records: bool) -> None:
        self.wants_records = wants_records
        self.taken: list[tuple[int, str, str, dict[str, Any], bytes]] = []

    def take(self, seq: int, prev_hash: str, hash_: str, data: Mapping[str, Any], canonical: bytes) -> None:
        self.taken.append((seq, prev_hash, hash_, dict(data), canonical))


DAMAGE: dict[str, Callable[[dict[str, Any]], None]] = {
    "none": lambda data: None,
    "a flag not a boolean": lambda data: data.update(allowed="yes"),
    "a text not a string": lambda data: data.update(kind=5),
    "a list of objects holding text": lambda data: data.update(engines=["x"]),
    "an unknown key": lambda data: data.update(extra=1),
    "a time of another form": lambda data: data.update(time="2026-01-01T00:00:00+00:00"),
    "a time that is none": lambda data: data.update(time="2026-13-01T00:00:00.000000Z"),
    "an integer as text": lambda data: data.update(latency_us="7"),
    "format 1 with groups": lambda data: data.pop("format"),
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
async def test_a_data_sink_gets_the_same_records_and_errors_with_or_without_records_built(
    log: tuple[DecisionStore, str], make_record: RecordFactory, damage: Callable[[dict[str, Any]], None]
) -> None:
    """The chain check for a DataSink that wants no records checks types alone: the same report, the same
    records handed on (as their JSON), as when it builds them, and as a plain sink gets them."""
    store, url = log
    await _four(store, make_record, small=True)
    body, prev = _fetch(url, "SELECT body, prev_hash FROM trtguard_decisions WHERE seq = %s", (4,))
    assert isinstance(body, str) and isinstance(prev, str)
    data = json.loads(body)
    damage(data)
    canonical = canonical_json(data)
    digest = link_hash(prev, canonical)
    _execute(
        url,
        "UPDATE trtguard_decisions SET body = %s, hash = %s WHERE seq = %s",
        (canonical.decode(), digest, 4),
    )
    _execute(url, "UPDATE trtguard_chain_head SET hash = %s WHERE id = %s", (digest, 1))
    plain: list[tuple[int, str, str, dict[str, Any], bytes]] = []
    expected = await store.verify(
        lambda s, c: plain.append((s.seq, s.prev_hash, s.hash, s.record.to_json(), c))
    )
    assert expected.ok == (damage is DAMAGE["none"])  # the time: another than its column's
    for wants_records in (True, False):
        sink = _Data(wants_records)
        report = await store.verify(sink)
        assert report == expected
        assert len(sink.taken) == len(plain)
        for (seq, prev_hash, hash_, got, canon), want in zip(sink.taken, plain, strict=True):
            assert (seq, prev_hash, hash_, canon) == want[:3] + want[4:]
            assert got == want[3]
