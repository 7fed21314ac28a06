"""The decisions in an evidence package and their hash chain: each record recomputes, links, is in scope."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from decisionlog import (
    GENESIS_HASH,
    DecisionLogError,
    DecisionRecord,
    canonical_of,
    duplicate_key,
    link_hash,
    load_json,
)
from trtguard.audit.package.contents import ChainScope, EvidencePackagePredicate, record_line
from trtguard.audit.package.verify.findings import LISTED, Findings, listed


@dataclass(frozen=True, slots=True)
class RecordLine:
    """One record of ``records.jsonl``."""

    seq: int
    prev_hash: str
    hash: str
    record: DecisionRecord


def check_decisions(
    predicate: EvidencePackagePredicate, members: Mapping[str, bytes], findings: Findings
) -> list[RecordLine]:
    """The readable records in seq order, after checking each one's hash, the links and the stated scope."""
    log = predicate.log
    data = members.get(log.file)
    if data is None:
        findings.fail("decisions", f"the decisions file {log.file} is not in the package")
        return []
    failures = len(findings.failures("decisions"))
    lines: list[RecordLine] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        line = _line(raw, f"{log.file}:{number}", findings)
        if line is None:
            continue
        if lines and line.seq <= lines[-1].seq:
            findings.fail("decisions", f"{log.file}:{number}: seq {line.seq} is out of order or repeated")
            continue
        lines.append(line)
    if not lines:
        findings.fail("decisions", f"{log.file} holds no decision record")
        return lines
    gaps: list[tuple[int, int]] = []
    for before, after in itertools.pairwise(lines):
        if after.seq != before.seq + 1:
            gaps.append((before.seq, after.seq))
        elif after.prev_hash != before.hash:
            findings.fail("decisions", f"record seq {after.seq} does not link to seq {before.seq}")
    head = log.report
    if not head.ok:
        findings.fail("decisions", "the exporter's own check of the decision log failed")
    if log.chain is not ChainScope.SELECTED:
        if gaps:
            shown = ", ".join(f"{a + 1}..{b - 1}" for a, b in gaps[:LISTED])
            findings.fail("decisions", f"records are missing from the {log.chain} chain: seq {shown}")
        if (lines[-1].seq, lines[-1].hash) != (head.head_seq, head.head_hash):
            findings.fail("decisions", f"the chain ends at seq {lines[-1].seq}, not at the exported head")
    elif lines[-1].seq > head.head_seq:
        findings.fail("decisions", f"record seq {lines[-1].seq} lies beyond the exported head")
    if log.chain is ChainScope.FULL and (lines[0].seq, lines[0].prev_hash) != (1, GENESIS_HASH):
        findings.fail("decisions", "the full chain does not start at the genesis record (seq 1)")
    if (lines[0].seq, lines[-1].seq, len(lines)) != (log.first_seq, log.last_seq, log.records):
        findings.fail("decisions", f"{log.file} does not hold the seq range and count the package states")
    present = {line.seq for line in lines}
    absent = [seq for seq in predicate.selection.records if seq not in present]
    if absent:
        findings.fail("decisions", f"selected decisions not in {log.file}: seq {listed(map(str, absent))}")
    if len(set(predicate.selection.records)) != len(predicate.selection.records):
        findings.fail("decisions", "the selection lists a decision twice")
    if len(findings.failures("decisions")) == failures:
        findings.ok("decisions", _chain_statement(predicate, lines, gaps))
    return lines


def _line(raw: bytes, where: str, findings: Findings) -> RecordLine | None:
    try:
        # The parser tells whether the record can be canonicalised without walking it (canonical_of).
        data, plain = load_json(raw)
        seq, prev_hash, digest, body = data["seq"], data["prev_hash"], data["hash"], data["record"]
        if not (
            isinstance(seq, int)
            and not isinstance(seq, bool)
            and isinstance(prev_hash, str)
            and isinstance(digest, str)
            and isinstance(body, dict)
        ):
            raise TypeError("a field has the wrong type")
        canonical = canonical_of(body, plain)
        recomputed = link_hash(prev_hash, canonical)
        record = DecisionRecord.from_json(body)
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        findings.fail("decisions", f"{where}: not a decision record line ({type(error).__name__}: {error})")
        return None
    except DecisionLogError as error:
        findings.fail("decisions", f"{where}: {error.message}")
        return None
    if raw != record_line(seq, prev_hash, digest, canonical)[:-1] and (key := duplicate_key(raw)) is not None:
        # Not as exported (record_line), and read otherwise by a reader that takes another copy of the key:
        # kept in the chain, as below, so that this one change is not also reported as a gap.
        findings.fail(
            "decisions",
            f"{where}: record seq {seq} holds the key {key!r} twice in one object (JSON readers differ on "
            "which value counts): it is not the line exported",
        )
    elif recomputed != digest:
        # Kept in the chain under its stated hash, so that this one change is not also reported as a gap.
        findings.fail(
            "decisions", f"record seq {seq} does not recompute to its hash: its content was changed"
        )
    return RecordLine(seq, prev_hash, digest, record)


def _chain_statement(
    predicate: EvidencePackagePredicate, lines: list[RecordLine], gaps: list[tuple[int, int]]
) -> str:
    count, first, last = len(lines), lines[0].seq, lines[-1].seq
    selected = len(predicate.selection.records)
    if predicate.log.chain is ChainScope.SELECTED:
        return (
            f"each of the {count} selected records recomputes to its stored hash; "
            f"{count - 1 - len(gaps)} links between adjacent records hold, {len(gaps)} gaps are not shown"
        )
    start = "the genesis record" if predicate.log.chain is ChainScope.FULL else f"seq {first}"
    return (
        f"the {count} records from {start} to the exported head (seq {last}) recompute and link without "
        f"a gap; the {selected} selected decisions are among them"
    )
