"""A month of a busy cluster's decisions through the SQLite decision log, with rotation and pruning.

Records are those the webhook's Reviewer writes for the demo material (an admitted FP16 Pod, an admitted
calibrated INT8 Pod, a denied uncalibrated INT8 Pod: evidence, signatures, change control), varied per
decision (uid, name, namespace, time). They are appended through a running ``SQLiteStore`` (its
group-commit writer and its checkpoints, --batch appends at a time) at decision times --rate per second
apart, about 997 workloads, each with its own image and engine digests that change every
--version-records; every --segment-records records the log is rotated as `trtguard audit rotate` does:
sealed (signed checkpoints), archived to a folder, and pruned down to the newest --keep-records.

A month at 10 decisions/s is 25.9 million records: by default a fraction (--records) is written and the
figures, all per record, are extrapolated to the month (printed as such). Printed: bytes per record (live
store, archive), the live store's size as the running store leaves it (file + WAL, largest seen and at the
end, before anything checkpoints it by hand) beside the pages in use, the time to verify the live log and one
archived segment.

Usage:  .venv/bin/python bench/decision_log_month.py [--records 200000] [--rate 10] [--segment-records 20000]
        [--keep-records 40000] [--batch 64] [--wal-limit-mib 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import sqlite3
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.evidence_export import _templates
from decisionlog import SQLiteStore
from decisionlog._archive import archive_segments, verify_segment
from decisionlog._record import DecisionRecord, canonical_json
from decisionlog._segments import Ledger
from decisionlog._wal import CHECKPOINT_INTERVAL, WAL_LIMIT_BYTES
from trtguard.demo.material import make_material
from verifier.base import Deadline
from verifier.crypto._keys import generate_private_key

MONTH_S = 30 * 86400
#: Workloads the decisions are about; each has its own images and engines, new every --version-records.
WORKLOADS = 997


def _own(entries: tuple[Mapping[str, Any], ...], workload: int, version: int) -> tuple[dict[str, Any], ...]:
    """``entries`` with digests of this workload's own version: evidence differs between workloads."""
    salt = f"{workload}/{version}"
    return tuple(
        {**e, "digest": "sha256:" + hashlib.sha256(f"{e.get('digest')}{salt}".encode()).hexdigest()}
        for e in entries
    )


def _on_disk(path: Path) -> int:
    """File bytes with its WAL, as they are now."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _used_bytes(path: Path) -> int:
    """Bytes of the pages in use (read without checkpointing: what a reader sees through the WAL)."""
    with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        pages, free, size = (
            conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("page_count", "freelist_count", "page_size")
        )
    return int((pages - free) * size)


def _rotate(url: str, key: object, folder: Path, segment_records: int, keep_records: int) -> float:
    started = time.perf_counter()
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=segment_records, partial=False)  # type: ignore[arg-type]
        archive_segments(ledger, folder)
        ledger.prune(folder, keep_records=keep_records, keep_since=None)
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> None:
    asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="trtguard-bench-month-") as scratch:
        root = Path(scratch)
        material = make_material(root / "material")
        templates: list[DecisionRecord] = await _templates(material, root)
        sizes = [len(canonical_json(t.to_json())) for t in templates]
        print(f"record templates (canonical JSON bytes): {sizes}")
        log, folder = root / "decisions.db", root / "archive"
        url = f"sqlite:///{log}"
        key = generate_private_key()
        store = SQLiteStore(log, synchronous="normal", wal_limit_bytes=int(args.wal_limit_mib * 2**20))
        await store.open()
        largest = 0
        start = datetime(2026, 11, 1, tzinfo=UTC)
        step = timedelta(seconds=1 / args.rate)
        written = 0
        write_s = rotate_s = 0.0
        rotations = rotated_at = 0
        while written < args.records:
            batch = []
            for n in range(written, min(written + args.batch, args.records)):
                template = templates[n % len(templates)]
                workload = n % WORKLOADS
                batch.append(
                    dataclasses.replace(
                        template,
                        images=_own(template.images, workload, n // args.version_records),
                        engines=_own(template.engines, workload, n // args.version_records),
                        uid=f"bench-{n:09d}",
                        record_id=f"{n:032x}",
                        namespace=f"team-{n % 53}",
                        name=f"model-{workload}",
                        time=start + n * step,
                    )
                )
            t0 = time.perf_counter()
            await asyncio.gather(*(store.append(r, deadline=Deadline.after(60)) for r in batch))
            write_s += time.perf_counter() - t0
            written += len(batch)
            largest = max(largest, _on_disk(log))
            if written - rotated_at >= args.segment_records:
                # `audit rotate` beside the running webhook: another connection, the store goes on.
                rotate_s += await asyncio.to_thread(
                    _rotate, url, key, folder, args.segment_records, args.keep_records
                )
                rotations, rotated_at = rotations + 1, written
        await asyncio.sleep(2 * CHECKPOINT_INTERVAL)  # what the running store leaves once it is idle
        file_bytes, used_bytes = _on_disk(log), _used_bytes(log)
        size_metric = store.size_bytes
        live = await _verify(log)
        await store.close()
        closed_bytes = _on_disk(log)
        archives = sorted(folder.glob("*.jsonl.gz"))
        archive_bytes = sum(p.stat().st_size for p in archives)
        archived_records = int(archives[-1].name.split("-")[2].split(".")[0])  # the last one's last seq
        segment_report, check = verify_segment(archives[0], key=key.public_key())
        assert segment_report.ok and check.signature_ok
        live_records, live_s = live
        print(
            f"\nwrote {written:,} records ({written / args.rate / 3600:.1f} h at {args.rate}/s) in "
            f"{write_s:.1f} s ({written / write_s:,.0f} records/s), {rotations} rotations in {rotate_s:.1f} s"
        )
        per_live, per_archive = used_bytes / live_records, archive_bytes / archived_records
        print(f"live store: {live_records:,} records, pages in use {used_bytes / 2**20:.1f} MiB", end=" ")
        print(f"-> {per_live:,.0f} bytes/record (baseline)")
        print(
            f"  file + WAL as the running store leaves it: {file_bytes / 2**20:.1f} MiB "
            f"({file_bytes / used_bytes:.2f}x the pages), largest seen under load {largest / 2**20:.1f} MiB "
            f"({largest / used_bytes:.2f}x); trtguard_decision_log_size_bytes "
            f"{(size_metric or 0) / 2**20:.1f} MiB; after a clean stop {closed_bytes / 2**20:.1f} MiB"
        )
        print(f"archive: {len(archives)} segments, {archived_records:,} records,", end=" ")
        print(f"{archive_bytes / 2**20:.1f} MiB -> {per_archive:,.0f} bytes/record")
        print(f"verify live log: {live_s:.2f} s ({live_s / live_records * 1e6:.1f} us/record);", end=" ")
        print(f"one archived segment of {segment_report.records:,}: {check.seconds:.2f} s")
        month = args.rate * MONTH_S
        print(f"\nextrapolated to a month at {args.rate}/s ({month / 1e6:.1f} M records):")
        print(f"  archive per month: {month * per_archive / 2**30:.1f} GiB")
        for days in (1, 7):
            keep = args.rate * 86400 * days
            size, seconds = keep * per_live / 2**30, keep * live_s / live_records
            print(f"  live store keeping {days} day(s) ({keep / 1e6:.2f} M records):", end=" ")
            print(f"{size:.2f} GiB, verify {seconds:.0f} s")
        held = 2**30 / per_live
        print(f"  1 GiB of live store holds {held / 1e6:.2f} M records = {held / args.rate / 3600:.1f} h")


async def _verify(log: Path) -> tuple[int, float]:
    started = time.perf_counter()
    report = await SQLiteStore(log, read_only=True).verify()
    elapsed = time.perf_counter() - started
    if not report.ok:
        sys.exit(f"live log does not verify: {report.summary()}")
    return report.records, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=10.0, help="decisions per second, month average")
    parser.add_argument("--segment-records", type=int, default=20_000)
    parser.add_argument("--keep-records", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--wal-limit-mib",
        type=float,
        default=WAL_LIMIT_BYTES / 2**20,
        help="the store's WAL bound (a huge one plays the unbounded WAL of before issue 31)",
    )
    parser.add_argument(
        "--version-records",
        type=int,
        default=50_000,
        help="records after which every workload changes evidence",
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()
