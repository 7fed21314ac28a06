"""What the webhook admitted before, for change control: the policy evaluator's ``AdmissionHistory``.

Answered from the decision log alone, per change-control policy and workload (API group, kind, namespace
and name: :mod:`policies.identity`): of each ONNX model (``model`` of each recorded engine), the engine the
policy last confirmed (``confirmed_by``) in a real (not dry-run), delivered admission, with the name,
containers and build manifest it was recorded with (``policies.rules._change_control`` compares a new engine
with the last build of its own model). A model left out of later admissions keeps its last build: removing
an engine for one UPDATE and bringing it back changed never forgets what it was. An admission the policy
confirmed nothing in (it did not apply, or its change control found something missing and its action let
the engine in anyway) counts for no model. A record written before records named the confirming policies
counts as confirmed by every policy; an engine recorded without its model counts only in the policy's newest
admission, as it did before models were recorded.
The work of one look-up is bounded: a policy keeps its newest ``MAX_MODELS`` models, so the live records are
read only until its delivered admissions read hold that many, and never more than
:attr:`DecisionLogHistory.MAX_RECORDS` records (:attr:`~DecisionLogHistory.MAX_ENGINES` engine entries); a
look-up that would read further cannot tell what ran, and the policy's ``onError`` decides (never an allow by
default: what it did not read could hold a model's last build).
The live records are read first; what rotation pruned is answered by the carried state the log keeps through
its newest pruned checkpoint (:mod:`decisionlog._carried`: for each policy the last admissions of each of its
newest models), so that pruning never forgets a policy's last build of a model.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any

from decisionlog import (
    KEPT,
    MAX_MODELS,
    Carried,
    DecisionLogError,
    DecisionStore,
    RecordQuery,
    StoredRecord,
    carried_engines,
    confirmed_engines,
    format_time,
    model_key,
    original_id,
)
from policies.identity import WorkloadIdentity
from policies.results import AdmittedEngine, AdmittingDecision
from verifier.base import Deadline, EvidenceUnavailable


class DecisionLogHistory:
    """The policy evaluator's ``AdmissionHistory``, answered from the decision log.

    Looks back through the real admissions of the workload, newest first, a page at a time, and the carried
    state (the last admissions of records pruned away, those of each policy's models among them): of each
    model, the newest delivered one in which the policy confirmed an engine of it.
    """

    #: Records read per round trip to the store, at most (the first pages are smaller: most look-ups end in
    #: the newest few records).
    PAGE = 50
    #: Live records one look-up reads at most, and engine entries of them: the work of an admission stays
    #: bounded however often the workload was updated since the last rotation. A look-up that would read
    #: further cannot tell what ran (the policy's ``onError`` decides); ``audit rotate`` moves what it needs
    #: into the carried state, read at once (docs/change-control.md).
    MAX_RECORDS = 1000
    MAX_ENGINES = 20_000

    def __init__(self, store: DecisionStore) -> None:
        self.store = store

    async def last_engines(
        self, workload: WorkloadIdentity, deadline: Deadline, policy: str | None
    ) -> tuple[AdmittedEngine, ...]:
        """Of each model, the engine ``policy`` last confirmed in a real, delivered admission of
        ``workload``, newest first; for None, all the engines of its newest real, delivered admission that
        named any (none: empty).

        Records and carried entries of another API group (a Volcano ``Job`` beside a ``batch/v1`` one of the
        same name) are another workload's: never read here.

        The live records are read first, a page at a time by key (for a policy: until its newest models are
        found, as a model may have last run long ago; at most :attr:`MAX_RECORDS`), then the carried state:
        a prune between the reads deletes records only together with moving the carried state past them
        (one transaction), so what the live pages missed, the state read after them holds.

        Raises :class:`EvidenceUnavailable` (transient) when the log cannot answer in time: the policy's
        ``onError`` then decides, as for any evidence that cannot be fetched; and (not transient) when the
        log cannot tell what ran last, because records were pruned without carrying it forward, or because
        telling would read more live records than a look-up may.
        """
        try:
            async with asyncio.timeout(deadline.remaining()):
                if policy is not None:
                    return await self._models(workload, policy)
                live = await self._live(workload)
                carried = await self.store.carried(
                    workload.namespace, workload.name, group=workload.group, kind=workload.kind
                )
                return await self._newest(workload, live, carried)
        except _Lost as error:
            raise EvidenceUnavailable(
                error.message, transient=False, location=self.store.description, hint=error.hint
            ) from None
        except (TimeoutError, DecisionLogError) as error:
            reason = "ran out of time" if isinstance(error, TimeoutError) else str(error)
            raise EvidenceUnavailable(
                f"the decision log could not say which engines were last admitted for {workload}: {reason}",
                transient=True,
                location=self.store.description,
            ) from None

    async def _records(self, workload: WorkloadIdentity) -> AsyncIterator[StoredRecord]:
        """The workload's live real allows, newest first, a page at a time (growing to :attr:`PAGE`).

        Raises :class:`_TooMany` past :attr:`MAX_RECORDS` records or :attr:`MAX_ENGINES` engine entries.
        """
        older_than: tuple[datetime, int] | None = None
        limit, records, engines = min(4, self.PAGE), 0, 0
        while True:
            # Newest by decision time, not by seq: a record shipped from a spool after an outage lands
            # after newer admissions written directly, and must not be taken as the last one.
            page = await self.store.query(
                RecordQuery(
                    namespace=workload.namespace,
                    name=workload.name,
                    kind=workload.kind,
                    group=workload.group,
                    allowed=True,
                    dry_run=False,
                    newest_first=True,
                    by_time=True,
                    limit=limit,
                    older_than=older_than,
                )
            )
            for stored in page:
                records, engines = records + 1, engines + len(stored.record.engines)
                if records > self.MAX_RECORDS or engines > self.MAX_ENGINES:
                    raise _TooMany(workload, self.MAX_RECORDS, self.MAX_ENGINES)
                yield stored
            if len(page) < limit:
                return
            older_than = (page[-1].record.time, page[-1].seq)
            limit = min(limit * 2, self.PAGE)

    async def _live(self, workload: WorkloadIdentity) -> StoredRecord | None:
        """The newest live admission of the workload that named engines, delivered."""
        async for stored in self._records(workload):
            if carried_engines(stored.record) and not await self._undelivered(
                stored.record.uid, stored.record.record_id
            ):
                return stored
        return None

    async def _models(self, workload: WorkloadIdentity, policy: str) -> tuple[AdmittedEngine, ...]:
        """Of each model, the engines ``policy`` last confirmed in a delivered admission (every build of it
        that admission ran, not one picked by the order the record lists them in): the live records and the
        carried admissions, newest first (a record both hold is read once).

        The policy keeps its :data:`MAX_MODELS` newest models, as rotation does: the live records are read
        only until the delivered admissions read hold that many (whole admissions: every model of the one
        that reached it), and no admission older than that one counts."""
        found: list[tuple[tuple[str, int], str, str, int, tuple[Mapping[str, Any], ...]]] = []
        delivered: dict[tuple[str, str], bool] = {}
        seen: set[str] = set()
        floor: tuple[str, int] | None = None  # the admission the live reading stopped at: none older counts

        async def is_undelivered(uid: str, record_id: str) -> bool:
            if (uid, record_id) not in delivered:
                delivered[uid, record_id] = await self._undelivered(uid, record_id)
            return delivered[uid, record_id]

        async for stored in self._records(workload):
            engines = confirmed_engines(carried_engines(stored.record), policy)
            if engines:
                record = stored.record
                found.append((_order(stored), record.record_id, record.uid, stored.seq, engines))
                # Engines recorded without a model count in the newest admission only: never toward the cap.
                models = {model_key(e) for e in engines if isinstance(e.get("model"), str)}
                if not models <= seen and not await is_undelivered(record.uid, record.record_id):
                    seen |= models
                    if len(seen) >= MAX_MODELS:
                        floor = _order(stored)
                        break
        carried = await self.store.carried(
            workload.namespace, workload.name, group=workload.group, kind=workload.kind
        )
        if carried.base_seq and not carried.stored:
            raise _lost(workload, carried.base_seq)
        [entry] = carried.workloads or (None,)
        live = {record_id for _, record_id, *_ in found}
        for admission in entry.admissions if entry else ():
            if admission.confirms(policy) and admission.record_id not in live:
                engines = confirmed_engines(admission.engines, policy)
                found.append((admission.order, admission.record_id, admission.uid, admission.seq, engines))
        kept: dict[str, list[AdmittedEngine]] = {}
        taken_back: dict[str, int] = {}
        cut = entry.cut_for(policy) if entry else None
        newest = True
        for order, record_id, uid, seq, engines in sorted(found, key=lambda f: f[0], reverse=True):
            if floor is not None and order < floor:
                break  # older than the newest MAX_MODELS models' admissions: forgotten, as rotation does
            # An engine recorded without its model counts in the newest admission only, as before models
            # were recorded (the carried state keeps no older one of it either).
            new = [
                engine
                for engine in engines
                if model_key(engine) not in kept and (newest or isinstance(engine.get("model"), str))
            ]
            if not new:
                continue
            if await is_undelivered(uid, record_id):
                for engine in new:
                    # The newest kept of a model all taken back: one cut from the state may be its last.
                    taken_back[model_key(engine)] = taken_back.get(model_key(engine), 0) + 1
                    if taken_back[model_key(engine)] >= KEPT and cut is not None:
                        raise _lost(workload, carried.base_seq)
                continue
            newest = False
            decision = AdmittingDecision(record_id, seq)
            for engine in new:
                kept.setdefault(model_key(engine), []).append(_engine(engine, decision))
        if not kept and entry is not None and (entry.older or cut is not None):
            # Every admission of the policy kept was taken back, and one cut may have been its last.
            raise _lost(workload, carried.base_seq)
        return tuple(engine for builds in kept.values() for engine in builds)

    async def _newest(
        self, workload: WorkloadIdentity, live: StoredRecord | None, carried: Carried
    ) -> tuple[AdmittedEngine, ...]:
        """The engines of the newer of the live admission and the carried ones (an undelivered record in
        the live log may name a carried admission too; only those newer than the live one are asked
        about)."""
        if carried.base_seq and not carried.stored:
            raise _lost(workload, carried.base_seq)
        [entry] = carried.workloads or (None,)
        floor = _order(live) if live is not None else None
        newest = sorted(entry.admissions if entry else (), key=lambda a: a.order, reverse=True)
        cut = entry.cut_for(None) if entry else None
        for admission in newest:
            if floor is not None and admission.order <= floor:
                break
            if cut is not None and admission.order < cut:
                break  # kept for a policy: a newer one was cut
            if not await self._undelivered(admission.uid, admission.record_id):
                return _admitted(admission.engines, AdmittingDecision(admission.record_id, admission.seq))
        # Every carried admission newer than the live one (if any) was taken back; one cut from the state
        # may be newer than the live one too: a legacy one unless a carried one older than it shows it is
        # not (each is older than every one kept), any other unless the newest of them is older than it.
        unknown = floor is None or all(a.order > floor for a in newest)
        if entry is not None and entry.older and unknown:
            raise _lost(workload, carried.base_seq)
        if cut is not None and (floor is None or floor < cut):
            raise _lost(workload, carried.base_seq)
        if live is not None:
            return _admitted(carried_engines(live.record), AdmittingDecision(live.record.record_id, live.seq))
        return ()

    async def _undelivered(self, uid: str, record_id: str) -> bool:
        """Whether the allow ``record_id`` never reached the API server: an undelivered record of the same
        request names it (by ``uid`` and the derived ``record_id``, docs/decision-log.md)."""
        denials = await self.store.query(RecordQuery(uid=uid, allowed=False))
        return any(original_id(d.record) == record_id for d in denials)


def _order(stored: StoredRecord) -> tuple[str, int]:
    """The order of :attr:`CarriedAdmission.order`: decision time as stored (sortable text), then seq."""
    return format_time(stored.record.time), stored.seq


def _admitted(
    engines: Iterable[Mapping[str, Any]], decision: AdmittingDecision
) -> tuple[AdmittedEngine, ...]:
    return tuple(_engine(engine, decision) for engine in engines if isinstance(engine.get("reference"), str))


def _engine(engine: Mapping[str, Any], decision: AdmittingDecision) -> AdmittedEngine:
    """An engine as :func:`decisionlog.carried_engines` keeps it (its reference is text)."""
    name, containers = engine.get("name"), engine.get("containers")
    model, manifest = engine.get("model"), engine.get("manifest")
    return AdmittedEngine(
        reference=str(engine["reference"]),
        name=name if isinstance(name, str) else None,
        containers=tuple(c for c in containers if isinstance(c, str)) if isinstance(containers, list) else (),
        admitted_by=decision,
        model=model if isinstance(model, str) else None,
        manifest=manifest if isinstance(manifest, str) else None,
    )


class _Lost(DecisionLogError):
    """The log cannot tell what a workload last ran: retrying will not help."""


class _TooMany(_Lost):
    """Telling what a workload last ran would read more live records than a look-up may."""

    def __init__(self, workload: WorkloadIdentity, records: int, engines: int) -> None:
        super().__init__(
            f"what {workload} last ran is not known within the {records} newest live records ({engines} "
            "engine entries) a look-up reads: it was admitted more often than that since the log was last "
            "rotated",
            hint="run `trtguard audit rotate`: the carried state then answers for what it pruned "
            "(docs/change-control.md, 'Bounded look-ups')",
        )


def _lost(workload: WorkloadIdentity, base_seq: int) -> _Lost:
    return _Lost(
        f"what {workload} last ran is not known: records up to seq {base_seq} were pruned without carrying "
        "its last admissions forward",
        hint="run `trtguard audit seal --archive FOLDER` (or `audit rotate`) once: it rebuilds them from the "
        "archived segments (docs/decision-log-storage.md, upgrading)",
    )
