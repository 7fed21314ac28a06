"""What the webhook admitted before, for change control: the policy engine's ``AdmissionHistory``.

Answered from the decision log alone: the engines of a workload's newest (by decision time) real (not
dry-run) admission that named any, with the name and containers each was recorded with, so that the engine a
new one replaces is found whatever repository it comes from (``policies.evaluator``).
"""

from __future__ import annotations

import asyncio

from policies.results import AdmittedEngine, AdmittingDecision
from verifier.deadline import Deadline
from verifier.errors import EvidenceUnavailable
from webhook.decisionlog import DecisionLogError, DecisionStore, RecordQuery, StoredRecord, undelivered


class DecisionLogHistory:
    """The policy engine's ``AdmissionHistory``, answered from the decision log.

    Looks back through real admissions of the workload, newest first, a page at a time, for the first one
    that recorded any engine: every admission records all the engines of the object it admitted.
    """

    #: Records read per round trip to the store.
    PAGE = 50

    def __init__(self, store: DecisionStore) -> None:
        self.store = store

    async def last_engines(
        self, namespace: str, kind: str, name: str, deadline: Deadline
    ) -> tuple[AdmittedEngine, ...]:
        """The engines of the newest real admission of this workload that named any (none: empty).

        Raises :class:`EvidenceUnavailable` (transient) when the log cannot answer in time: the policy's
        ``onError`` then decides, as for any evidence that cannot be fetched.
        """
        offset = 0
        try:
            async with asyncio.timeout(deadline.remaining()):
                while True:
                    # Newest by decision time, not by seq: a record shipped from a spool after an outage
                    # lands after newer admissions written directly, and must not be taken as the last one.
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
                        admitted = _admitted_engines(stored)
                        if admitted and not await self._undelivered(stored):
                            return admitted
                    if len(page) < self.PAGE:
                        return ()
                    offset += len(page)
        except (TimeoutError, DecisionLogError) as error:
            reason = "ran out of time" if isinstance(error, TimeoutError) else str(error)
            raise EvidenceUnavailable(
                f"the decision log could not say which engines were last admitted for "
                f"{namespace}/{kind}/{name}: {reason}",
                transient=True,
                location=self.store.description,
            ) from None

    async def _undelivered(self, stored: StoredRecord) -> bool:
        """Whether the allow of ``stored`` never reached the API server (an undelivered record names it)."""
        denials = await self.store.query(RecordQuery(uid=stored.record.uid, allowed=False))
        return any(undelivered.target(d.record) == stored.record.record_id for d in denials)


def _admitted_engines(stored: StoredRecord) -> tuple[AdmittedEngine, ...]:
    decision = AdmittingDecision(stored.record.record_id, stored.seq)
    found = []
    for engine in stored.record.engines:
        reference, name, containers = engine.get("reference"), engine.get("name"), engine.get("containers")
        if not isinstance(reference, str):
            continue
        found.append(
            AdmittedEngine(
                reference=reference,
                name=name if isinstance(name, str) else None,
                containers=tuple(c for c in containers if isinstance(c, str))
                if isinstance(containers, list)
                else (),
                admitted_by=decision,
            )
        )
    return tuple(found)
