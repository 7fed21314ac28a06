"""verifier/engine/checks/gpu.py: what TensorRT reported, driven by a fake child's canned answers: an answer
that matches, each disagreement, layer precisions from the inspector, settings no engine records, a refusal
and a machine without a GPU."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.verifier.engine.helpers import (
    MNIST,
    answer,
    engine_facts,
    gpu_manifest,
    message,
    status,
    write_model,
)
from verifier.engine import CheckStatus, EngineReport, GpuOptions


def test_gpu_answer_that_matches(
    plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx")
    report = verify(
        engine, gpu_manifest(engine, model), onnx=model, gpu=fake_gpu(answer(engine=engine_facts()))
    )
    for check in (
        "gpu.device",
        "gpu.runtime",
        "gpu.deserialize",
        "builder_config.optimization_profiles",
        "builder_config.hardware_compatibility_level",
        "build_node.compute_capability",
        "builder_config.version_compatible",
        "onnx.io_tensors",
        "builder_config.io_precisions",
    ):
        assert status(report, check) is CheckStatus.PASS, (check, report.render_text())
    assert status(report, "builder_config.layer_precisions") is CheckStatus.SKIPPED
    assert "no EngineInspector" in message(report, "builder_config.layer_precisions")
    assert report.ok
    assert "NVIDIA H200" in report.render_text()


@pytest.mark.parametrize(
    ("facts", "changes", "check", "text"),
    [
        (
            engine_facts(images_max=16),
            {},
            "builder_config.optimization_profiles",
            "max is [16, 3, 8, 8] in the engine",
        ),
        (engine_facts(profiles=2), {}, "builder_config.optimization_profiles", "has 2 optimization profiles"),
        (
            engine_facts(),
            {"builder_config.optimization_profiles": []},
            "builder_config.optimization_profiles",
            "declares no optimization profile",
        ),
        (
            engine_facts(level="AMPERE_PLUS"),
            {},
            "builder_config.hardware_compatibility_level",
            "built with ampere_plus",
        ),
        (
            engine_facts(),
            {"build_node.compute_capability": "8.0"},
            "build_node.compute_capability",
            "the manifest says 8.0",
        ),
        (
            engine_facts(),
            {"builder_config.version_compatible": False},
            "builder_config.version_compatible",
            "the manifest says it is not",
        ),
        (engine_facts(logits_dtype="HALF"), {}, "onnx.io_tensors", "'logits' is float16 in the engine"),
        (engine_facts(images_dtype="BF16"), {}, "builder_config.io_precisions", "['bf16']"),
    ],
)
def test_gpu_disagreements(
    plans_dir: Path,
    tmp_path: Path,
    verify: Callable[..., EngineReport],
    fake_gpu: Callable[..., GpuOptions],
    facts: dict[str, Any],
    changes: dict[str, Any],
    check: str,
    text: str,
) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx")
    report = verify(
        engine, gpu_manifest(engine, model, changes), onnx=model, gpu=fake_gpu(answer(engine=facts))
    )
    assert status(report, check) is CheckStatus.FAIL, report.render_text()
    assert text in message(report, check)
    assert not report.ok


def _inspector(layers: list[Any]) -> dict[str, Any]:
    return {"available": True, "reason": None, "information": json.dumps({"Layers": layers})}


def test_layer_precisions_from_a_detailed_inspector(
    plans_dir: Path,
    shared_fixtures: Path,
    verify: Callable[..., EngineReport],
    fake_gpu: Callable[..., GpuOptions],
) -> None:
    engine = plans_dir / MNIST
    graph = shared_fixtures / "tensorrt" / "inspector" / "resnet50-A100-qat-int8.engine.graph.json"
    inspector = {"available": True, "reason": None, "information": graph.read_text()}
    canned = answer(engine=engine_facts(), module="tensorrt", inspector=inspector)
    report = verify(engine, gpu_manifest(engine), gpu=fake_gpu(canned))
    assert status(report, "builder_config.layer_precisions") is CheckStatus.FAIL
    assert "['int8']" in message(report, "builder_config.layer_precisions")
    assert report.layer_precisions is not None and report.layer_precisions.per_precision["int8"] > 0
    # With int8 declared the same engine passes.
    manifest = gpu_manifest(engine, changes={"builder_config.precision_flags": ["fp16", "int8"]})
    report = verify(engine, manifest, gpu=fake_gpu(canned))
    assert status(report, "builder_config.layer_precisions") is CheckStatus.PASS
    # The full runtime cannot tell version compatibility: no such check.
    assert report.check("builder_config.version_compatible") is None


def test_layer_names_only_is_skipped(
    plans_dir: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine = plans_dir / MNIST
    canned = answer(engine=engine_facts(), module="tensorrt", inspector=_inspector(["conv", "fc"]))
    report = verify(engine, gpu_manifest(engine), gpu=fake_gpu(canned))
    assert status(report, "builder_config.layer_precisions") is CheckStatus.SKIPPED
    assert "DETAILED" in message(report, "builder_config.layer_precisions")


def test_unrecorded_builder_settings_are_named(
    plans_dir: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine = plans_dir / MNIST
    manifest = gpu_manifest(
        engine,
        changes={
            "builder_config.max_workspace_size": 1 << 30,
            "builder_config.builder_optimization_level": 0,
        },
    )
    report = verify(engine, manifest, gpu=fake_gpu(answer(engine=engine_facts())))
    assert status(report, "builder_config.unrecorded") is CheckStatus.SKIPPED
    assert "max_workspace_size, builder_optimization_level" in message(report, "builder_config.unrecorded")


def test_tensorrt_refusal_is_reported_with_its_message(
    plans_dir: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine = plans_dir / MNIST
    refusal = (
        "IRuntime::deserializeCudaEngine: Error Code 1: Internal Error (Failed due to an old deserialization "
        "call on a newer plan file.)"
    )
    canned = answer("deserialize_failed", log=[{"severity": "ERROR", "message": refusal}], message_=refusal)
    report = verify(engine, gpu_manifest(engine), gpu=fake_gpu(canned))
    assert status(report, "gpu.deserialize") is CheckStatus.FAIL
    assert refusal in message(report, "gpu.deserialize")
    assert report.check("gpu.deserialize").observed == [refusal]  # type: ignore[union-attr]
    assert any("version-compatible" in note for note in report.notes)
    assert "TensorRT said:" in report.render_text()
    assert report.to_json()["gpu"]["log"][0]["message"] == refusal


def test_no_gpu_fails_the_gpu_check(
    plans_dir: Path, verify: Callable[..., EngineReport], fake_gpu: Callable[..., GpuOptions]
) -> None:
    engine = plans_dir / MNIST
    canned = {
        "protocol": 1,
        "status": "no_gpu",
        "message": "no GPU: cuInit failed: CUDA_ERROR_NO_DEVICE",
        "timings": {},
        "gpu": {"available": False, "reason": "cuInit failed: CUDA_ERROR_NO_DEVICE", "device_nodes": []},
    }
    report = verify(engine, gpu_manifest(engine), gpu=fake_gpu(canned))
    assert status(report, "gpu.device") is CheckStatus.FAIL
    assert status(report, "gpu.deserialize") is CheckStatus.FAIL
    assert "not attempted: no GPU" in message(report, "gpu.deserialize")
    assert not report.ok
