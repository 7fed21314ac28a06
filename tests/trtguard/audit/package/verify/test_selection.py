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
from trtguard.audit.package import Selection


def test_a_decision_left_out_of_the_selection_is_found(
    world: World, resnet_package: Path, tmp_path: Path
) -> None:
    def drop(files: dict[str, bytes], predicate: dict[str, Any]) -> None:
        predicate["selection"]["records"] = [2, 6, 7]
        predicate["policy"]["decision_revisions"][0]["decisions"] -= 1

    report = verify_package(world, reseal(resnet_package, tmp_path / "t.tar.gz", world.exporter, drop))
    assert "selection: decisions that match the rule were left out: seq 4" in messages(report, "fail")


def test_a_workload_selection_names_its_api_group_and_kind() -> None:
    """``NAMESPACE/KIND/NAME`` selects one workload (a Volcano Job is not batch/v1's Job of the same name,
    whatever the version); ``NAMESPACE/NAME``, as packages exported before kept it, any kind of that name."""
    from decisionlog import DecisionRecord  # noqa: PLC0415

    def job(api_version: str) -> DecisionRecord:
        return DecisionRecord(
            uid="u", operation="CREATE", kind="Job", api_version=api_version, allowed=True, reason="Allowed",
            namespace="prod", name="train",
        )  # fmt: skip

    batch, batch_v2, volcano = job("batch/v1"), job("batch/v2"), job("batch.volcano.sh/v1alpha1")
    one = Selection.workload("prod/Job/train")
    assert one.value == "prod/Job.batch/train" and one.identity is not None
    assert [one.matches(r) for r in (batch, batch_v2, volcano)] == [True, True, False]
    assert one.rule() == "every decision about workload prod/Job.batch/train (verdict or dry run)"
    legacy = Selection.workload("prod/train")
    assert legacy.identity is None and all(legacy.matches(r) for r in (batch, volcano))
    assert "(any kind, verdict or dry run)" in legacy.rule()
