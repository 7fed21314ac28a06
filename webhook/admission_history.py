"""What the webhook admitted before, for change control: the policy engine's ``AdmissionHistory``.

Answered from the decision log alone: the engines of a workload's newest (by decision time) real (not
dry-run), delivered admission that named any, with the name and containers each was recorded with, so that
the engine a new one replaces is found whatever repository it comes from (``policies.evaluator``). The live
records are read first; what rotation pruned is answered by the carried state the log keeps through its
newest pruned checkpoint (:mod:`webhook.decisionlog.carried`), so that pruning never forgets a workload's
last admission.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Final

from policies.results import AdmittedEngine, AdmittingDecision
from verifier.deadline import Deadline
from verifier.errors import EvidenceUnavailable
from webhook.decisionlog import DecisionLogError, DecisionStore, RecordQuery, StoredRecord, undelivered
from webhook.decisionlog.carried import Carried, carried_engines
from webhook.decisionlog.record import format_time

#: Times the live records and the carried state are read again when a prune ran between the two reads.
_ATTEMPTS: Final = 3


class DecisionLogHistory:
    """The policy engine's ``AdmissionHistory``, answered from the decision log.

    Looks back through real admissions of the workload, newest first, a page at a time, for the first one
    that recorded any engine: every admission records all the engines of the object it admitted. Then the
    carried state (the last admissions of records pruned away): the newer of the two is the last admission.
    """

    #: Records read per round trip to the store.
    PAGE = 50

    def __init__(self, store: DecisionStore) -> None:
        self.store = store

    async def last_engines(
        self, namespace: str, kind: str, name: str, deadline: Deadline
    ) -> tuple[AdmittedEngine, ...]:
        """The engines of the newest real, delivered admission of this workload that named any (none: empty).

        Raises :class:`EvidenceUnavailable` (transient) when the log cannot answer in time: the policy's
        ``onError`` then decides, as for any evidence that cannot be fetched; and (not transient) when the
        log cannot tell what ran last, because records were pruned without carrying it forward.
        """
        try:
            async with asyncio.timeout(deadline.remaining()):
                for _ in range(_ATTEMPTS):
                    before = await self.store.carried(namespace, name, kind)
                    live = await self._live(namespace, kind, name)
                    carried = await self.store.carried(namespace, name, kind)
                    if carried.base_seq == before.base_seq:  # no prune between: one consistent answer
                        break
                else:
                    raise DecisionLogError("the log was pruned while it was read, again and again")
                return await self._newest(namespace, kind, name, live, carried)
        except _Lost as error:
            raise EvidenceUnavailable(
                error.message, transient=False, location=self.store.description, hint=error.hint
            ) from None
        except (TimeoutError, DecisionLogError) as error:
            reason = "ran out of time" if isinstance(error, TimeoutError) else str(error)
            raise EvidenceUnavailable(
                f"the decision log could not say which engines were last admitted for "
                f"{namespace}/{kind}/{name}: {reason}",
                transient=True,
                location=self.store.description,
            ) from None

    async def _live(self, namespace: str, kind: str, name: str) -> StoredRecord | None:
        """The newest live admission of the workload that named engines and was delivered."""
        offset = 0
        while True:
            # Newest by decision time, not by seq: a record shipped from a spool after an outage lands
            # after newer admissions written directly, and must not be taken as the last one.
            page = await self.store.query(
                RecordQuery(
                    namespace=namespace,
                    name=name,
                    kind=kind,
                    allowed=True,
                    dry_run=False,
                    newest_first=True,
                    by_time=True,
                    limit=self.PAGE,
                    offset=offset,
                )
            )
            for stored in page:
                if carried_engines(stored.record) and not await self._undelivered(
                    stored.record.uid, stored.record.record_id
                ):
                    return stored
            if len(page) < self.PAGE:
                return None
            offset += len(page)

    async def _newest(
        self, namespace: str, kind: str, name: str, live: StoredRecord | None, carried: Carried
    ) -> tuple[AdmittedEngine, ...]:
        """The newer of the live admission and the carried ones (an undelivered record in the live log may
        name a carried admission too)."""
        if carried.base_seq and not carried.stored:
            raise _lost(namespace, kind, name, carried.base_seq)
        [workload] = carried.workloads or (None,)
        admissions = [
            a
            for a in (workload.admissions if workload is not None else ())
            if not await self._undelivered(a.uid, a.record_id)
        ]
        newest = max(admissions, key=lambda a: a.order, default=None)
        if live is not None and (newest is None or _order(live) > newest.order):
            decision = AdmittingDecision(live.record.record_id, live.seq)
            return _admitted(carried_engines(live.record), decision)
        if newest is not None:
            return _admitted(newest.engines, AdmittingDecision(newest.record_id, newest.seq))
        if workload is not None and workload.older:
            raise _lost(namespace, kind, name, carried.base_seq)
        return ()

    async def _undelivered(self, uid: str, record_id: str) -> bool:
        """Whether the allow ``record_id`` never reached the API server: an undelivered record of the same
        request names it (by ``uid`` and the derived ``record_id``, docs/decision-log.md)."""
        denials = await self.store.query(RecordQuery(uid=uid, allowed=False))
        return any(undelivered.original_id(d.record) == record_id for d in denials)


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


def _lost(namespace: str, kind: str, name: str, base_seq: int) -> _Lost:
    return _Lost(
        f"what {namespace}/{kind}/{name} last ran is not known: records up to seq {base_seq} were pruned "
        "without carrying its last admissions forward",
        hint="run `trtguard audit seal --archive FOLDER` (or `audit rotate`) once: it rebuilds them from the "
        "archived segments (docs/decision-log-storage.md, upgrading)",
    )
