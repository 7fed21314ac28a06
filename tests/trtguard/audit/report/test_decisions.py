"""trtguard/audit/report/_decisions.py: an allow whose answer was not delivered is no admitted change, in a
package as in ``audit history``; the undelivered record shows among the denials, and the package verifier
(trtguard/audit/package/verify/selection.py) notes the selected allow."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from datetime import UTC, datetime
from pathlib import Path

from decisionlog import DecisionRecord, RecordQuery, SQLiteStore, StoredRecord
from decisionlog import _undelivered as undelivered
from decisionlog._record import new_record_id
from tests.trtguard.audit.package.world import World, export_package, messages, verify_package
from trtguard.audit.package import Selection
from trtguard.audit.report import build_view
from trtguard.audit.report._decisions import read_decisions
from verifier.base._deadline import Deadline


async def _append_late_allow(log: Path) -> tuple[StoredRecord, StoredRecord]:
    """A later UPDATE of prod/resnet back to the fp16 engine, confirmed too late, and its undelivered one."""
    store = SQLiteStore(log)
    await store.open()
    try:
        resnet = await store.query(RecordQuery(namespace="prod", name="resnet", allowed=True, dry_run=False))
        fp16 = resnet[0].record  # seq 2 (CREATE with fp16); the last one, seq 7, moved to INT8
        late = dataclasses.replace(
            fp16, uid="late", operation="UPDATE", record_id=new_record_id(), time=datetime.now(UTC)
        )
        for record in (late, undelivered.undelivered(late)):
            await store.append(record, deadline=Deadline.after(5))
        *_, allow, marker = await store.query(RecordQuery())
        return allow, marker
    finally:
        await store.close()


def test_a_package_leaves_out_an_allow_that_was_not_delivered(world: World, tmp_path: Path) -> None:
    log = tmp_path / "decisions.db"
    shutil.copy(world.log, log)
    late_world = dataclasses.replace(world, log=log)
    allow, marker = asyncio.run(_append_late_allow(log))
    output = tmp_path / "fp16.tar.gz"
    # The fp16 engine selects the late allow; the undelivered record (no engine) comes with the segment.
    asyncio.run(export_package(late_world, Selection.engine(world.engine_digests["fp16"]), output))
    report = verify_package(late_world, output)
    assert report.ok
    assert (
        "selection: selected allows whose answer was not delivered (the webhook answered deny, so they "
        f"admitted nothing): seq {allow.seq} (AnswerNotDelivered at seq {marker.seq})"
    ) in messages(report, "note")

    contents = build_view(output, world.exporter.public_key()).contents
    assert contents is not None
    decisions = contents.decisions
    assert allow.seq not in [admission.seq for admission in decisions.admissions]
    assert [admission.seq for admission in decisions.admissions] == [2, 3]
    (shown,) = [denial for denial in decisions.denials if denial.seq == marker.seq]
    assert shown.reason == "AnswerNotDelivered" and allow.record.record_id in (shown.message or "")


def test_without_its_undelivered_record_an_allow_is_replayed() -> None:
    """Only the undelivered record takes an allow out: a package that does not hold it cannot tell."""
    allow = StoredRecord(1, _allow(), "0" * 64, "1" * 64)
    marker = StoredRecord(2, undelivered.undelivered(allow.record), "1" * 64, "2" * 64)
    assert [a.seq for a in read_decisions([allow], [1]).admissions] == [1]
    assert read_decisions([allow, marker], [1]).admissions == ()


def _allow() -> DecisionRecord:
    return DecisionRecord(
        uid="u",
        operation="CREATE",
        kind="Deployment",
        api_version="apps/v1",
        allowed=True,
        reason="Allowed",
        namespace="prod",
        name="resnet",
        engines=({"reference": f"registry.example.com/models/resnet@sha256:{'1' * 64}", "name": "engine"},),
    )


def _admit(
    seq: int, operation: str, digit: str, *, allowed: bool = True, dry_run: bool = False
) -> StoredRecord:
    record = dataclasses.replace(
        _allow(),
        allowed=allowed,
        reason="Allowed" if allowed else "PolicyViolation",
        dry_run=dry_run,
        uid=f"u{seq}",
        operation=operation,
        record_id=new_record_id(),
        time=datetime(2026, 12, 1, 12, seq, tzinfo=UTC),
        engines=({"reference": f"registry.example.com/models/resnet@sha256:{digit * 64}", "name": "engine"},),
    )
    return StoredRecord(seq, record, "0" * 64, "1" * 64)


def test_what_runs_now_is_the_newest_admission_in_the_package_not_the_last_selected() -> None:
    """Attack 28 finding 3: a package selected by audit ID (seq 1) carries later admissions of the workload
    in its chain segment; the engine running now is the newest of them, and the selected one is superseded."""
    records = [
        _admit(1, "CREATE", "1"),
        _admit(2, "UPDATE", "2"),
        _admit(3, "UPDATE", "4", allowed=False),  # a denial changes nothing
        _admit(4, "UPDATE", "5", dry_run=True),  # nor does a dry run
        _admit(5, "UPDATE", "3"),
    ]
    decisions = read_decisions(records, [1])
    assert [admission.seq for admission in decisions.admissions] == [1]  # the timeline stays the selection
    (now,) = decisions.in_force
    assert now.reference.endswith("3" * 64) and now.admission.seq == 5
    assert now.superseded is not None
    assert now.superseded.admission.seq == 1 and now.superseded.change.new.endswith("1" * 64)
    assert now.superseded.by.seq == 2 and now.superseded.by_change.new.endswith("2" * 64)

    # The newest admission selected: nothing superseded it.
    (latest,) = read_decisions(records, [1, 5]).in_force
    assert latest.admission.seq == 5 and latest.superseded is None
