"""trtguard/audit/package/_records.py: the export's verifying pass holds about one record's engine and image
lists, however many records name lists of their own (rows read whole: text beyond ASCII, attack 39b F1)."""

from __future__ import annotations

import asyncio
import tempfile
import tracemalloc
from pathlib import Path

from decisionlog import DecisionRecord, SQLiteStore
from trtguard.audit.package._records import RecordCollector
from trtguard.audit.package.contents import ChainScope
from trtguard.audit.package.selection import Selection
from verifier.base._deadline import Deadline

#: Records, and empty evidence objects in each one's image (and engine) entry.
RECORDS, EVIDENCE = 60, 4000


class _Spool:
    def write(self, line: bytes) -> None:
        pass


async def _peak(path: Path) -> int:
    """The peak of memory allocated during an export's verifying pass over a fresh log at ``path``."""
    store = SQLiteStore(path)
    await store.open()
    images = ({"reference": "nvcr.io/x:1", "evidence": [{}] * EVIDENCE},)
    for i in range(RECORDS):
        record = DecisionRecord(
            uid=f"u{i}",
            operation="CREATE",
            kind="Deployment",
            api_version="apps/v1",
            allowed=True,
            reason="ok",
            namespace="prod",
            name="a",
            message="see …",  # beyond ASCII: each row is read whole, its lists its own
            images=images,
            engines=images,
        )
        await store.append(record, deadline=Deadline.after(30))
    collector = RecordCollector(Selection.workload("prod/a"), ChainScope.SEGMENT, _Spool(), frozenset())  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        report = await store.verify(collector)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        await store.close()
    assert report.ok, report.summary()
    assert collector.selected == list(range(1, RECORDS + 1))
    return peak


def test_an_export_pass_holds_about_one_records_lists() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        peak = asyncio.run(_peak(Path(scratch) / "log.db"))
    # One record's two lists of EVIDENCE empty objects take about 0.6 MB as parsed; all of them, 36 MB.
    assert peak < 12 * 1024 * 1024, peak
