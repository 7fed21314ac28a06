"""Which engines a workload was admitted with over time, and what changed in their build manifests.

Built from the decision log alone: real (not dry-run) admissions of ``namespace/name``. On UPDATE the webhook
records only the engines that changed, so the engines in force are replayed record by record, per engine
repository. Build manifests come from an evidence source (an attestation folder or the registry) and are
compared with :func:`verifier.manifest_diff.diff_manifests`.

The webhook's change control reads the same records through :mod:`webhook.admission_history`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from verifier.deadline import Deadline
from verifier.errors import InputError, TrtguardError, VerificationError
from verifier.evidence import EvidenceSource
from verifier.intoto import statement_from_envelope
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, EngineBuildManifest, load_manifest
from verifier.manifest_diff import ManifestDiff, diff_manifests
from verifier.references import ImageReference
from webhook.decisionlog import DecisionStore, RecordQuery, StoredRecord


@dataclass(frozen=True, slots=True)
class EngineChange:
    """One engine repository whose engine changed; ``old`` is ``None`` for a first admission."""

    repository: str
    old: str | None
    new: str

    def to_json(self) -> dict[str, Any]:
        """``{"repository", "old", "new"}``."""
        return {"repository": self.repository, "old": self.old, "new": self.new}


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """An admission that changed the engines in force for the workload."""

    seq: int
    time: datetime
    uid: str
    operation: str
    kind: str
    user: str | None
    policy_revision: str | None
    engines: Mapping[str, str]
    """Repository → engine reference in force after this admission."""
    changes: tuple[EngineChange, ...]


async def engine_history(store: DecisionStore, namespace: str, name: str) -> list[HistoryEntry]:
    """The admissions of ``namespace/name`` that changed its engines, oldest first."""
    records = await store.query(RecordQuery(namespace=namespace, name=name, allowed=True, dry_run=False))
    entries: list[HistoryEntry] = []
    in_force: dict[str, str] = {}
    for stored in records:
        record = stored.record
        if record.operation not in ("CREATE", "UPDATE") or not record.engines:
            continue
        admitted = _engines(stored)
        if record.operation == "CREATE":
            previous, in_force = in_force, dict(admitted)
            # A re-created workload starts afresh; what it replaces is still its predecessor.
            changes = tuple(
                EngineChange(repo, previous.get(repo), ref)
                for repo, ref in admitted.items()
                if previous.get(repo) != ref
            )
        else:
            changes = tuple(
                EngineChange(repo, in_force.get(repo), ref)
                for repo, ref in admitted.items()
                if in_force.get(repo) != ref
            )
            in_force.update(admitted)
        if changes:
            entries.append(
                HistoryEntry(
                    seq=stored.seq,
                    time=record.time,
                    uid=record.uid,
                    operation=record.operation,
                    kind=record.kind,
                    user=record.user,
                    policy_revision=record.policy_revision,
                    engines=dict(in_force),
                    changes=changes,
                )
            )
    return entries


@dataclass(frozen=True, slots=True)
class ManifestComparison:
    """The build-manifest differences for one :class:`EngineChange`, or why there are none."""

    change: EngineChange
    diff: ManifestDiff | None
    problem: str | None = None


async def compare_manifests(
    change: EngineChange, evidence: EvidenceSource, deadline: Deadline
) -> ManifestComparison:
    """Fetch both engines' build manifests and compare them (nothing to compare for a first admission).

    Signatures are not checked again here: the webhook verified them when it admitted each engine.
    """
    if change.old is None:
        return ManifestComparison(change, None, "first engine of this repository for the workload")
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


def _engines(stored: StoredRecord) -> dict[str, str]:
    engines: dict[str, str] = {}
    for engine in stored.record.engines:
        reference = engine.get("reference")
        if isinstance(reference, str):
            engines[_repository(reference)] = reference
    return engines


def _repository(reference: str) -> str:
    try:
        return ImageReference.parse(reference).name
    except InputError:
        return reference.split("@", 1)[0]


def history_json(
    entries: Sequence[HistoryEntry], comparisons: Mapping[tuple[int, str], ManifestComparison]
) -> list[dict[str, Any]]:
    """The history as JSON; ``comparisons`` is keyed by (entry seq, engine repository)."""
    result: list[dict[str, Any]] = []
    for entry in entries:
        changes = []
        for change in entry.changes:
            comparison = comparisons.get((entry.seq, change.repository))
            diff = comparison.diff if comparison is not None else None
            changes.append(
                {
                    **change.to_json(),
                    "manifest_diff": diff.to_json() if diff is not None else None,
                    "note": comparison.problem if comparison is not None else "build manifests not compared",
                }
            )
        result.append(
            {
                "seq": entry.seq,
                "time": entry.time.isoformat(),
                "uid": entry.uid,
                "operation": entry.operation,
                "kind": entry.kind,
                "user": entry.user,
                "policy_revision": entry.policy_revision,
                "engines": dict(entry.engines),
                "changes": changes,
            }
        )
    return result
