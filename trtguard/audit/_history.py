"""Every admitted change of a workload's engines and images, and what each decision relied on.

Built from the decision log alone: real (not dry-run) admissions of one workload (API group, kind, namespace
and name: :mod:`policies.identity`; another group's kind of the same name is another workload), replayed
record by record. An engine is followed by its name in the workload (the image volume or annotation entry; the
repository in records written before names were kept), an image by its container (its JSON path in older
records); a CREATE starts afresh, an UPDATE changes what it names. Each change carries what its record holds
(docs/decision-log.md): for an engine the build manifest counted (audit ID, TensorRT version, precisions), the
change kinds computed against which baseline, the approvals counted; for an image the signatures and
attestations counted. The requester and the policy revision come with each admission. An allow whose answer
never reached the API server (an undelivered record names it, docs/decision-log.md "Answers not delivered")
changed nothing: it is left out, and :func:`not_delivered` lists it.

After rotation the live log starts later: the engines in force then are those rotation carried forward
(the workload's last admissions as of the newest pruned checkpoint, :mod:`decisionlog._carried`), so
the first change after the pruned records names what it replaced; the earlier changes are in the archived
segments (``trtguard audit verify --archive`` checks each).

Build manifests can also be compared field by field (:func:`compare_manifests`): they come from an
evidence source (an attestation folder or the registry) as attached *now*, which the records themselves do
not need. The webhook's change control reads the same records through :mod:`webhook._admission_history`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from decisionlog import (
    Carried,
    CarriedAdmission,
    DecisionRecord,
    DecisionStore,
    RecordQuery,
    StoredRecord,
    original_id,
)
from policies.identity import WorkloadIdentity
from verifier.base import Deadline, ImageReference, InputError, TrtguardError, VerificationError
from verifier.crypto import statement_from_envelope
from verifier.evidence import EvidenceSource
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, EngineBuildManifest, load_manifest
from verifier.manifest_diff import ManifestDiff, diff_manifests

Artifact = Literal["engine", "image"]


@dataclass(frozen=True, slots=True)
class ArtifactChange:
    """One engine or image of the workload whose reference changed; ``old`` is None when it is new.

    ``slot`` is what identifies it in the workload (engine name or container); ``recorded`` is the image or
    engine object of the decision record, with the evidence the policies counted; ``previous`` the object of
    the record that admitted ``old``, when the log holds it (what the old values are read from).
    """

    artifact: Artifact
    slot: str
    old: str | None
    new: str
    recorded: Mapping[str, Any]
    previous: Mapping[str, Any] | None = None

    @property
    def key(self) -> tuple[Artifact, str]:
        """What identifies the change within its entry."""
        return self.artifact, self.slot

    @property
    def audit_ids(self) -> list[str]:
        """Audit IDs of the build manifests counted (an engine)."""
        return _unique(m.get("audit_id") for m in recorded_objects(self.recorded, "build_manifests"))

    @property
    def change_kinds(self) -> list[str]:
        """Every change kind the policies' change control computed (an engine)."""
        return _unique(
            change.get("kind")
            for control in recorded_objects(self.recorded, "change_control")
            for change in recorded_objects(control, "changes")
        )

    @property
    def gated(self) -> list[str]:
        """The change kinds that needed approvals."""
        return _unique(
            kind
            for control in recorded_objects(self.recorded, "change_control")
            for kind in _list(control, "gated")
        )

    @property
    def approvals(self) -> list[Mapping[str, Any]]:
        """The approvals counted, each once (by attestation digest)."""
        found: dict[str, Mapping[str, Any]] = {}
        for control in recorded_objects(self.recorded, "change_control"):
            for approval in recorded_objects(control, "approvals"):
                found.setdefault(str(approval.get("digest")), approval)
        return list(found.values())

    @property
    def approvers(self) -> list[str]:
        """Who approved (the approvals counted)."""
        return _unique(approval.get("approver") for approval in self.approvals)

    @property
    def values(self) -> list[tuple[str, str | None, str]]:
        """What changed of an engine, from the records alone: (field, old value, new value) for the audit
        ID, TensorRT version and precisions of the build manifests counted (old None: not in the log)."""
        if self.artifact != "engine":
            return []
        found = []
        for label, new in _manifest_values(self.recorded).items():
            old = _manifest_values(self.previous).get(label) if self.previous is not None else None
            if old != new:
                found.append((label, old, new))
        return found

    def to_json(self) -> dict[str, Any]:
        """The change with its summary and the recorded object."""
        return {
            "artifact": self.artifact,
            "slot": self.slot,
            "old": self.old,
            "new": self.new,
            "audit_ids": self.audit_ids,
            "change_kinds": self.change_kinds,
            "gated": self.gated,
            "approvers": self.approvers,
            "changed": [{"field": label, "old": old, "new": new} for label, old, new in self.values],
            "recorded": dict(self.recorded),
        }


def _manifest_values(recorded: Mapping[str, Any]) -> dict[str, str]:
    """The audit ID, TensorRT version and precisions of an engine's recorded build manifests, as text."""
    manifests = recorded_objects(recorded, "build_manifests")
    values = {
        "audit ID": _unique(m.get("audit_id") for m in manifests),
        "TensorRT": _unique(m.get("tensorrt_version") for m in manifests),
        "precisions": _unique(", ".join(map(str, _list(m, "precisions"))) for m in manifests),
    }
    return {label: " | ".join(found) for label, found in values.items() if found}


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """An admission that changed the engines or images in force for the workload: its record, and what it
    changed."""

    stored: StoredRecord
    engines: Mapping[str, str]
    """Engine name (or repository) → reference in force after this admission."""
    images: Mapping[str, str]
    """Container (or path) → image in force after this admission."""
    changes: tuple[ArtifactChange, ...]

    @property
    def seq(self) -> int:
        """The record's place in the log."""
        return self.stored.seq

    @property
    def record(self) -> DecisionRecord:
        """The admission's decision record."""
        return self.stored.record


async def workload_records(store: DecisionStore, workload: WorkloadIdentity) -> list[StoredRecord]:
    """The real (not dry-run) records of ``workload``: admissions, and denials (among them the undelivered
    records that say an admission's answer never reached the API server)."""
    query = RecordQuery(
        namespace=workload.namespace,
        name=workload.name,
        kind=workload.kind,
        group=workload.group,
        dry_run=False,
    )
    return await store.query(query)


async def workload_carried(store: DecisionStore, workload: WorkloadIdentity) -> Carried:
    """What rotation carried forward of ``workload``'s pruned records."""
    return await store.carried(workload.namespace, workload.name, group=workload.group, kind=workload.kind)


async def workload_history(store: DecisionStore, workload: WorkloadIdentity) -> list[HistoryEntry]:
    """The real admissions of ``workload`` that changed its engines or images, oldest first (after rotation,
    from the engines carried forward through the records pruned)."""
    carried = await workload_carried(store, workload)
    return replay(await workload_records(store, workload), carried=last_carried(carried))


def last_carried(carried: Carried) -> CarriedAdmission | None:
    """The newest admission rotation carried forward of the workload ``carried`` was read for, if any."""
    admissions = [a for w in carried.workloads for a in w.admissions]
    return max(admissions, key=lambda a: a.order, default=None)


def replay(records: Iterable[StoredRecord], *, carried: CarriedAdmission | None = None) -> list[HistoryEntry]:
    """The admissions among ``records`` (one workload's: API group, kind, namespace and name) that changed
    its engines or images.

    Replayed in decision-time order (then seq): records shipped from a spool after an outage follow newer
    ones in seq order. Denials and dry runs are skipped, so that callers holding records from elsewhere (an
    evidence package) replay them as :func:`workload_history` does the log's; so is an allow that an
    undelivered record among ``records`` names (:func:`not_delivered`): the API server never received it.
    ``carried`` is the last admission before the records (pruned since): its engines are in force first.
    """
    records = list(records)
    dropped = {stored.seq for stored in not_delivered(records)}
    entries: list[HistoryEntry] = []
    in_force: dict[Artifact, dict[str, str]] = {"engine": {}, "image": {}}
    # Slot → the recorded object of what is in force: where a change's old values come from.
    objects: dict[Artifact, dict[str, Mapping[str, Any]]] = {"engine": {}, "image": {}}
    if carried is not None:
        in_force["engine"] = {slot: ref for slot, (ref, _) in _slots("engine", carried.engines).items()}
        objects["engine"] = {slot: entry for slot, (_, entry) in _slots("engine", carried.engines).items()}
    for stored in sorted(records, key=lambda s: (s.record.time, s.seq)):
        record = stored.record
        if not record.allowed or record.dry_run or stored.seq in dropped:
            continue
        if record.operation not in ("CREATE", "UPDATE") or not (record.engines or record.images):
            continue
        changes: list[ArtifactChange] = []
        # An image volume that holds an engine is listed among the images too: it is shown as the engine.
        engine_paths = {engine.get("path") for engine in record.engines}
        images = [image for image in record.images if image.get("path") not in engine_paths]
        kinds: tuple[tuple[Artifact, Sequence[Mapping[str, Any]]], ...] = (
            ("engine", record.engines),
            ("image", images),
        )
        for artifact, entries_of in kinds:
            admitted = _slots(artifact, entries_of)
            previous, before = in_force[artifact], objects[artifact]
            changes += [
                ArtifactChange(
                    artifact,
                    slot,
                    previous.get(slot),
                    reference,
                    entry,
                    before.get(slot) if slot in previous else None,
                )
                for slot, (reference, entry) in admitted.items()
                if previous.get(slot) != reference
            ]
            current = {slot: reference for slot, (reference, _) in admitted.items()}
            recorded = {slot: entry for slot, (_, entry) in admitted.items()}
            # A re-created workload starts afresh; what it replaces is still its predecessor.
            if record.operation == "CREATE":
                in_force[artifact], objects[artifact] = current, recorded
            else:
                in_force[artifact], objects[artifact] = {**previous, **current}, {**before, **recorded}
        if changes:
            entries.append(
                HistoryEntry(
                    stored=stored,
                    engines=dict(in_force["engine"]),
                    images=dict(in_force["image"]),
                    changes=tuple(changes),
                )
            )
    return entries


def not_delivered(records: Iterable[StoredRecord]) -> list[StoredRecord]:
    """The allows among ``records`` whose answer never reached the API server, in seq order.

    Each is named by an undelivered record among ``records`` (``reason`` AnswerNotDelivered, same ``uid``):
    identified by the ``record_id`` the undelivered record derives from the allow's, never by its message
    text (:func:`decisionlog._undelivered.original_id`).
    """
    records = list(records)
    named = {
        (stored.record.uid, original)
        for stored in records
        if (original := original_id(stored.record)) is not None
    }
    return [
        stored
        for stored in records
        if stored.record.allowed and (stored.record.uid, stored.record.record_id) in named
    ]


def not_delivered_json(records: Iterable[StoredRecord]) -> list[dict[str, Any]]:
    """:func:`not_delivered` as JSON: seq, time, uid, record_id, operation and requester of each allow."""
    return [
        {
            "seq": stored.seq,
            "time": stored.record.time.isoformat(),
            "uid": stored.record.uid,
            "record_id": stored.record.record_id,
            "operation": stored.record.operation,
            "user": stored.record.user,
        }
        for stored in not_delivered(records)
    ]


def _slots(
    artifact: Artifact, entries: Iterable[Mapping[str, Any]]
) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """Slot → (reference, recorded object) of a record's engines or images."""
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for entry in entries:
        reference = entry.get("reference")
        if not isinstance(reference, str):
            continue  # an {"omitted": N} marker
        if artifact == "engine":
            name = entry.get("name")
            slot = name if isinstance(name, str) else _repository(reference)
        else:
            container, path = entry.get("container"), entry.get("path")
            slot = container if isinstance(container, str) else str(path)
        found.setdefault(slot, (reference, entry))
    return found


@dataclass(frozen=True, slots=True)
class ManifestComparison:
    """The build-manifest differences for one engine change, or why there are none."""

    change: ArtifactChange
    diff: ManifestDiff | None
    problem: str | None = None


async def compare_manifests(
    change: ArtifactChange, evidence: EvidenceSource, deadline: Deadline
) -> ManifestComparison:
    """Fetch both engines' build manifests and compare them (nothing to compare for a new engine).

    Signatures are not checked again here: the webhook verified them when it admitted each engine, and the
    record names the manifest it counted (its digest).
    """
    if change.old is None:
        return ManifestComparison(change, None, "first engine of this name for the workload")
    try:
        old = await build_manifest(change.old, evidence, deadline)
        new = await build_manifest(change.new, evidence, deadline)
    except TrtguardError as error:
        return ManifestComparison(change, None, str(error))
    return ManifestComparison(change, diff_manifests(old, new))


async def build_manifest(reference: str, evidence: EvidenceSource, deadline: Deadline) -> EngineBuildManifest:
    """The build manifest attached to engine ``reference``; raises :class:`TrtguardError` if there is none.

    Only a manifest that describes the artifact's engine layer counts, as when the engine was admitted.
    """
    ref = ImageReference.parse(reference)
    attached = await evidence.attestations(ref, deadline)
    for attestation in attached.attestations:
        if attestation.predicate_type == ENGINE_BUILD_PREDICATE_TYPE:
            statement = statement_from_envelope(attestation.envelope, location=attestation.origin)
            manifest = load_manifest(statement, attestation.origin)
            try:
                attached.subjects.require_build_manifest(manifest, attestation.subjects)
            except VerificationError:
                continue
            return manifest
    raise InputError(
        f"no build manifest found for {reference} in {evidence.description}",
        hint="point --attestations at the folder with the engine's attestations, or use --registry-config",
    )


def history_json(
    entries: Sequence[HistoryEntry],
    comparisons: Mapping[tuple[int, str], ManifestComparison],
    verified: Mapping[int, bool | None],
) -> list[dict[str, Any]]:
    """The history as JSON; ``comparisons`` by (entry seq, engine slot), ``verified`` by entry seq."""
    result: list[dict[str, Any]] = []
    for entry in entries:
        changes = []
        for change in entry.changes:
            data = change.to_json()
            if change.artifact == "engine":
                comparison = comparisons.get((entry.seq, change.slot))
                diff = comparison.diff if comparison is not None else None
                data["manifest_diff"] = diff.to_json() if diff is not None else None
                data["note"] = (
                    comparison.problem if comparison is not None else "build manifests not compared"
                )
            changes.append(data)
        record = entry.record
        result.append(
            {
                "seq": entry.seq,
                "verified": verified.get(entry.seq),
                "time": record.time.isoformat(),
                "uid": record.uid,
                "record_id": record.record_id,
                "operation": record.operation,
                "kind": record.kind,
                "user": record.user,
                "groups": list(record.groups),
                "policy_revision": record.policy_revision,
                "record_format": record.format,
                "engines": dict(entry.engines),
                "images": dict(entry.images),
                "changes": changes,
            }
        )
    return result


def signer_names(signers: object) -> list[str]:
    """``platform/build-signer`` or ``subject (issuer)`` for each recorded signer."""
    names = []
    for signer in signers if isinstance(signers, list) else ():
        if isinstance(signer, dict) and isinstance(signer.get("key"), str):
            names.append(signer["key"])
        elif isinstance(signer, dict) and isinstance(signer.get("identity"), str):
            names.append(f"{signer['identity']} ({signer.get('issuer')})")
    return names


def recorded_objects(data: object, key: str) -> list[dict[str, Any]]:
    """The objects in the list ``data[key]`` of a recorded object, without ``{"omitted": N}`` markers (none
    where ``data`` is no object or ``data[key]`` no list)."""
    value = data.get(key) if isinstance(data, Mapping) else None
    return (
        [item for item in value if isinstance(item, dict) and "omitted" not in item]
        if isinstance(value, list)
        else []
    )


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    return value if isinstance(value, list) else []


def _unique(values: Iterable[object]) -> list[str]:
    return list(dict.fromkeys(value for value in values if isinstance(value, str)))


def _repository(reference: str) -> str:
    try:
        return ImageReference.parse(reference).name
    except InputError:
        return reference.split("@", 1)[0]
