"""trtguard/audit/package/verify/decisions.py: a changed decision fails its chain hash even when the package
is signed again; a decision removed from the middle breaks the chain; a line holding a key twice fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.trtguard.audit.package.world import (
    World,
    edit_record,
    messages,
    record_lines,
    reseal,
    verify_package,
)
from trtguard.audit.package.contents import RECORDS


def test_a_changed_decision_fails_its_chain_hash_even_when_signed_again(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    tampered = reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, edit_record(4, "allowed", True))
    report = verify_package(world, tampered)
    assert "decisions: record seq 4 does not recompute to its hash: its content was changed" in messages(
        report, "fail"
    )


def test_a_decision_removed_from_the_middle_breaks_the_chain(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    def remove(files: dict[str, bytes], predicate: dict[str, Any]) -> None:
        kept = [raw for raw in files[RECORDS].splitlines() if json.loads(raw)["seq"] != 4]
        files[RECORDS] = b"\n".join(kept) + b"\n"
        predicate["selection"]["records"] = [2, 6, 7]
        predicate["log"]["records"] -= 1
        predicate["policy"]["decision_revisions"][0]["decisions"] -= 1

    report = verify_package(world, reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, remove))
    assert "decisions: records are missing from the segment chain: seq 4..4" in messages(report, "fail")


def test_a_decision_holding_a_key_twice_fails_even_when_its_hash_recomputes(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    """Attack 39a F3: the exporter (holding the key) ships a line whose last ``allowed`` is the hashed one
    and whose first says otherwise: Python's json (last wins) recomputed the hash and nothing failed."""

    def duplicate(files: dict[str, bytes], _: dict[str, Any]) -> None:
        lines = files[RECORDS].splitlines(keepends=True)
        at = next(i for i, raw in enumerate(lines) if json.loads(raw)["seq"] == 4)
        allowed = json.loads(lines[at])["record"]["allowed"]
        first = b'"record": {"allowed":%s,' % (b"false" if allowed else b"true")
        assert b'"record": {"allowed":' in lines[at]
        lines[at] = lines[at].replace(b'"record": {', first, 1)
        files[RECORDS] = b"".join(lines)

    report = verify_package(world, reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, duplicate))
    failures = messages(report, "fail")
    number = next(i for i, line in enumerate(record_lines(resnet_package), start=1) if line["seq"] == 4)
    assert failures == [
        f"decisions: {RECORDS}:{number}: record seq 4 holds the key 'allowed' twice in one object (JSON "
        "readers differ on which value counts): it is not the line exported"
    ], failures
