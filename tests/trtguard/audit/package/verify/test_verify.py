"""trtguard/audit/package/verify: a good package verifies and says what it proves and what it does not; with
another key nothing is proven."""

from __future__ import annotations

from pathlib import Path

from tests.trtguard.audit.package.world import (
    World,
    messages,
    read_members,
    record_lines,
    signed_predicate,
    verify_package,
)
from trtguard.audit.package import verify_evidence_package
from trtguard.audit.package.contents import INDEX, RECORDS, SIGNATURE
from verifier.keys import generate_private_key


def test_workload_package_verifies_and_says_what_it_proves(world: World, resnet_package: Path) -> None:
    report = verify_package(world, resnet_package)
    assert report.ok, messages(report, "fail")
    members = read_members(resnet_package)
    fp16 = world.engine_digests["fp16"].replace(":", "-")
    assert {
        INDEX,
        SIGNATURE,
        RECORDS,
        "policies/policies/committee.yaml",
        "policies/policies/keys/alice.pub",
        "policies/shared-keys/gpu.pub",
        f"engines/{fp16}/build-manifest-1.dsse.json",
        f"engines/{fp16}/change-approval-1.dsse.json",
        f"engines/{fp16}/engine-verification-1.dsse.json",
        f"engines/{fp16}/signatures/1-cosign-sign-dsse.dsse.json",
    } <= set(members)
    # The segment runs from the first resnet decision to the head, other workloads' records included.
    assert [line["seq"] for line in record_lines(resnet_package)] == list(range(2, 10))
    assert signed_predicate(members)["selection"]["records"] == [2, 4, 6, 7]
    passed = "\n".join(messages(report, "pass"))
    assert "the 8 records from seq 2 to the exported head (seq 9) recompute and link without a gap" in passed
    assert "exactly the 4 selected match the rule" in passed
    assert "the included policy set is the one all 4 selected decisions were made under" in passed
    assert (
        "change-approval (by alice@example.com for audit ID DEMO-fp16: TensorRTMajorUpgrade) signed by "
        "committee/alice" in passed
    )
    assert "engine-verification (GPU check pass on NVIDIA H200) signed by committee/gpu" in passed
    assert "signed by platform/build-signer" in passed
    assert "signature engines/" in passed and "keys [committee/release]" in passed
    assert report.proves[0].startswith(
        f"The package is exactly as the holder of key {world.exporter.public_key().key_id[:16]}"
    )
    assert any("removed from the end of the log" in item for item in report.does_not_prove)
    assert any("records before seq 2" in item for item in report.does_not_prove)


def test_another_key_verifies_nothing(world: World, resnet_package: Path) -> None:
    report = verify_evidence_package(resnet_package, generate_private_key().public_key())
    assert not report.ok
    assert report.proves == ()
