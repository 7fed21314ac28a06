"""trtguard/audit/package/verify/anchors.py: what the chain alone cannot show, checked against chain heads
recorded outside the package."""

from __future__ import annotations

import asyncio
from pathlib import Path

from decisionlog import RecordQuery, SQLiteStore, open_store
from tests.trtguard.audit.package.world import (
    World,
    export_package,
    messages,
    verify_package,
)
from trtguard.audit.package import Anchor, Selection


async def _truncated_copy(world: World, target: Path, keep: int) -> None:
    """A log whose last records were removed: the same records replayed, fewer of them. Its chain verifies."""
    source = open_store(world.url, read_only=True)
    await source.open()
    records = [stored.record for stored in await source.query(RecordQuery(limit=keep))]
    copy = SQLiteStore(target)
    await copy.open()
    from verifier.base._deadline import Deadline  # noqa: PLC0415

    for record in records:
        await copy.append(record, deadline=Deadline.after(5))
    await copy.close()
    assert (await open_store(f"sqlite:///{target}", read_only=True).verify()).ok


def _head(world: World) -> Anchor:
    report = asyncio.run(open_store(world.url, read_only=True).verify())
    return Anchor(report.head_seq, report.head_hash)


def test_an_anchor_inside_the_chain_is_checked(world: World, resnet_package: Path) -> None:
    head = _head(world)
    report = verify_package(world, resnet_package, anchors=[head])
    assert report.ok
    assert "anchors: anchor seq 9 matches: the log agreed with your record there" in messages(report, "pass")
    wrong = verify_package(world, resnet_package, anchors=[Anchor(7, "0" * 64)])
    assert any("anchor seq 7: the package's record hashes to" in m for m in messages(wrong, "fail"))
    before = verify_package(world, resnet_package, anchors=[Anchor(1, head.hash)])
    assert any("anchor seq 1 cannot be checked" in m for m in messages(before, "fail"))


def test_a_truncated_log_verifies_on_its_own_but_not_against_an_anchor(world: World, tmp_path: Path) -> None:
    anchor = _head(world)
    truncated = World(**{**world.__dict__, "log": tmp_path / "truncated.db"})
    asyncio.run(_truncated_copy(world, truncated.log, keep=7))
    output = tmp_path / "truncated.tar.gz"
    asyncio.run(export_package(truncated, Selection.workload("prod/resnet"), output))
    assert verify_package(truncated, output).ok  # the limit the package documents
    report = verify_package(truncated, output, anchors=[anchor])
    [failure] = messages(report, "fail")
    assert "anchor seq 9 lies beyond the log head at export (seq 7" in failure
    assert "records were removed from the end of the log" in failure
