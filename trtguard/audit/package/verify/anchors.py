"""Chain heads recorded outside an evidence package (``--anchor SEQ:HASH``), checked against its records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trtguard.audit.package.contents import EvidencePackagePredicate
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings
from verifier.base import InputError, is_sha256_hex


@dataclass(frozen=True, slots=True)
class Anchor:
    """A chain head recorded independently of the package (``SEQ:HASH``), e.g. from ``audit verify``."""

    seq: int
    hash: str

    @classmethod
    def parse(cls, text: str) -> Anchor:
        """``SEQ:HASH`` with a positive seq and a 64-hex hash; raises :class:`InputError` otherwise."""
        seq, _, digest = text.partition(":")
        if not seq.isdigit() or int(seq) < 1 or not is_sha256_hex(digest):
            raise InputError(
                f"anchor {text!r} is not SEQ:HASH",
                location="--anchor",
                hint="e.g. 1042:<64 hex>: head_seq and head_hash of `trtguard audit verify --format json`",
            )
        return cls(int(seq), digest)


def check_anchors(
    predicate: EvidencePackagePredicate,
    lines: list[RecordLine],
    anchors: Sequence[Anchor],
    findings: Findings,
) -> None:
    """Each anchor against the package's record of the same seq."""
    by_seq = {line.seq: line for line in lines}
    head = predicate.log.report.head_seq
    for anchor in anchors:
        line = by_seq.get(anchor.seq)
        if line is not None and line.hash == anchor.hash:
            findings.ok("anchors", f"anchor seq {anchor.seq} matches: the log agreed with your record there")
        elif line is not None:
            findings.fail(
                "anchors",
                f"anchor seq {anchor.seq}: the package's record hashes to {line.hash[:16]}…, your anchor "
                f"says {anchor.hash[:16]}…: the log was rewritten, or the anchor comes from another log",
            )
        elif anchor.seq > head:
            findings.fail(
                "anchors",
                f"anchor seq {anchor.seq} lies beyond the log head at export (seq {head}, "
                f"{predicate.exported_at.isoformat()}): if it was taken before the export, records were "
                "removed from the end of the log",
            )
        else:
            findings.fail(
                "anchors",
                f"anchor seq {anchor.seq} cannot be checked: the package does not carry that record "
                "(export with --chain full to check anchors anywhere in the log)",
            )
