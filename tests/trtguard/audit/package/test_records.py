"""trtguard/audit/package/_records.py: the collector taking each record as its JSON (``DataSink``) collects
what the collector of built records did (kept below as the reference), on varied logs: every selection kind
and chain scope, engines and images with and without digests, shared parts and whole bodies; and it collects
the same whether or not the chain check builds the records."""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decisionlog import DecisionRecord, SQLiteStore, StoredRecord
from trtguard.audit.package._records import EngineNames, RecordCollector
from trtguard.audit.package.contents import ChainScope, record_line
from trtguard.audit.package.selection import Selection, artifacts, engine_digests
from verifier.base._deadline import Deadline

DIGESTS = ["sha256:" + c * 64 for c in "abc"]


class _Spool:
    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, line: bytes) -> None:
        self.lines.append(line)


class _Reference:
    """The collector as it was before it took records as JSON (its ``__call__`` and ``_choose``)."""

    def __init__(self, selection: Selection, chain: ChainScope, audit_engines: Collection[str]) -> None:
        self._chain = chain
        self._matches = selection.matcher(audit_engines)
        self.selected: list[int] = []
        self.records = self.first_seq = self.last_seq = 0
        self.references: dict[str, list[str]] = {}
        self.image_references: dict[str, list[str]] = {}
        self.undigested: dict[str, list[int]] = {}
        self.revisions: Counter[str | None] = Counter()
        self.lines: list[bytes] = []
        self._previous: StoredRecord | None = None

    def __call__(self, stored: StoredRecord, canonical: bytes) -> None:
        chosen = self._matches(stored.record)
        if chosen:
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
        keep = chosen if self._chain is ChainScope.SELECTED else bool(self.selected)
        if not (keep or self._chain is ChainScope.FULL):
            return
        self.lines.append(record_line(stored.seq, stored.prev_hash, stored.hash, canonical))
        self.records += 1
        self.first_seq = self.first_seq or stored.seq
        self.last_seq = stored.seq
        self._previous = stored


_ENTRY = st.fixed_dictionaries(
    {
        "reference": st.sampled_from(
            ["registry.example.com/e:1", f"registry.example.com/e@{DIGESTS[0]}", f"r.example/x@{DIGESTS[1]}"]
        ),
        "digest": st.sampled_from([None, *DIGESTS, "sha256:short", 7]),
    },
    optional={"path": st.sampled_from(["spec.volumes[0]", "x" * 200]), "evidence": st.just({"k": [1, 2]})},
)
_RECORD = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["Deployment", "Pod", "Job"]),
        "api_version": st.sampled_from(["apps/v1", "extensions/v1beta1", "v1", "batch/v1"]),
        "namespace": st.sampled_from(["prod", "dev", None]),
        "name": st.sampled_from(["resnet", "bert", None]),
        "allowed": st.booleans(),
        "dry_run": st.booleans(),
        "policy_revision": st.sampled_from([None, "sha256:" + "d" * 64, "r2"]),
        "engines": st.lists(_ENTRY, max_size=3).map(tuple),
        "images": st.lists(_ENTRY, max_size=2).map(tuple),
    }
)
_SELECTIONS = [
    Selection.workload("prod/Deployment/resnet"),
    Selection.workload("prod/Pod/resnet"),
    Selection.workload("prod/resnet"),
    Selection.engine(DIGESTS[0]),
    Selection.engine(DIGESTS[1]),
    Selection("audit_id", "audit-1"),
]


async def _log(folder: Path, specs: list[dict[str, Any]]) -> SQLiteStore:
    store = SQLiteStore(folder / "d.db")
    await store.open()
    for n, spec in enumerate(specs):
        record = DecisionRecord(uid=f"u{n}", operation="CREATE", reason="r", **spec)
        await store.append(record, deadline=Deadline.after(5))
    await store.close()
    return store


def _collected(collector: RecordCollector | _Reference, lines: list[bytes]) -> tuple[object, ...]:
    return (
        collector.selected,
        collector.records,
        collector.first_seq,
        collector.last_seq,
        collector.references,
        collector.image_references,
        collector.undigested,
        collector.revisions,
        lines,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(_RECORD, min_size=1, max_size=12), audit=st.sampled_from([(), (DIGESTS[0],)]))
def test_the_collector_of_json_collects_what_the_collector_of_records_did(
    specs: list[dict[str, Any]], audit: tuple[str, ...]
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        store = asyncio.run(_log(Path(scratch), specs))
        for selection in _SELECTIONS:
            for chain in ChainScope:
                reference = _Reference(selection, chain, audit)
                asyncio.run(store.verify(reference))
                got = []
                for wants_records in (True, False):
                    spool = _Spool()
                    collector = RecordCollector(selection, chain, spool, audit)  # type: ignore[arg-type]
                    collector.wants_records = wants_records
                    report = asyncio.run(store.verify(collector))
                    assert report.ok, report.summary()
                    got.append(_collected(collector, spool.lines))
                assert got[0] == got[1] == _collected(reference, reference.lines), (selection, chain)
        names = EngineNames()
        asyncio.run(store.verify(names))
        expected: dict[str, str] = {}
        asyncio.run(store.verify(lambda stored, _: expected.update(engine_digests(stored.record))))
        assert names.named == expected
