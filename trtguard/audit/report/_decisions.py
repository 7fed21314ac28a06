"""The decisions of a verified evidence package as a report shows them: admitted changes, denials, the chain.

The records come from the package's ``records.jsonl`` (already checked by the package verifier); admitted
changes are replayed per workload (API group, kind, namespace and name) with
:func:`trtguard.audit._history.replay`, as ``audit history`` replays the log, so both tell the same story.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from decisionlog import DecisionLogError, DecisionRecord, StoredRecord, original_id
from policies.identity import kind_name
from trtguard.audit._history import ArtifactChange, replay, signer_names


@dataclass(frozen=True, slots=True)
class Change:
    """One engine or runtime image that an admission changed, with what its record counted."""

    artifact: str
    slot: str
    old: str | None
    new: str
    change_kinds: tuple[str, ...]
    gated: tuple[str, ...]
    audit_ids: tuple[str, ...]
    approvers: tuple[str, ...]
    signers: tuple[str, ...]
    #: Precisions and TensorRT versions of the build manifests the record counted (an engine): what the
    #: report can say of an engine whose build manifest the package does not hold.
    precisions: tuple[str, ...] = ()
    tensorrt_versions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Admission:
    """An admitted change of a workload's engines or images."""

    seq: int
    time: datetime
    workload: str
    operation: str
    requester: str | None
    groups: tuple[str, ...]
    policy_revision: str | None
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class Violation:
    """One finding of a denial."""

    action: str
    policy: str
    rule: str
    message: str
    fix: str


@dataclass(frozen=True, slots=True)
class Denial:
    """A denied request among the package's records; ``selected`` when the selection names it."""

    seq: int
    time: datetime
    workload: str
    operation: str
    requester: str | None
    reason: str
    message: str | None
    violations: tuple[Violation, ...]
    dry_run: bool
    selected: bool


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One record of the chain the package carries."""

    seq: int
    hash: str
    prev_hash: str
    workload: str
    allowed: bool
    dry_run: bool
    selected: bool


@dataclass(frozen=True, slots=True)
class Superseded:
    """A selected admission of an engine that a later admission among the package's records replaced."""

    admission: Admission
    change: Change
    #: The first later admission that changed the engine (what replaced the selected one).
    by: Admission
    by_change: Change


@dataclass(frozen=True, slots=True)
class InForce:
    """An engine a workload runs now, and the admission that put it there (when, who asked, its audit IDs
    and approvers): the workload's newest admission of that engine among all the package's records, the
    selected ones or not, since a selection (an audit ID, an engine) leaves out what replaced it later."""

    workload: str
    slot: str
    reference: str
    admission: Admission
    change: Change
    #: The last selected admission of the engine when a later one replaced it (``admission`` is then known
    #: from the chain the package carries, not from the selection), else None.
    superseded: Superseded | None = None


@dataclass(frozen=True, slots=True)
class Decisions:
    """Everything the report shows of the package's decision records."""

    admissions: tuple[Admission, ...]
    denials: tuple[Denial, ...]
    chain: tuple[ChainLink, ...]
    #: (first, last) time of the selected decisions.
    period: tuple[datetime, datetime] | None
    #: The engines each workload runs now (as of its newest admission in the package), by workload then slot.
    in_force: tuple[InForce, ...] = ()


def read_records(data: bytes) -> list[StoredRecord]:
    """The records of ``records.jsonl`` in file order (the verifier has checked the file; a line it could
    not read is skipped here as it was reported there)."""
    records = []
    for raw in data.splitlines():
        try:
            line = json.loads(raw)
            record = DecisionRecord.from_json(line["record"])
            records.append(StoredRecord(int(line["seq"]), record, str(line["prev_hash"]), str(line["hash"])))
        except (ValueError, KeyError, TypeError, RecursionError, DecisionLogError):
            continue
    return records


def read_decisions(records: Sequence[StoredRecord], selected: Iterable[int]) -> Decisions:
    """Admitted changes (selected records, replayed per workload), denials and the chain of ``records``;
    what each workload runs now is replayed from all of its records in the package."""
    chosen = set(selected)
    by_workload: dict[str, list[StoredRecord]] = {}
    every: dict[str, list[StoredRecord]] = {}
    for stored in records:
        workload = _workload(stored.record)
        every.setdefault(workload, []).append(stored)
        # An undelivered record in the package, selected or not, takes the allow it names out of the replay.
        if stored.seq in chosen or original_id(stored.record) is not None:
            by_workload.setdefault(workload, []).append(stored)
    admissions = sorted(
        (
            admission
            for workload, stored in by_workload.items()
            for admission in _admissions(workload, stored)
        ),
        key=lambda admission: admission.seq,
    )
    # Of each workload a selected admission changed, every admission the package holds, in replay order.
    replayed = [
        admission
        for workload in dict.fromkeys(admission.workload for admission in admissions)
        for admission in _admissions(workload, every[workload])
    ]
    denials = tuple(
        Denial(
            seq=stored.seq,
            time=stored.record.time,
            workload=_workload(stored.record),
            operation=stored.record.operation,
            requester=stored.record.user,
            reason=stored.record.reason,
            message=stored.record.message,
            violations=tuple(_violation(v) for v in stored.record.violations if "omitted" not in v),
            dry_run=stored.record.dry_run,
            selected=stored.seq in chosen,
        )
        for stored in records
        if not stored.record.allowed
    )
    chain = tuple(
        ChainLink(
            seq=stored.seq,
            hash=stored.hash,
            prev_hash=stored.prev_hash,
            workload=_workload(stored.record),
            allowed=stored.record.allowed,
            dry_run=stored.record.dry_run,
            selected=stored.seq in chosen,
        )
        for stored in records
    )
    times = [stored.record.time for stored in records if stored.seq in chosen]
    period = (min(times), max(times)) if times else None
    return Decisions(tuple(admissions), denials, chain, period, _in_force(admissions, replayed))


def _admissions(workload: str, records: Sequence[StoredRecord]) -> list[Admission]:
    """The admissions among one workload's ``records`` that changed its engines or images, in replay order."""
    return [
        Admission(
            seq=entry.seq,
            time=entry.record.time,
            workload=workload,
            operation=entry.record.operation,
            requester=entry.record.user,
            groups=entry.record.groups,
            policy_revision=entry.record.policy_revision,
            changes=tuple(_change(change) for change in entry.changes),
        )
        for entry in replay(records)
    ]


def _engine_changes(admissions: Iterable[Admission]) -> dict[tuple[str, str], list[tuple[Admission, Change]]]:
    """(workload, engine slot) → each admission that changed that engine, with the change, in order."""
    found: dict[tuple[str, str], list[tuple[Admission, Change]]] = {}
    for admission in admissions:
        for change in admission.changes:
            if change.artifact == "engine":
                found.setdefault((admission.workload, change.slot), []).append((admission, change))
    return found


def _in_force(selected: Sequence[Admission], every: Sequence[Admission]) -> tuple[InForce, ...]:
    """Per workload, each engine slot a selected admission changed: its newest admitted change in ``every``
    (what runs now, and who admitted it), and the last selected change when a later one replaced it."""
    history = _engine_changes(every)
    found = []
    for key, changes in sorted(_engine_changes(selected).items()):
        # Replay order is decision time, then seq (records shipped from a spool come late in seq order).
        admission, change = max(changes, key=lambda pair: _order(pair[0]))
        after = [(a, c) for a, c in history.get(key, []) if _order(a) > _order(admission)]
        if not after:
            found.append(InForce(key[0], key[1], change.new, admission, change))
            continue
        (by, by_change), (now, now_change) = after[0], after[-1]
        superseded = Superseded(admission, change, by, by_change)
        found.append(InForce(key[0], key[1], now_change.new, now, now_change, superseded))
    return tuple(found)


def _order(admission: Admission) -> tuple[datetime, int]:
    return admission.time, admission.seq


def _workload(record: DecisionRecord) -> str:
    """``NAMESPACE/KIND/NAME``: the replay is per workload, and a Volcano Job is not a batch/v1 Job."""
    if record.workload is not None:
        return str(record.workload)
    kind = kind_name(record.api_group, record.kind)
    name = record.name or "(no name)"
    return f"{record.namespace}/{kind}/{name}" if record.namespace else f"{kind}/{name}"


def _change(change: ArtifactChange) -> Change:
    recorded = change.recorded
    evidence = "build_manifests" if change.artifact == "engine" else "signatures"
    counted = _objects(recorded.get(evidence))
    signers = [name for item in counted for name in signer_names(item.get("signers"))]
    manifests = counted if change.artifact == "engine" else []
    return Change(
        artifact=change.artifact,
        slot=change.slot,
        old=change.old,
        new=change.new,
        change_kinds=tuple(change.change_kinds),
        gated=tuple(change.gated),
        audit_ids=tuple(change.audit_ids),
        approvers=tuple(change.approvers),
        signers=tuple(dict.fromkeys(signers)),
        precisions=_texts(p for m in manifests for p in _listed(m.get("precisions"))),
        tensorrt_versions=_texts(m.get("tensorrt_version") for m in manifests),
    )


def _violation(data: Mapping[str, Any]) -> Violation:
    return Violation(
        action=str(data.get("action", "")),
        policy=str(data.get("policy", "")),
        rule=str(data.get("rule", "")),
        message=str(data.get("message", "")),
        fix=str(data.get("fix") or ""),
    )


def _objects(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _texts(values: Iterable[object]) -> tuple[str, ...]:
    """The strings among ``values``, each once, in order."""
    return tuple(dict.fromkeys(value for value in values if isinstance(value, str)))
