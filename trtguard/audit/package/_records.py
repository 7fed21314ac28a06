"""The decision records of an export, read in the one pass that verifies the log, in bounded memory.

The store recomputes the whole chain once (``DecisionStore.verify``) and hands each record that checks, with
the canonical JSON its hash covers, to a :class:`RecordCollector`: it applies the selection rule, writes the
lines of ``decisions/records.jsonl`` that the chain scope keeps to a spool (hashed and deflated on a thread of
its own as they go: ``_deflate``), and keeps of the selected decisions only what the package names: their
``seq``, engines, images and policy revisions. Nothing is decoded or encoded twice, and no list of records
is held: a log of any size costs the memory of one record, the chunks waiting to be deflated and the sums.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from decisionlog import ChainReport, StoredRecord
from trtguard.audit.package._deflate import Deflated, DeflatingSpool
from trtguard.audit.package.contents import ChainScope, record_line
from trtguard.audit.package.selection import Selection, artifacts, engine_digests
from verifier.base import VerificationError, is_sha256_hex


class RecordCollector:
    """A ``ChainSink`` for the export of ``selection`` with ``chain``, its lines written to ``spool``.

    ``audit_engines`` are the engines carrying the audit ID of an audit-ID selection.
    """

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
        self._matches = selection.matcher(audit_engines)
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
        self._previous: StoredRecord | None = None

    def __call__(self, stored: StoredRecord, canonical: bytes) -> None:
        """Take the next verified record (``ChainSink``)."""
        chosen = self._matches(stored.record)
        if chosen:
            self._choose(stored)
        keep = chosen if self._chain is ChainScope.SELECTED else bool(self.selected)
        if not (keep or self._chain is ChainScope.FULL):
            return
        previous = self._previous
        # A record links to the one before it, already checked, unless it is the first kept.
        linked = previous is not None and stored.prev_hash == previous.hash
        if not (linked or is_sha256_hex(stored.prev_hash)) or not is_sha256_hex(stored.hash):
            raise VerificationError(
                f"record seq {stored.seq} links by a hash that is not SHA-256 hex",
                hint="the log was written by something other than trtguard; run `trtguard audit verify`",
            )
        if self._chain is not ChainScope.SELECTED and previous is not None and stored.seq != previous.seq + 1:
            raise VerificationError(f"the log has no record between seq {previous.seq} and {stored.seq}")
        line = record_line(stored.seq, stored.prev_hash, stored.hash, canonical)
        self._spool.write(line)
        self.records += 1
        self.first_seq = self.first_seq or stored.seq
        self.last_seq = stored.seq
        self._previous = stored

    def _choose(self, stored: StoredRecord) -> None:
        self.selected.append(stored.seq)
        self.revisions[stored.record.policy_revision] += 1
        engines, images, undigested = artifacts(stored.record)
        for named, found_in in ((engines, self.references), (images, self.image_references)):
            for digest, reference in named.items():
                known = found_in.setdefault(digest, [])
                if reference not in known:
                    known.append(reference)
        for reference in undigested:
            self.undigested.setdefault(reference, []).append(stored.seq)

    def member(self, report: ChainReport) -> Deflated:
        """``decisions/records.jsonl`` as spooled, after checking that it ends at the verified head."""
        if self._chain is not ChainScope.SELECTED and self.last_seq != report.head_seq:
            raise VerificationError(
                f"the records read end at seq {self.last_seq}, not at the verified head seq {report.head_seq}"
            )
        return self._spool.member()


class EngineNames:
    """A ``ChainSink`` gathering the engines every record names (digest → a reference naming it): the engines
    whose build manifests an audit-ID selection looks in."""

    def __init__(self) -> None:
        self.named: dict[str, str] = {}

    def __call__(self, stored: StoredRecord, canonical: bytes) -> None:
        """Take the next verified record (``ChainSink``)."""
        for digest, reference in engine_digests(stored.record).items():
            self.named[digest] = reference
