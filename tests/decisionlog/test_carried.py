"""decisionlog/_carried.py: what rotation carries forward of pruned records (SQLite and PostgreSQL).

Change control's answer ("the engines of the workload's last admission", ``DecisionLogHistory``) must be the
same whether or not the records behind it were sealed, archived and pruned, and across a restart; the
carried state is signed with the checkpoints, checked by ``audit verify`` and refused by seal and prune when
it was edited.
"""

from __future__ import annotations

import dataclasses
import gzip
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decisionlog import DecisionLogError, DecisionRecord, DecisionStore, PostgresStore, SQLiteStore
from decisionlog import _checkpoints as checkpoints
from decisionlog import _undelivered as undelivered
from decisionlog._archive import archive_segments, verify_segment
from decisionlog._carried import KEPT, CarriedState
from decisionlog._record import canonical_json
from decisionlog._segments import Ledger, carried_problems
from policies.identity import WorkloadIdentity
from policies.results import AdmittedEngine, AdmittingDecision
from tests.support.harness import RecordFactory
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable
from verifier.crypto._keys import PrivateKey
from webhook._admission_history import DecisionLogHistory

ENGINE = "registry.corp/engines/llm@sha256:"
START = datetime(2026, 3, 1, tzinfo=UTC)


#: The ONNX model the engines here are builds of (digits 1-3; 4-6 are builds of :data:`OTHER_MODEL` where
#: a test gives models at all).
MODEL, OTHER_MODEL = "a" * 64, "b" * 64


def engine(
    digit: str, name: str = "engine", confirmed_by: list[str] | None = None, model: str | None = None
) -> dict[str, Any]:
    """An engine as the webhook records it; ``confirmed_by`` None: as a record written before it was kept
    (and ``model`` None: before models were)."""
    reference = ENGINE + digit * 64
    return {
        "reference": reference,
        "digest": reference.split("@")[1],
        "path": "spec.x",
        "name": name,
        "containers": ["server"],
        **({"confirmed_by": confirmed_by} if confirmed_by is not None else {}),
        **({"model": model} if model is not None else {}),
    }


def model_of(digit: str) -> str:
    return MODEL if digit in "123" else OTHER_MODEL


def admission(
    make_record: RecordFactory, name: str, digit: str, minute: int, **fields: Any
) -> DecisionRecord:
    return make_record(name=name, engines=(engine(digit),), time=START + timedelta(minutes=minute), **fields)


async def append(store: DecisionStore, *records: DecisionRecord) -> None:
    for record in records:
        await store.append(record, deadline=Deadline.after(5))


def rotate(url: str, key: PrivateKey, folder: Path) -> None:
    """`audit rotate` with segments of one record and nothing kept: every sealed record is pruned."""
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=1, partial=False)
        archive_segments(ledger, folder)
        ledger.prune(folder, keep_records=0, keep_since=None)


async def last(
    store: DecisionStore,
    name: str,
    kind: str = "Deployment",
    group: str = "apps",
    policy: str | None = "change-control",
) -> tuple[AdmittedEngine, ...]:
    workload = WorkloadIdentity(group, kind, "prod", name)
    return await DecisionLogHistory(store).last_engines(workload, Deadline.after(10), policy)


async def test_the_last_admission_survives_seal_archive_prune_and_restart(
    log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = log
    first = admission(make_record, "resnet", "1", 0, operation="CREATE")
    await append(
        store,
        first,
        admission(make_record, "bert", "2", 1),
        *(make_record(name="resnet", engines=(), time=START + timedelta(minutes=2 + i)) for i in range(3)),
        admission(make_record, "resnet", "3", 9, dry_run=True),  # a dry run admits nothing
        admission(make_record, "resnet", "4", 10, allowed=False, reason="PolicyViolation"),
    )
    rotate(url, key, tmp_path / "archive")
    assert (await store.verify()).base_seq == 7  # every record was pruned
    expected = (
        AdmittedEngine(ENGINE + "1" * 64, "engine", ("server",), AdmittingDecision(first.record_id, 1)),
    )
    assert await last(store, "resnet") == expected
    assert await last(store, "resnet", kind="StatefulSet") == ()
    # A new webhook process on the same log: the state is in the store, not in memory.
    reopened: DecisionStore = (
        SQLiteStore(Path(url.removeprefix("sqlite:///"))) if url.startswith("sqlite") else PostgresStore(url)
    )
    await reopened.open()
    try:
        assert await last(reopened, "resnet") == expected
    finally:
        await reopened.close()
    # The checkpoints sign the state; the archive holds it; audit verify finds nothing wrong.
    with Ledger.open(url, read_only=True) as ledger:
        segments = ledger.segments()
        assert all(s.checkpoint.carried_hash is not None for s in segments)
        assert segments[0].checkpoint.statement()["type"] == checkpoints.CHECKPOINT_TYPE
        assert carried_problems(ledger, 7) == []
    for segment in segments:
        assert segment.archive is not None
        report, check = verify_segment(tmp_path / "archive" / segment.archive, key=key.public_key())
        assert report.ok and check.signature_ok and check.carried_ok


async def test_an_undelivered_record_after_rotation_takes_a_carried_admission_back(
    log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    """The allow was pruned; the record saying its answer never arrived comes later, in the live log."""
    store, url = log
    delivered = admission(make_record, "resnet", "1", 0)
    late = admission(make_record, "resnet", "2", 1)
    await append(store, delivered, late)
    rotate(url, key, tmp_path / "archive")
    await append(store, undelivered.undelivered(late))
    assert [e.reference for e in await last(store, "resnet")] == [ENGINE + "1" * 64]
    # Rotated again: the state itself now drops it.
    rotate(url, key, tmp_path / "archive")
    await append(store, make_record(name="other"))
    rotate(url, key, tmp_path / "archive")
    assert [e.reference for e in await last(store, "resnet")] == [ENGINE + "1" * 64]


def test_the_state_keeps_the_newest_admissions_and_says_when_older_ones_were_dropped(
    make_record: RecordFactory,
) -> None:
    state = CarriedState()
    records = [admission(make_record, "w", str(i), i) for i in range(1, 5)]
    for seq, record in enumerate(records, start=1):
        state.fold(seq, record)
    [workload] = list(state)
    assert [a.record_id for a in workload.admissions] == [r.record_id for r in records[::-1][:KEPT]]
    assert workload.older
    for seq, record in enumerate(records[::-1][:KEPT], start=10):
        state.fold(seq, undelivered.undelivered(record))
    [workload] = list(state)
    assert workload.admissions == () and workload.older  # what ran is unknown now, and said so
    # A spool-shipped allow decided before the ones kept is not the newest, whatever its seq.
    fresh = CarriedState()
    fresh.fold(1, admission(make_record, "w", "1", 10))
    fresh.fold(2, admission(make_record, "w", "2", 0))
    [workload] = list(fresh)
    assert [a.seq for a in workload.admissions] == [1, 2]


async def test_a_policys_last_admission_is_carried_however_many_it_did_not_confirm_came_after(
    log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    """Attack F3 after rotation: the workload left the policy's scope for several admissions (nothing the
    policy confirmed); its baseline for the policy is still the admission it confirmed, not the newest."""
    store, url = log

    def scoped(digit: str, minute: int, *confirmed: str) -> DecisionRecord:
        engines = (engine(digit, confirmed_by=list(confirmed), model=MODEL),)
        return make_record(name="resnet", engines=engines, time=START + timedelta(minutes=minute))

    approved = scoped("1", 0, "release", "base")
    outside = [scoped(str(d), d, "base") for d in range(2, 6)]  # only the namespace-wide policy applied
    await append(store, approved, *outside)
    rotate(url, key, tmp_path / "archive")
    release = await last(store, "resnet", policy="release")
    assert [(e.reference, e.admitted_by) for e in release] == [
        (ENGINE + "1" * 64, AdmittingDecision(approved.record_id, 1))
    ]
    assert [e.reference for e in await last(store, "resnet", policy="base")] == [ENGINE + "5" * 64]
    assert await last(store, "resnet", policy="renamed") == ()  # a new name has no history
    # Both kept admissions of `base` taken back: what it let run before is no longer known, and said so;
    # `release` still knows its own.
    await append(store, *(undelivered.undelivered(r) for r in outside[-KEPT:]))
    for unknown in ("base", None):  # None: what ran last, whatever confirmed it, is not known either
        with pytest.raises(EvidenceUnavailable, match="last ran is not known"):
            await last(store, "resnet", policy=unknown)
    assert [e.reference for e in await last(store, "resnet", policy="release")] == [ENGINE + "1" * 64]


def test_a_state_of_records_without_confirmations_is_the_one_signed_before_they_existed(
    make_record: RecordFactory,
) -> None:
    """Records written before engines named the policies that confirmed them fold as they always did (the
    two newest, ``older``, no new keys), so the checkpoints signed over them still verify; with them, an
    engine confirmed by a policy keeps its own admission."""
    legacy = CarriedState()
    records = [admission(make_record, "w", str(i), i) for i in range(1, 5)]
    for seq, record in enumerate(records, start=1):
        legacy.fold(seq, record)
    [entry] = legacy.to_json()
    assert set(entry) == {"namespace", "group", "kind", "name", "admissions", "older"} and entry["older"]
    assert [a["seq"] for a in entry["admissions"]] == [4, 3]
    assert all(
        set(e) == {"reference", "name", "containers"} for a in entry["admissions"] for e in a["engines"]
    )
    # The same records, then admissions a policy confirmed nothing in: the legacy ones count for every
    # policy (as they did when written), so the two newest of them stay beside the newer ones.
    for seq, digit in enumerate("567", start=5):
        legacy.fold(seq, make_record(name="w", engines=(engine(digit, confirmed_by=[]),)))
    [entry] = legacy.to_json()
    assert [a["seq"] for a in entry["admissions"]] == [7, 6, 4, 3]


async def test_a_lost_state_is_unavailable_evidence_not_a_first_engine(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = sqlite_log
    records = [admission(make_record, "resnet", str(i), i) for i in range(1, 4)]
    await append(store, *records)
    rotate(url, key, tmp_path / "archive")
    await append(store, *(undelivered.undelivered(r) for r in records[1:]))
    with pytest.raises(EvidenceUnavailable, match="last ran is not known") as raised:
        await last(store, "resnet")
    assert not raised.value.transient


# --- rotation changes no answer: differential, over generated histories ------------------------------

#: The workloads of the generated histories: two names, and under the first a Deployment of another API
#: group too (a custom kind of the same name: another workload, whose admissions must never answer for
#: apps's), and the same Deployment written in another version of its group (the same workload).
_WORKLOADS: dict[str, tuple[str, str, str]] = {
    "a": ("a", "Deployment", "apps/v1"),
    "b": ("b", "Deployment", "apps/v1"),
    "a-other-group": ("a", "Deployment", "serving.example.com/v1"),
    "a-v1beta2": ("a", "Deployment", "apps/v1beta2"),
}


def _bucket(workload: str) -> tuple[str, str, str]:
    """The identity a generated workload is: (name, kind, API group)."""
    name, kind, api_version = _WORKLOADS[workload]
    return name, kind, api_version.rpartition("/")[0]


#: Which change-control policies confirmed an admission's engine: none (the workload left the policies'
#: scope, or they let it in despite their change control), p, q, both, or not recorded (a record written
#: before confirmations were: it counts for every policy).
_CONFIRMED: list[list[str] | None] = [[], ["p"], ["q"], ["p", "q"], None]
#: The policies asked about: r is named by no record (only records without confirmations count for it); None
#: asks for the last admission whatever confirmed it (change control compares with it too).
_POLICIES = ("p", "q", "r", None)

_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["allow", "allow", "deny", "dry-run", "no-engine", "undelivered", "rotate"]),
        st.sampled_from(sorted(_WORKLOADS)),
        st.integers(min_value=-3, max_value=3),  # minutes off the arrival order: spool-shipped records
        st.sampled_from("123456"),
        st.sampled_from(range(len(_CONFIRMED))),
    ),
    min_size=1,
    max_size=18,
)


def _confirms(record: DecisionRecord, policy: str | None) -> bool:
    """Whether ``policy`` confirmed the record's engine (a record without confirmations: every policy)."""
    confirmed = record.engines[0].get("confirmed_by")
    return policy is None or confirmed is None or policy in confirmed


#: One workload, admitted again and again under policies that apply to some admissions only, some answers
#: taken back: what the carried state keeps of each policy, and what it says when it cannot tell.
_ONE_WORKLOAD_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["allow", "allow", "allow", "undelivered", "rotate"]),
        st.just("a"),
        st.integers(min_value=-1, max_value=1),
        st.sampled_from("123456"),
        st.sampled_from(range(len(_CONFIRMED))),
    ),
    min_size=1,
    max_size=16,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_EVENTS)
async def test_rotation_between_any_two_records_changes_no_answer(
    events: list[tuple[str, str, int, str, int]],
    make_record: RecordFactory,
    key: PrivateKey,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Against the log unrotated, and against the events themselves: for each change-control policy, the
    newest delivered admission of each workload (API group, kind, namespace and name), by decision time then
    seq, in which that policy confirmed the engine (however many admissions it did not confirm came after)."""
    await _rotated_gives_the_same_answers(events, make_record, key, tmp_path_factory.mktemp("differential"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_ONE_WORKLOAD_EVENTS)
async def test_each_policys_admissions_survive_rotation_and_answers_taken_back(
    events: list[tuple[str, str, int, str, int]],
    make_record: RecordFactory,
    key: PrivateKey,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The same differential over one workload's admissions alone, where the carried state cuts some of them:
    an admission kept for one policy is never taken for another's newest when newer ones of that policy were
    cut."""
    await _rotated_gives_the_same_answers(events, make_record, key, tmp_path_factory.mktemp("one"))


def _expected(allows: list[tuple[datetime, int, DecisionRecord]], policy: str | None) -> list[str]:
    """What the history answers, from the delivered allows alone: for None the newest one's engine; for a
    policy, newest first, the engine of the newest allow it confirmed, then of each model, the newest allow
    it confirmed an engine of that model in (an engine recorded without a model: in the newest only)."""
    mine = sorted((a for a in allows if _confirms(a[2], policy)), key=lambda a: (a[0], a[1]), reverse=True)
    if policy is None or not mine:
        return [mine[0][2].engines[0]["reference"]] if mine else []
    found: dict[str, str] = {}
    for index, (_, _, record) in enumerate(mine):
        recorded = record.engines[0]
        key = recorded.get("model") or recorded["reference"]
        if key not in found and (index == 0 or "model" in recorded):
            found[key] = recorded["reference"]
    return list(found.values())


async def _rotated_gives_the_same_answers(
    events: list[tuple[str, str, int, str, int]], make_record: RecordFactory, key: PrivateKey, folder: Path
) -> None:
    plain, rotated = SQLiteStore(folder / "plain.db"), SQLiteStore(folder / "rotated.db")
    await plain.open()
    await rotated.open()
    try:
        buckets = {_bucket(w) for w in _WORKLOADS}
        allows: dict[tuple[str, str, str], list[tuple[datetime, int, DecisionRecord]]] = {
            b: [] for b in buckets
        }
        taken_back = dict.fromkeys(buckets, 0)
        seq = 0
        for index, (event, workload, skew, digit, confirmed) in enumerate(events):
            name, kind, api_version = _WORKLOADS[workload]
            identity = {"name": name, "kind": kind, "api_version": api_version}
            minute = index + skew
            if event == "rotate":
                await rotated.close()
                rotate(f"sqlite:///{rotated.path}", key, folder / "archive")
                await rotated.open()
                continue
            if event == "undelivered":
                mine = allows[_bucket(workload)]
                if not mine:
                    continue
                record = undelivered.undelivered(mine.pop()[2])
                taken_back[_bucket(workload)] += 1
            elif event == "no-engine":
                record = make_record(engines=(), time=START + timedelta(minutes=minute), **identity)
            else:
                confirmers = _CONFIRMED[confirmed]
                # A record that names its confirmers names the model too (both came after legacy ones).
                model = model_of(digit) if confirmers is not None else None
                record = make_record(
                    engines=(engine(digit, confirmed_by=confirmers, model=model),),
                    time=START + timedelta(minutes=minute),
                    allowed=event != "deny",
                    reason="Allowed" if event != "deny" else "PolicyViolation",
                    dry_run=event == "dry-run",
                    **identity,
                )
            seq += 1
            if event == "allow":
                allows[_bucket(workload)].append((record.time, seq, record))
            await append(plain, record)
            await append(rotated, record)
        for bucket in sorted(buckets):
            name, kind, group = bucket
            for policy in _POLICIES:
                expected = await last(plain, name, kind=kind, group=group, policy=policy)
                assert [e.reference for e in expected] == _expected(allows[bucket], policy), (
                    bucket,
                    policy,
                    events,
                )
                try:
                    found = await last(rotated, name, kind=kind, group=group, policy=policy)
                    assert found == expected, (bucket, policy, events)
                except EvidenceUnavailable:
                    # Only when more admissions were taken back than are kept: then it says so, never guesses.
                    assert taken_back[bucket] >= KEPT, events
    finally:
        await plain.close()
        await rotated.close()


# --- an edited store ----------------------------------------------------------------------------------


def _execute(url: str, *statements: str) -> None:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            for statement in statements:
                conn.execute(statement)
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)


async def test_the_carried_state_cannot_be_dropped_or_changed_through_sql(
    log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = log
    await append(store, admission(make_record, "resnet", "1", 0), make_record(name="other"))
    rotate(url, key, tmp_path / "archive")
    errors = (sqlite3.DatabaseError, psycopg.errors.RaiseException)
    for statement in (
        "DELETE FROM trtguard_carried",
        "UPDATE trtguard_carried SET content = NULL",
        "INSERT INTO trtguard_carried VALUES ('prod', 'apps', 'Deployment', 'x', 999, NULL)",
        "DELETE FROM trtguard_carried_checkpoints",
    ):
        with pytest.raises(errors, match=r"append-only|belongs to a stored checkpoint"):
            _execute(url, statement)


async def test_an_edited_state_is_found_by_verify_and_refused_by_seal_and_prune(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = sqlite_log
    await append(store, admission(make_record, "resnet", "1", 0), admission(make_record, "bert", "2", 1))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=1, partial=False)
        archive_segments(ledger, tmp_path)
    # Someone with the file drops the guard and removes resnet's row: the webhook would forget it.
    _execute(
        url,
        "DROP TRIGGER trtguard_carried_no_delete",
        "DELETE FROM trtguard_carried WHERE name = 'resnet'",
    )
    with Ledger.open(url) as ledger:
        assert carried_problems(ledger, 0) == [
            "the carried state stored through seq 1 is not the one its records give: "
            "trtguard_carried was changed"
        ]
        with pytest.raises(DecisionLogError, match="does not match its signed checkpoint: trtguard_carried"):
            ledger.prune(tmp_path, keep_records=0, keep_since=None)
    await append(store, make_record(name="more"))
    with Ledger.open(url) as ledger, pytest.raises(DecisionLogError, match="does not match its signed"):
        ledger.seal(key, segment_records=1, partial=False)
    assert (await store.verify()).records == 3  # nothing was pruned


async def test_a_tampered_or_half_written_archive_is_not_vouched_for(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = sqlite_log
    await append(store, admission(make_record, "resnet", "1", 0), admission(make_record, "resnet", "2", 1))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=1, partial=False)
        second = archive_segments(ledger, tmp_path)[1]
    assert second.archive is not None
    path = tmp_path / second.archive
    lines = gzip.decompress(path.read_bytes()).split(b"\n")
    assert lines[1].startswith(b'{"carried_before":[{')
    # The state the segment starts from, emptied: the chain still holds, the carried state does not.
    path.write_bytes(gzip.compress(b"\n".join([lines[0], b'{"carried_before":[]}', *lines[2:]])))
    report, check = verify_segment(path, key=key.public_key())
    assert report.ok and check.carried_ok is False
    assert (
        check.carried_problem
        == "the carried state the segment starts from is not the one the checkpoint signs"
    )
    # Cut off half way (a copy interrupted): unreadable, never vouched for.
    whole = gzip.compress(b"\n".join(lines))
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DecisionLogError, match="cannot read the archived segment"):
        verify_segment(path, key=key.public_key())


# --- a log pruned before the carried state existed ----------------------------------------------------


async def test_a_log_pruned_by_an_older_trtguard_is_rebuilt_from_its_archive(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    """Checkpoints of format 1, their segments archived and pruned as an older trtguard did: the webhook
    says it cannot tell what ran, and the first seal with --archive rebuilds the state."""
    store, url = sqlite_log
    first = admission(make_record, "resnet", "1", 0)
    await append(store, first, make_record(name="other"))
    path = Path(url.removeprefix("sqlite:///"))
    with Ledger.open(url) as ledger:
        rows = list(ledger.rows(0, 2))
    old = checkpoints.sign(
        key,
        first_seq=1,
        last_seq=2,
        prev_hash=rows[0].prev_hash,
        head_hash=rows[1].hash,
        first_time=str(rows[0].columns["time"]),
        last_time=str(rows[1].columns["time"]),
        prev_carried_hash="0" * 64,
        carried_hash="0" * 64,
    )
    old = dataclasses.replace(old, prev_carried_hash=None, carried_hash=None)
    old = dataclasses.replace(old, signature=key.sign(old.signed_bytes()))
    assert old.statement()["type"] == checkpoints.CHECKPOINT_TYPE_1
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO trtguard_checkpoints (last_seq, statement, signature) VALUES (2, ?, ?)",
            (canonical_json(old.statement()).decode(), old.signature_text()),
        )
    with Ledger.open(url) as ledger:
        [segment] = archive_segments(ledger, tmp_path)
    _execute(
        url, "DELETE FROM trtguard_decisions WHERE seq <= 2", "UPDATE trtguard_checkpoints SET pruned = 1"
    )
    await append(store, make_record(name="later"))
    with pytest.raises(EvidenceUnavailable, match="pruned without carrying"):
        await last(store, "resnet")
    with Ledger.open(url) as ledger:
        assert "without carrying change control's last admissions" in carried_problems(ledger, 2)[0]
        with pytest.raises(DecisionLogError, match="read back from its archive") as refused:
            ledger.seal(key, segment_records=1, partial=False)
        assert refused.value.hint is not None and "--archive FOLDER" in refused.value.hint
        ledger.seal(key, segment_records=1, partial=False, archive=tmp_path)
        assert carried_problems(ledger, 2) == []
    assert [e.reference for e in await last(store, "resnet")] == [ENGINE + "1" * 64]
    assert segment.archive is not None


async def test_a_writer_refuses_a_log_whose_carried_state_was_edited(
    log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    """Rows deleted by hand would make the webhook forget what ran: it does not start on such a log."""
    store, url = log
    await append(store, admission(make_record, "resnet", "1", 0), make_record(name="other"))
    rotate(url, key, tmp_path / "archive")
    await store.close()
    drop = (
        "DROP TRIGGER trtguard_carried_no_delete"
        if url.startswith("sqlite")
        else "DROP TRIGGER trtguard_carried_guard ON trtguard_carried"
    )
    _execute(url, drop, "DELETE FROM trtguard_carried WHERE name = 'resnet'")

    def reopened(**options: Any) -> DecisionStore:
        if url.startswith("sqlite:///"):
            return SQLiteStore(Path(url.removeprefix("sqlite:///")), **options)
        return PostgresStore(url, **options)

    refused = reopened()
    try:
        with pytest.raises(DecisionLogError, match="trtguard_carried was changed"):
            await refused.open()
    finally:
        await refused.close()
    accepted = reopened(accept_broken=True)
    await accepted.open()
    try:
        await append(accepted, make_record(name="after"))
    finally:
        await accepted.close()


class RotatedBetweenPages:
    """A real store that is rotated (every record pruned) right after it answers the first page."""

    def __init__(self, store: DecisionStore, url: str, key: PrivateKey, folder: Path) -> None:
        self.store, self.url, self.key, self.folder = store, url, key, folder
        self.description = store.description
        self.pages = 0

    async def query(self, query: Any) -> Any:
        found = await self.store.query(query)
        if query.by_time:
            self.pages += 1
            if self.pages == 1:
                rotate(self.url, self.key, self.folder)
        return found

    async def carried(
        self, namespace: str, name: str, *, group: str | None = None, kind: str | None = None
    ) -> Any:
        return await self.store.carried(namespace, name, group=group, kind=kind)


async def test_a_prune_between_two_pages_of_live_records_loses_nothing(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    store, url = sqlite_log
    first = admission(make_record, "resnet", "1", 0)
    # More admissions than a page, none naming an engine (scaling): the one that did is on a later page.
    scaling = [
        make_record(name="resnet", engines=(), time=START + timedelta(minutes=1 + i)) for i in range(60)
    ]
    await append(store, first, *scaling)
    racing = RotatedBetweenPages(store, url, key, tmp_path / "archive")
    history = DecisionLogHistory(racing)  # type: ignore[arg-type]
    found = await history.last_engines(
        WorkloadIdentity("apps", "Deployment", "prod", "resnet"), Deadline.after(10), "change-control"
    )
    assert racing.pages >= 1 and (await store.verify()).base_seq == 61  # it did run between the reads
    assert [(e.reference, e.admitted_by) for e in found] == [
        (ENGINE + "1" * 64, AdmittingDecision(first.record_id, 1))
    ]


def _set_carried(url: str, name: str, edit: Callable[[str], str]) -> None:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.execute("DROP TRIGGER IF EXISTS trtguard_carried_no_update")
        (content,) = conn.execute("SELECT content FROM trtguard_carried WHERE name = ?", (name,)).fetchone()
        conn.execute("UPDATE trtguard_carried SET content = ? WHERE name = ?", (edit(content), name))


async def test_a_carried_row_that_is_not_exactly_its_canonical_json_is_refused_naming_why(
    sqlite_log: tuple[DecisionStore, str], make_record: RecordFactory, key: PrivateKey, tmp_path: Path
) -> None:
    """Attack 39a F1: a first ``record_id`` (which ``_sql.carried_pattern`` matches) or engine reference in
    ``trtguard_carried.content``, the signed values after them: the digest recomputed and verify passed."""
    store, url = sqlite_log
    await append(store, admission(make_record, "resnet", "1", 0), admission(make_record, "bert", "2", 1))
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=1, partial=False)
        archive_segments(ledger, tmp_path)
        assert carried_problems(ledger, 0) == []
        before = ledger.carried_state(2)
    fake = '"record_id":"' + "feedface" * 4 + '",'
    _set_carried(url, "resnet", lambda content: content.replace('"record_id":', fake + '"record_id":', 1))
    with Ledger.open(url) as ledger, pytest.raises(DecisionLogError) as caught:
        ledger.carried_state(2)
    assert caught.value.message == (
        "a carried row is not the canonical JSON (RFC 8785) written: the key 'record_id' appears twice in "
        "one object (JSON readers differ on which value counts)"
    )
    assert caught.value.location is not None and "trtguard_carried" in caught.value.location
    _set_carried(
        url, "resnet", lambda content: content.replace(fake, "").replace('"engines":[', '"engines": [')
    )
    with Ledger.open(url) as ledger, pytest.raises(DecisionLogError, match="other text for the same values"):
        ledger.carried_state(2)
    _set_carried(url, "resnet", lambda content: content.replace('"engines": [', '"engines":['))
    with Ledger.open(url) as ledger:
        assert ledger.carried_state(2).digest() == before.digest()
