"""trtguard/audit/report/_view.py (with decisions.py and engines.py): what a report shows of a real package,
and that a package failing verification shows nothing of its contents."""

from __future__ import annotations

from pathlib import Path

from tests.trtguard.audit.package.world import World
from trtguard.audit.report import build_view
from verifier.crypto._keys import generate_private_key


def test_a_verified_package_shows_its_timeline_engines_denials_and_chain(
    world: World, resnet_package: Path
) -> None:
    view = build_view(resnet_package, world.exporter.public_key())

    assert view.verified
    contents = view.contents
    assert contents is not None
    decisions = contents.decisions
    # seq 2 created prod/resnet with the fp16 engine and the TensorRT image; seq 7 moved it to INT8.
    assert [(a.seq, a.operation, a.workload) for a in decisions.admissions] == [
        (2, "CREATE", "prod/Pod/resnet"),
        (7, "UPDATE", "prod/Pod/resnet"),
    ]
    first, update = decisions.admissions
    assert {(c.artifact, c.old is None) for c in first.changes} == {("engine", True), ("image", True)}
    (engine_change,) = update.changes
    assert engine_change.old == world.material.engines["fp16"]
    assert engine_change.new == world.material.engines["int8-calibrated"]
    assert engine_change.audit_ids == ("DEMO-int8-calibrated",)
    assert engine_change.signers == ("platform/build-signer",)
    assert first.requester == "kubernetes-admin"
    # The one denial of prod/resnet (seq 4, INT8 without calibration) is selected; other workloads' denials
    # in the carried segment would be listed as not selected.
    assert [(d.seq, d.selected, d.reason) for d in decisions.denials] == [(4, True, "PolicyViolation")]
    assert "no calibration evidence" in decisions.denials[0].violations[0].message
    assert [link.seq for link in decisions.chain] == list(range(2, 10))
    assert [link.seq for link in decisions.chain if link.selected] == [2, 4, 6, 7]

    # Engines in the order they were first admitted; the denied one last.
    digests = [engine.digest for engine in contents.engines]
    assert digests == [world.engine_digests[n] for n in ("fp16", "int8-calibrated", "int8-uncalibrated")]
    fp16 = contents.engines[0]
    assert (fp16.version, fp16.first_admitted, fp16.signatures) == (1, 2, 1)
    (build,) = fp16.builds
    assert build.manifest.audit_id == "DEMO-fp16"
    assert build.precisions == ["fp16"]
    (verification,) = fp16.verifications
    assert (verification.result, verification.gpu.gpu_name) == ("pass", "NVIDIA H200")
    (approval,) = fp16.approvals
    assert approval.approver == "alice@example.com"
    calibrated = contents.engines[1].builds[0].manifest.calibration
    assert calibrated is not None and calibrated.dataset is not None
    assert contents.chart_svg is not None and contents.chart_svg.startswith("<svg")
    assert any(f.path.endswith("committee.yaml") for f in contents.policy_files)


def test_a_tampered_package_shows_its_failures_and_no_contents(world: World, tampered_package: Path) -> None:
    view = build_view(tampered_package, world.exporter.public_key())

    assert not view.verified
    assert view.contents is None
    assert any("hash" in f.message or "SHA-256" in f.message for f in view.verification.failures)


def test_the_wrong_key_fails_the_package(resnet_package: Path) -> None:
    view = build_view(resnet_package, generate_private_key().public_key())

    assert not view.verified
    assert view.contents is None
