"""verifier/engine/_attest.py: the signed engine-verification attestation of a report."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.verifier.engine.helpers import answer, engine_facts, gpu_manifest
from verifier.attestations import ENGINE_VERIFICATION_PREDICATE_TYPE, load_verification
from verifier.base._errors import VerificationError
from verifier.crypto._dsse import verify_envelope
from verifier.crypto._intoto import statement_from_envelope
from verifier.crypto._keys import generate_private_key
from verifier.engine import EngineReport, GpuOptions, sign_verification, verification_predicate

MNIST = "sampleMNIST.trt10.5.0.18.engine"


def test_signed_attestation_of_a_passing_report(
    plans_dir: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, gpu_manifest(engine), gpu=fake_gpu(answer(engine=engine_facts())))
    assert report.ok
    key = generate_private_key()
    when = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    envelope = sign_verification(report, key, verified_at=when)

    assert verify_envelope(envelope, {"gpu-verifier": key.public_key()}) == ("gpu-verifier",)
    statement = statement_from_envelope(envelope)
    assert statement.predicate_type == ENGINE_VERIFICATION_PREDICATE_TYPE
    assert statement.subject_digests() == {f"sha256:{report.sha256}"}
    predicate = load_verification(statement, "attestation")
    assert predicate.result == "pass"
    assert predicate.verified_at == when
    assert predicate.engine.size == report.size
    assert predicate.manifest_digest == report.manifest.digest  # type: ignore[union-attr]
    assert predicate.runtime.module == "tensorrt_lean"  # tensorrt_lean_bindings is the lean runtime
    assert predicate.runtime.tensorrt_version == "11.4.0.106"
    assert predicate.runtime.plan_tensorrt_version == "10.5.0.18"
    assert predicate.gpu.gpu_name == "NVIDIA H200"
    assert [(t.name, t.mode, t.dtype) for t in predicate.io_tensors] == [
        ("images", "input", "float32"),
        ("logits", "output", "float32"),
    ]
    assert predicate.optimization_profiles[0].inputs["images"].max == [8, 3, 8, 8]
    assert predicate.layer_precisions is None  # lean: no inspector
    by_field = {check.field: check for check in predicate.checks}
    assert by_field["output_engine.sha256"].status == "pass"
    # A skip travels as not_checked, with its reason: never as a pass.
    assert by_field["builder_config.layer_precisions"].status == "not_checked"
    assert "EngineInspector" in (by_field["builder_config.layer_precisions"].detail or "")


def test_failing_report_is_attested_as_fail(
    plans_dir: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, gpu_manifest(engine), gpu=fake_gpu(answer(engine=engine_facts(images_max=64))))
    predicate = verification_predicate(report)
    assert predicate.result == "fail"
    failed = [check.field for check in predicate.checks if check.status == "fail"]
    assert failed == ["builder_config.optimization_profiles"]


def test_deserialization_failure_is_attestable(
    plans_dir: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine = plans_dir / MNIST
    log = [{"severity": "ERROR", "message": "Error Code 1: Serialization (boom)"}]
    canned = answer("deserialize_failed", log=log, message_="Error Code 1: Serialization (boom)")
    predicate = verification_predicate(verify(engine, gpu_manifest(engine), gpu=fake_gpu(canned)))
    assert predicate.result == "fail"
    assert predicate.io_tensors == []


def test_nothing_to_attest_without_a_gpu_observation(
    plans_dir: Path, verify: Callable[..., EngineReport]
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, gpu_manifest(engine))  # no --gpu
    with pytest.raises(VerificationError, match="nothing to attest") as caught:
        verification_predicate(report)
    assert caught.value.hint


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda a: a["gpu"].update(driver_version=None), "did not report the driver version"),
        (lambda a: a["gpu"].update(name=None, compute_capability=None), "GPU name, compute capability"),
        (lambda a: a["runtime"].update(module="tensorrt_rtx"), "runtime flavour (module 'tensorrt_rtx')"),
        (lambda a: a["gpu"].update(compute_capability="sm_90"), "GPU facts that are not valid"),
    ],
    ids=["driver", "gpu", "module", "invalid"],
)
def test_unknown_gpu_facts_are_never_attested(
    plans_dir: Path,
    verify: Callable[..., EngineReport],
    fake_gpu: Callable[..., GpuOptions],
    change: Callable[[dict[str, Any]], None],
    reason: str,
) -> None:
    # Filling in "unknown" or a default module would sign a claim nobody observed.
    engine = plans_dir / MNIST
    canned = answer(engine=engine_facts())
    change(canned)
    report = verify(engine, gpu_manifest(engine), gpu=fake_gpu(canned))
    with pytest.raises(VerificationError, match="cannot attest") as caught:
        verification_predicate(report)
    assert reason in caught.value.message
