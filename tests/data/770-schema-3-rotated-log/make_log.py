"""Writes this folder with trtguard as of commit 1a4e483 (schema 3, checkpoints v2, the carried state keyed by
namespace, kind and name), which it must be run against:

    git archive 1a4e483 | tar -x -C /tmp/trtguard-1a4e483
    PYTHONPATH=/tmp/trtguard-1a4e483 TRTGUARD_PASSWORD='schema 3' .venv/bin/python make_log.py FOLDER

A `batch/v1` Job and a Volcano Job (`batch.volcano.sh`), both `prod/train`, are admitted with engines, then
the log is rotated (segments of 2, nothing kept): both admissions were carried forward in one entry, whose
newest admission is the Volcano Job's. One live record (a denial) follows the pruned ones.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from decisionlog import DecisionRecord, Ledger, SQLiteStore, archive_segments
from verifier.base import Deadline
from verifier.keys import PrivateKey, encrypt_private_key, generate_private_key

START = datetime(2026, 11, 1, 9, tzinfo=UTC)
BATCH_ENGINE = "registry.example.com/models/train@sha256:" + "a1" * 32
VOLCANO_ENGINE = "registry.example.com/models/train-volcano@sha256:" + "b2" * 32


def record(n: int, api_version: str, engine: str | None, *, allowed: bool = True) -> DecisionRecord:
    engines = (
        (
            {
                "reference": engine,
                "digest": engine.split("@")[1],
                "path": "spec.template.spec.volumes[0]",
                "name": "engine",
                "containers": ["trainer"],
            },
        )
        if engine
        else ()
    )
    return DecisionRecord(
        uid=f"schema-3-{n}",
        operation="CREATE",
        kind="Job",
        api_version=api_version,
        allowed=allowed,
        reason="Allowed" if allowed else "PolicyViolation",
        namespace="prod",
        name="train",
        engines=engines,
        time=START + timedelta(minutes=n),
        record_id=f"{n:032x}",
    )


async def main(folder: Path, key: PrivateKey) -> None:
    store = SQLiteStore(folder / "decisions.db")
    await store.open()
    for item in (
        record(1, "batch/v1", BATCH_ENGINE),
        record(2, "batch/v1", None),
        record(3, "batch.volcano.sh/v1alpha1", VOLCANO_ENGINE),
        record(4, "batch.volcano.sh/v1alpha1", None),
    ):
        await store.append(item, deadline=Deadline.after(5))
    await store.close()
    url = f"sqlite:///{folder / 'decisions.db'}"
    with Ledger.open(url) as ledger:
        ledger.seal(key, segment_records=2, partial=False)
        archive_segments(ledger, folder / "archive")
        ledger.prune(folder / "archive", keep_records=0, keep_since=None)
    store = SQLiteStore(folder / "decisions.db")
    await store.open()
    await store.append(record(5, "batch/v1", BATCH_ENGINE, allowed=False), deadline=Deadline.after(5))
    await store.close()


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=False)
    checkpoint_key = generate_private_key()
    (target / "checkpoint.key").write_bytes(encrypt_private_key(checkpoint_key, b"schema 3"))
    (target / "checkpoint.pub").write_bytes(checkpoint_key.public_key().to_pem())
    asyncio.run(main(target, checkpoint_key))
