"""Whether the hash chain vouches for the records an audit command prints.

``trtguard audit query``, ``tail`` and ``history`` print records read from the log; before they are trusted,
the whole chain is recomputed (:meth:`DecisionStore.verify`: every hash, link and indexed column, and the
chain head) and each printed record is checked against it:

* its body recomputes to its stored hash and is stored as exactly the canonical JSON that hash covers (what
  is printed is what was hashed, even if the row changed after the chain was checked), and
* it lies before the first break of the chain and at or before the head that was checked.

A record that fails either is *unverified*: the commands still print it (an investigator needs to see it)
but mark it, warn on standard error and exit 1. Records after a break are all unverified: from there on,
whoever changed one record could have rewritten every later one with matching hashes.
"""

from __future__ import annotations

from dataclasses import dataclass

from decisionlog import GENESIS_HASH, ChainReport, DecisionStore, StoredRecord, chain_hash, stored_exact


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """The chain as recomputed for one command (``report`` None: not checked, on request)."""

    report: ChainReport | None

    def intact(self, stored: StoredRecord) -> bool | None:
        """True when the chain vouches for ``stored``; None when the chain was not checked."""
        report = self.report
        if report is None:
            return None
        if report.first_break is not None and stored.seq >= report.first_break.seq:
            return False
        if stored.seq > report.head_seq:
            return False
        return linked(stored, None)

    def warning(self, unverified: int) -> str | None:
        """What to say on standard error: a broken chain, records it does not vouch for, or no check."""
        report = self.report
        if report is None:
            return "the hash chain was not checked (--no-verify): the records printed may have been changed"
        if report.first_break is not None:
            brk = report.first_break
            return (
                f"THE DECISION LOG'S HASH CHAIN IS BROKEN at seq {brk.seq}: {brk.problem}. Records from seq "
                f"{brk.seq} on may have been changed; {unverified} printed record(s) are marked UNVERIFIED "
                "(`trtguard audit verify` for details)"
            )
        if unverified:
            return (
                f"{unverified} printed record(s) do not recompute to their stored hash and are marked "
                "UNVERIFIED: the log changed while it was read; run the command again"
            )
        return None


def linked(stored: StoredRecord, previous: StoredRecord | None) -> bool:
    """``stored`` recomputes to its hash, was read from the canonical JSON that hash covers (as the chain
    check requires: a key twice reads otherwise elsewhere) and, given the record before it, links to that
    one."""
    if chain_hash(stored.prev_hash, stored.record.to_json()) != stored.hash or stored_exact(stored) is False:
        return False
    return previous is None or (stored.seq == previous.seq + 1 and stored.prev_hash == previous.hash)


def follows(stored: StoredRecord, previous: StoredRecord | None) -> bool:
    """``stored``, read after ``previous`` (None: nothing read before), recomputes and links to it; the first
    record of a log links to the genesis hash."""
    if previous is None and stored.seq == 1 and stored.prev_hash != GENESIS_HASH:
        return False
    return linked(stored, previous)


async def check_chain(store: DecisionStore, *, verify: bool = True) -> ChainCheck:
    """Recompute the whole chain of ``store`` (nothing, without ``verify``)."""
    return ChainCheck(await store.verify() if verify else None)
