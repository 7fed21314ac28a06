"""The engines or images of an evidence package against those its selected decisions name: each listed once,
each named one present."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol, TypeVar

from decisionlog import DecisionRecord
from trtguard.audit.package.verify.decisions import RecordLine
from trtguard.audit.package.verify.findings import Findings, listed


class _Listed(Protocol):
    """An engine or image entry of the package's index."""

    @property
    def digest(self) -> str: ...


_Entry = TypeVar("_Entry", bound=_Listed)


def named_by_selection(
    lines: Iterable[RecordLine], chosen: set[int], digests: Callable[[DecisionRecord], Iterable[str]]
) -> dict[str, list[int]]:
    """``digest → seqs`` of the selected (``chosen``) records that name it, as ``digests`` reads a record."""
    named: dict[str, list[int]] = {}
    for line in lines:
        if line.seq in chosen:
            for digest in digests(line.record):
                named.setdefault(digest, []).append(line.seq)
    return named


def package_entries(
    topic: Literal["engines", "images"],
    entries: Sequence[_Entry],
    named: dict[str, list[int]],
    findings: Findings,
    *,
    missing: str,
) -> dict[str, _Entry]:
    """The package's ``entries`` by digest; fails an entry listed twice and each named digest with none
    (``missing``: the likely reason, in the message)."""
    noun = topic.removesuffix("s")
    by_digest: dict[str, _Entry] = {}
    for entry in entries:
        if entry.digest in by_digest:
            findings.fail(topic, f"{noun} {entry.digest} is listed twice")
        by_digest[entry.digest] = entry
    for digest, seqs in sorted(named.items()):
        if digest not in by_digest:
            findings.fail(
                topic,
                f"{noun} {digest}, named by decisions seq {listed(map(str, seqs))}, is not in the package"
                f" ({missing})",
            )
    return by_digest
