"""What the webhook admitted before, for change control: the policy engine's ``AdmissionHistory``.

Answered from the decision log alone, per change-control policy: the engines a policy confirmed
(``confirmed_by`` of each recorded engine) in the newest (by decision time) real (not dry-run), delivered
admission of a workload (API group, kind, namespace and name: :mod:`policies.identity`) in which it confirmed
any, with the name and containers each was recorded with (``policies.rules.change_control`` compares a new
engine with them). An admission the policy confirmed nothing in (it did not apply, or its change control
found something missing and its action let the engine in anyway) is skipped: it is no baseline for that
policy. A record written before records named the confirming policies counts as confirmed by every policy.
The live records are read first; what rotation pruned is answered by the carried state the log keeps through
its newest pruned checkpoint (:mod:`decisionlog._carried`), so that pruning never forgets a policy's last
admission of a workload.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from decisionlog import (
    Carried,
    DecisionLogError,
    DecisionStore,
    RecordQuery,
    StoredRecord,
    carried_engines,
    confirmed_engines,
    format_time,
    original_id,
)
from policies.identity import WorkloadIdentity
from policies.results import AdmittedEngine, AdmittingDecision
from verifier.base import Deadline, EvidenceUnavailable


class DecisionLogHistory:
    """The policy engine's ``AdmissionHistory``, answered from the decision log.

    Looks back through real admissions of the workload, newest first, a page at a time, for the first one
    in which the policy confirmed any engine. Then the carried state (the last admissions of records pruned
    away, those of each policy among them): the newer of the two is the policy's last admission.
    """

    #: Records read per round trip to the store.
    PAGE = 50

    def __init__(self, store: DecisionStore) -> None:
        self.store = store

    async def last_engines(
        self, workload: WorkloadIdentity, deadline: Deadline, policy: str | None
    ) -> tuple[AdmittedEngine, ...]:
        """The engines ``policy`` confirmed in the newest real, delivered admission of ``workload`` in which
        it confirmed any; for None, all the engines of its newest real, delivered admission that named any
        (none: empty).

        Records and carried entries of another API group (a Volcano ``Job`` beside a ``batch/v1`` one of the
        same name) are another workload's: never read here.

        The live records are read first, a page at a time by key, then the carried state: a prune between
        the reads deletes records only together with moving the carried state past them (one transaction),
        so what the live pages missed, the state read after them holds.

        Raises :class:`EvidenceUnavailable` (transient) when the log cannot answer in time: the policy's
        ``onError`` then decides, as for any evidence that cannot be fetched; and (not transient) when the
        log cannot tell what ran last, because records were pruned without carrying it forward.
        """
        try:
            async with asyncio.timeout(deadline.remaining()):
                live = await self._live(workload, policy)
                carried = await self.store.carried(
                    workload.namespace, workload.name, group=workload.group, kind=workload.kind
                )
                return await self._newest(workload, policy, live, carried)
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

    async def _live(self, workload: WorkloadIdentity, policy: str | None) -> StoredRecord | None:
        """The newest live admission of the workload in which ``policy`` confirmed engines, delivered."""
        older_than: tuple[datetime, int] | None = None
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
                    limit=self.PAGE,
                    older_than=older_than,
                )
            )
            for stored in page:
                if confirmed_engines(carried_engines(stored.record), policy) and not await self._undelivered(
                    stored.record.uid, stored.record.record_id
                ):
                    return stored
            if len(page) < self.PAGE:
                return None
            older_than = (page[-1].record.time, page[-1].seq)

    async def _newest(
        self, workload: WorkloadIdentity, policy: str | None, live: StoredRecord | None, carried: Carried
    ) -> tuple[AdmittedEngine, ...]:
        """The newer of the live admission and the carried ones the policy confirmed engines in (an
        undelivered record in the live log may name a carried admission too; only those newer than the live
        one are asked about)."""
        if carried.base_seq and not carried.stored:
            raise _lost(workload, carried.base_seq)
        [entry] = carried.workloads or (None,)
        floor = _order(live) if live is not None else None
        mine = sorted(
            (a for a in (entry.admissions if entry else ()) if a.confirms(policy)),
            key=lambda a: a.order,
            reverse=True,
        )
        cut = entry.cut_for(policy) if entry else None
        for admission in mine:
            if floor is not None and admission.order <= floor:
                break
            if cut is not None and admission.order < cut:
                break  # kept for another policy: one of this policy's, newer, was cut
            if not await self._undelivered(admission.uid, admission.record_id):
                engines = confirmed_engines(admission.engines, policy)
                return _admitted(engines, AdmittingDecision(admission.record_id, admission.seq))
        # Every carried admission of the policy (newer than the live one, if any) was taken back; those cut
        # from the state may be newer than the live one too: legacy ones unless a carried one older than it
        # shows they are not (each is older than every one kept), the policy's own unless the newest of
        # them is older than it.
        unknown = floor is None or all(a.order > floor for a in mine)
        if entry is not None and entry.older and unknown:
            raise _lost(workload, carried.base_seq)
        if cut is not None and (floor is None or floor < cut):
            raise _lost(workload, carried.base_seq)
        if live is not None:
            engines = confirmed_engines(carried_engines(live.record), policy)
            return _admitted(engines, AdmittingDecision(live.record.record_id, live.seq))
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
    found = []
    for engine in engines:
        reference, engine_name, containers = (
            engine.get("reference"),
            engine.get("name"),
            engine.get("containers"),
        )
        if not isinstance(reference, str):
            continue
        found.append(
            AdmittedEngine(
                reference=reference,
                name=engine_name if isinstance(engine_name, str) else None,
                containers=tuple(c for c in containers if isinstance(c, str))
                if isinstance(containers, list)
                else (),
                admitted_by=decision,
            )
        )
    return tuple(found)


class _Lost(DecisionLogError):
    """The log cannot tell what a workload last ran: retrying will not help."""


def _lost(workload: WorkloadIdentity, base_seq: int) -> _Lost:
    return _Lost(
        f"what {workload} last ran is not known: records up to seq {base_seq} were pruned without carrying "
        "its last admissions forward",
        hint="run `trtguard audit seal --archive FOLDER` (or `audit rotate`) once: it rebuilds them from the "
        "archived segments (docs/decision-log-storage.md, upgrading)",
    )
