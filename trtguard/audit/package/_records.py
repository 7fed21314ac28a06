"""The decision records of an export, read in the one pass that verifies the log, in bounded memory.

The store recomputes the whole chain once (``DecisionStore.verify``) and hands each record that checks, as
its JSON with the canonical JSON its hash covers (``decisionlog.DataSink``: no record object is built of
each row), to a :class:`RecordCollector`: it applies the selection rule, writes the
lines of ``decisions/records.jsonl`` that the chain scope keeps to a spool (hashed and deflated on a thread of
its own as they go: ``_deflate``), and keeps of the selected decisions only what the package names: their
``seq``, engines, images and policy revisions. Nothing is decoded or encoded twice, and no list of records
is held: a log of any size costs the memory of one record, the chunks waiting to be deflated and the sums.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from decisionlog import ChainReport, DataSink
from trtguard.audit.package._deflate import Deflated, DeflatingSpool
from trtguard.audit.package.contents import ChainScope, record_line
from trtguard.audit.package.selection import Selection, artifacts_of
from verifier.base import VerificationError, is_sha256_hex


class RecordCollector(DataSink):
    """A ``ChainSink`` for the export of ``selection`` with ``chain``, its lines written to ``spool``.

    ``audit_engines`` are the engines carrying the audit ID of an audit-ID selection.
    """

    # The collector reads the records' JSON only: the chain check checks each row's types without building
    # its record (a third of the export's CPU), with the same errors.
    wants_records = False

    def __init__(
        self,
        selection: Selection,
        chain: ChainScope,
        spool: DeflatingSpool,
        audit_engines: Collection[str] = (),
    ) -> None:
        self._selection = selection
        self._chain = chain
        self._spool = spool
        self._matches = selection.data_matcher(audit_engines)
        #: The ``seq`` of every selected decision, in order.
        self.selected: list[int] = []
        #: Records written to the spool, and the first and last of them.
        self.records = 0
        self.first_seq = 0
        self.last_seq = 0
        #: Engine digest → the references naming it, in order of first appearance; the same for images.
        self.references: dict[str, list[str]] = {}
        self.image_references: dict[str, list[str]] = {}
        #: Engines named without a digest → the ``seq`` of the decisions naming them.
        self.undigested: dict[str, list[int]] = {}
        #: Selected decisions per policy revision.
        self.revisions: Counter[str | None] = Counter()
        #: ``(seq, hash)`` of the last record written.
        self._previous: tuple[int, str] | None = None
        self._artifacts = _Artifacts()

    def take(self, seq: int, prev_hash: str, hash_: str, data: Mapping[str, Any], canonical: bytes) -> None:
        """Take the next verified record (``DataSink``)."""
        chosen = self._matches(data)
        if chosen:
            self._choose(seq, data)
        keep = chosen if self._chain is ChainScope.SELECTED else bool(self.selected)
        if not (keep or self._chain is ChainScope.FULL):
            return
        previous = self._previous
        # A record links to the one before it, already checked, unless it is the first kept.
        linked = previous is not None and prev_hash == previous[1]
        if not (linked or is_sha256_hex(prev_hash)) or not is_sha256_hex(hash_):
            raise VerificationError(
                f"record seq {seq} links by a hash that is not SHA-256 hex",
                hint="the log was written by something other than trtguard; run `trtguard audit verify`",
            )
        if self._chain is not ChainScope.SELECTED and previous is not None and seq != previous[0] + 1:
            raise VerificationError(f"the log has no record between seq {previous[0]} and {seq}")
        self._spool.write(record_line(seq, prev_hash, hash_, canonical))
        self.records += 1
        self.first_seq = self.first_seq or seq
        self.last_seq = seq
        self._previous = (seq, hash_)

    def _choose(self, seq: int, data: Mapping[str, Any]) -> None:
        self.selected.append(seq)
        self.revisions[data["policy_revision"]] += 1
        (engines, images, undigested), merged = self._artifacts.of(data["engines"], data["images"])
        if not merged:  # the same entries merged before add nothing: each reference is kept once, in order
            for named, found_in in ((engines, self.references), (images, self.image_references)):
                for digest, reference in named.items():
                    known = found_in.setdefault(digest, [])
                    if reference not in known:
                        known.append(reference)
        for reference in undigested:
            self.undigested.setdefault(reference, []).append(seq)

    def member(self, report: ChainReport) -> Deflated:
        """``decisions/records.jsonl`` as spooled, after checking that it ends at the verified head."""
        if self._chain is not ChainScope.SELECTED and self.last_seq != report.head_seq:
            raise VerificationError(
                f"the records read end at seq {self.last_seq}, not at the verified head seq {report.head_seq}"
            )
        return self._spool.member()


class EngineNames(DataSink):
    """A ``ChainSink`` gathering the engines every record names (digest → a reference naming it): the engines
    whose build manifests an audit-ID selection looks in."""

    def __init__(self) -> None:
        self.named: dict[str, str] = {}

    def take(self, seq: int, prev_hash: str, hash_: str, data: Mapping[str, Any], canonical: bytes) -> None:
        """Take the next verified record (``DataSink``)."""
        for digest, reference in artifacts_of(data["engines"], ())[0].items():
            self.named[digest] = reference


class _Artifacts:
    """:func:`artifacts_of` of the engine and image lists of a pass's records, by the lists' identity.

    The records of one pass share their shared part's values (``decisionlog.DataSink``): a workload's
    decisions name the same lists again and again, one after the other. Only the last pair is kept, with its
    answer (so an ``id`` is not reused while remembered): lists of any size, and a row read whole has lists
    of its own, so keeping more would keep many records' lists (attack 39b F1: 256 records' lists, 2.3 GiB
    where one record's took 160 MiB). The answer also says whether it was handed out before (``merged``).
    """

    def __init__(self) -> None:
        self._last: tuple[object, object, tuple[Any, Any, Any]] | None = None

    def of(
        self, engines: Sequence[Mapping[str, Any]], images: Sequence[Mapping[str, Any]]
    ) -> tuple[tuple[dict[str, str], dict[str, str], list[str]], bool]:
        last = self._last
        if last is not None and last[0] is engines and last[1] is images:
            return last[2], True
        self._last = None  # the lists before go first: never two records' lists at once
        answer = artifacts_of(engines, images)
        self._last = (engines, images, answer)
        return answer, False
