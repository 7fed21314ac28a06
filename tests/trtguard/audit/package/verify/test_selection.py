"""trtguard/audit/package/verify/selection.py: a decision left out of the selection is found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.trtguard.audit.package.world import (
    World,
    messages,
    reseal,
    verify_package,
)


def test_a_decision_left_out_of_the_selection_is_found(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    def drop(files: dict[str, bytes], predicate: dict[str, Any]) -> None:
        predicate["selection"]["records"] = [2, 6, 7]
        predicate["policy"]["decision_revisions"][0]["decisions"] -= 1

    report = verify_package(world, reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, drop))
    assert "selection: decisions that match the rule were left out: seq 4" in messages(report, "fail")
