"""trtguard/audit/package/verify/policy.py: a changed policy file no longer recomputes its revision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.trtguard.audit.package.world import (
    World,
    messages,
    reseal,
    verify_package,
)


def test_a_changed_policy_file_no_longer_recomputes_its_revision(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    def edit(files: dict[str, bytes], *_: Any) -> None:
        files["policies/policies/signed-images.yaml"] += b"\n# changed\n"

    report = verify_package(world, reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, edit))
    [failure] = messages(report, "fail")
    assert failure.startswith("policy: the included policy files recompute to revision sha256:")
