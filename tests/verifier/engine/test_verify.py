"""verifier/engine/verify.py + checks.py: every public plan against a signed manifest, manifests that
disagree on each field, broken engine files, and the GPU phase driven by a fake child's answers."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from onnx import TensorProto

from tests.verifier.engine.helpers import (
    LEGACY_VERSIONS,
    PLANS,
    PROFILE,
    answer,
    engine_facts,
    gpu_manifest,
    manifest_for,
    write_model,
)
from verifier.digests import hash_file
from verifier.engine import (
    CheckStatus,
    EngineReport,
    GpuOptions,
    VerifyRequest,
    load_signed_manifest,
    verify_engine,
)
from verifier.errors import InputError
from verifier.keys import PrivateKey, PublicKey

MNIST = "sampleMNIST.trt10.5.0.18.engine"


def status(report: EngineReport, name: str) -> CheckStatus | None:
    check = report.check(name)
    return check.status if check else None


def message(report: EngineReport, name: str) -> str:
    check = report.check(name)
    assert check is not None, name
    return check.message


# --- the public plans ---


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_public_plan_matches_its_manifest(
    plans_dir: Path, verify: Callable[..., EngineReport], name: str
) -> None:
    engine = plans_dir / name
    version = PLANS[name] or LEGACY_VERSIONS[name]
    report = verify(engine, manifest_for(engine, **{"toolchain.tensorrt_version": version}))
    assert report.ok, report.render_text()
    for check in (
        "manifest.signature",
        "manifest.format",
        "output_engine.sha256",
        "output_engine.size",
        "plan.format",
        "plan.size",
    ):
        assert status(report, check) is CheckStatus.PASS, check
    expected = CheckStatus.PASS if PLANS[name] else CheckStatus.SKIPPED
    assert status(report, "toolchain.tensorrt_version") is expected
    if PLANS[name] is None:
        assert "do not record the TensorRT version" in message(report, "toolchain.tensorrt_version")
    assert status(report, "gpu.deserialize") is CheckStatus.SKIPPED
    assert report.sha256 == hash_file(engine).sha256
    assert report.manifest is not None and report.manifest.signers == ("builder",)
    assert report.manifest.audit_id == "AUDIT-500"


def test_without_a_manifest_only_the_file_is_checked(plans_dir: Path) -> None:
    report = verify_engine(VerifyRequest(engine=plans_dir / MNIST))
    assert report.ok
    assert status(report, "manifest.signature") is CheckStatus.SKIPPED
    assert status(report, "output_engine.sha256") is CheckStatus.SKIPPED
    assert report.header.tensorrt_version == "10.5.0.18"


# --- manifests that disagree ---


@pytest.mark.parametrize(
    ("changes", "check", "text"),
    [
        ({"output_engine.size": 1}, "output_engine.size", "the manifest declares 1"),
        (
            {"toolchain.tensorrt_version": "10.4.0.18"},
            "toolchain.tensorrt_version",
            "the manifest says 10.4.0.18",
        ),
        (
            {"toolchain.tensorrt_version": "10.5.1"},
            "toolchain.tensorrt_version",
            "written by TensorRT 10.5.0.18",
        ),
        ({"toolchain.tensorrt_version": "8.6.1.6"}, "toolchain.tensorrt_version", "8.6.1.6"),
    ],
)
def test_field_disagreements(
    plans_dir: Path, verify: Callable[..., EngineReport], changes: dict[str, Any], check: str, text: str
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine, **changes))
    assert status(report, check) is CheckStatus.FAIL
    assert text in message(report, check)
    assert not report.ok


def test_short_version_matches_as_a_prefix(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine, **{"toolchain.tensorrt_version": "10.5"}))
    assert status(report, "toolchain.tensorrt_version") is CheckStatus.PASS


def test_other_engine_hash(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    manifest = manifest_for(engine, **{"output_engine.sha256": "0" * 64})
    report = verify(engine, manifest, gpu=GpuOptions(child_command=("/nonexistent",)))
    assert status(report, "output_engine.sha256") is CheckStatus.FAIL
    assert "not the engine that was built" in message(report, "output_engine.sha256")
    # Never deserialized: the gate stops before the child would start.
    assert status(report, "gpu.deserialize") is CheckStatus.SKIPPED
    assert "hash did not match" in message(report, "gpu.deserialize")
    assert report.gpu is None


def test_modern_version_on_a_legacy_plan_fails(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    report = verify(engine, manifest_for(engine))  # says 10.5.0.18
    assert status(report, "toolchain.tensorrt_version") is CheckStatus.FAIL
    assert "bare 'ptrt' layout" in message(report, "toolchain.tensorrt_version")


def test_untrusted_signer(
    plans_dir: Path, verify: Callable[..., EngineReport], other_key: PrivateKey
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), key=other_key)
    assert status(report, "manifest.signature") is CheckStatus.FAIL
    assert status(report, "manifest.format") is CheckStatus.SKIPPED
    assert "signature did not verify" in message(report, "output_engine.sha256")
    assert not report.ok
    assert report.manifest is not None and report.manifest.signers == ()


def test_subject_other_than_output_engine(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), sign_options={"subject_sha256": "e" * 64})
    assert status(report, "manifest.format") is CheckStatus.FAIL
    assert "no subject of the Statement" in message(report, "manifest.format")
    assert status(report, "output_engine.sha256") is CheckStatus.SKIPPED


def test_invalid_predicate(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    manifest = manifest_for(engine)
    del manifest["audit_id"]
    report = verify(engine, manifest)
    assert status(report, "manifest.signature") is CheckStatus.PASS
    assert status(report, "manifest.format") is CheckStatus.FAIL
    assert "audit_id" in message(report, "manifest.format")


def test_envelope_that_is_not_json_is_an_input_error(tmp_path: Path, builder_pub: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="not a DSSE envelope"):
        load_signed_manifest(path, {"b": PublicKey.from_pem(builder_pub.read_bytes())})


# --- broken engine files ---


def _mutations(data: bytes) -> dict[str, bytes]:
    flipped = bytearray(data)
    flipped[0x11] ^= 0xFF  # inside the size field
    return {
        "truncated": data[: len(data) // 2],
        "padded": data + b"\0" * 512,
        "size-byte-flipped": bytes(flipped),
        "empty": b"",
        "random": os.urandom(4096),
    }


@pytest.mark.parametrize("kind", ["truncated", "padded", "size-byte-flipped", "empty", "random"])
def test_broken_engine_files(
    plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport], kind: str
) -> None:
    engine = tmp_path / f"{kind}.plan"
    engine.write_bytes(_mutations((plans_dir / MNIST).read_bytes())[kind])
    report = verify(engine, manifest_for(engine))  # a signed manifest that binds these very bytes
    assert status(report, "output_engine.sha256") is CheckStatus.PASS
    assert not report.ok
    document = report.to_json()
    assert document["sha256"] == hash_file(engine).sha256
    if kind in ("empty", "random"):
        assert status(report, "plan.format") is CheckStatus.FAIL
    else:
        assert status(report, "plan.size") is CheckStatus.FAIL


def test_missing_engine_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the engine file"):
        verify_engine(VerifyRequest(engine=tmp_path / "absent.plan"))


# --- calibration cache ---


@pytest.fixture
def trt8204_cache(shared_fixtures: Path) -> Path:
    return shared_fixtures / "tensorrt" / "calibration" / "hackathon-TRT-8204-int8.cache"


def _weak_int8(engine: Path, cache: Path, **changes: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "toolchain.tensorrt_version": "8.2.4.2",
        "builder_config.precision_flags": ["fp16", "int8"],
        "calibration": {
            "dataset": {"sha256": "3" * 64, "sampling": "1000 random frames"},
            "cache": {"sha256": hash_file(cache).sha256, "algorithm": "EntropyCalibration2"},
        },
    }
    settings.update(changes)
    return manifest_for(engine, **settings)


def test_calibration_cache_matches(
    plans_dir: Path, trt8204_cache: Path, verify: Callable[..., EngineReport]
) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    report = verify(engine, _weak_int8(engine, trt8204_cache), calibration_cache=trt8204_cache)
    for check in (
        "calibration_cache.format",
        "calibration.cache.sha256",
        "calibration.cache.algorithm",
        "calibration_cache.tensorrt_version",
    ):
        assert status(report, check) is CheckStatus.PASS, check
    assert report.calibration_cache is not None and report.calibration_cache.tensorrt_version == "8.2.4"


@pytest.mark.parametrize(
    ("changes", "check", "text"),
    [
        (
            {"calibration.cache": {"sha256": "4" * 64}},
            "calibration.cache.sha256",
            "not the cache the build used",
        ),
        (
            {"calibration.cache.algorithm": "MinMaxCalibration"},
            "calibration.cache.algorithm",
            "written by EntropyCalibration2",
        ),
        ({"toolchain.tensorrt_version": "8.6.1.6"}, "calibration_cache.tensorrt_version", "TensorRT 8.2.4"),
    ],
)
def test_calibration_disagreements(
    plans_dir: Path,
    trt8204_cache: Path,
    verify: Callable[..., EngineReport],
    changes: dict[str, Any],
    check: str,
    text: str,
) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    manifest = _weak_int8(engine, trt8204_cache)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = manifest
        for part in parents:
            target = target[part]
        target[last] = value
    report = verify(engine, manifest, calibration_cache=trt8204_cache)
    assert status(report, check) is CheckStatus.FAIL
    assert text in message(report, check)


def test_cache_given_but_not_in_manifest(
    plans_dir: Path, trt8204_cache: Path, verify: Callable[..., EngineReport]
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), calibration_cache=trt8204_cache)
    assert status(report, "calibration.cache.sha256") is CheckStatus.FAIL
    assert "the manifest records none" in message(report, "calibration.cache.sha256")


def test_cache_in_manifest_but_not_given(
    plans_dir: Path, trt8204_cache: Path, verify: Callable[..., EngineReport]
) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    report = verify(engine, _weak_int8(engine, trt8204_cache))
    assert status(report, "calibration.cache.sha256") is CheckStatus.SKIPPED
    assert "--calibration-cache" in message(report, "calibration.cache.sha256")


def test_malformed_cache(plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]) -> None:
    cache = tmp_path / "bad.cache"
    cache.write_text("TRT-8204-EntropyCalibration2\nx: 00000000\n")
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), calibration_cache=cache)
    assert status(report, "calibration_cache.format") is CheckStatus.FAIL
    assert "finite and positive" in message(report, "calibration_cache.format")
    assert f"{cache}:2" in message(report, "calibration_cache.format")


# --- ONNX ---


def _onnx_manifest(engine: Path, model: Path, **changes: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "onnx": {"sha256": hash_file(model).sha256, "opset": 17},
        "builder_config.optimization_profiles": [PROFILE],
    }
    settings.update(changes)
    return manifest_for(engine, **settings)


def test_onnx_matches(plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx")
    report = verify(engine, _onnx_manifest(engine, model), onnx=model)
    for check in ("onnx.format", "onnx.sha256", "onnx.opset", "onnx.inputs", "onnx.precisions"):
        assert status(report, check) is CheckStatus.PASS, (check, report.render_text())


def _profile(**ranges: list[int]) -> dict[str, Any]:
    return {"inputs": {"images": {"min": [1, 3, 8, 8], "opt": [4, 3, 8, 8], "max": [8, 3, 8, 8], **ranges}}}


@pytest.mark.parametrize(
    ("changes", "check", "text"),
    [
        (
            {"onnx": {"sha256": "5" * 64, "opset": 17}},
            "onnx.sha256",
            "not the model the engine was built from",
        ),
        ({"onnx.opset": 13}, "onnx.opset", "the manifest says 13"),
        ({"builder_config.optimization_profiles": []}, "onnx.inputs", "declares no optimization profile"),
        (
            {"builder_config.optimization_profiles": [{"inputs": {"pixels": PROFILE["inputs"]["images"]}}]},
            "onnx.inputs",
            "'pixels', which is not an input of the model",
        ),
        (
            {"builder_config.optimization_profiles": [_profile(max=[8, 3, 8, 16])]},
            "onnx.inputs",
            "dimension 3 of 'images' is fixed at 8",
        ),
        (
            {
                "builder_config.optimization_profiles": [
                    {"inputs": {"images": {"min": [1], "opt": [1], "max": [1]}}}
                ]
            },
            "onnx.inputs",
            "rank 1",
        ),
        ({"builder_config.precision_flags": []}, "onnx.precisions", "carries ['fp16']"),
    ],
)
def test_onnx_disagreements(
    plans_dir: Path,
    tmp_path: Path,
    verify: Callable[..., EngineReport],
    changes: dict[str, Any],
    check: str,
    text: str,
) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx", dtype=TensorProto.FLOAT16)
    manifest = _onnx_manifest(engine, model, **changes)
    report = verify(engine, manifest, onnx=model)
    assert status(report, check) is CheckStatus.FAIL, report.render_text()
    assert text in message(report, check)


def test_strong_typing_network_precisions(
    plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]
) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx", dtype=TensorProto.FLOAT16)
    strong = {"builder_config.typing": "strong", "builder_config.precision_flags": []}
    report = verify(engine, _onnx_manifest(engine, model, **strong), onnx=model)
    assert status(report, "builder_config.network_precisions") is CheckStatus.FAIL
    report = verify(
        engine,
        _onnx_manifest(engine, model, **strong, **{"builder_config.network_precisions": ["fp16", "int8"]}),
        onnx=model,
    )
    assert status(report, "builder_config.network_precisions") is CheckStatus.PASS
    assert "also lists ['int8']" in message(report, "builder_config.network_precisions")


def test_onnx_not_given_is_skipped(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine))
    assert status(report, "onnx.sha256") is CheckStatus.SKIPPED
    assert "--onnx" in message(report, "onnx.sha256")


def test_malformed_onnx(plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]) -> None:
    model = tmp_path / "bad.onnx"
    model.write_bytes(struct.pack("<Q", 12345) * 100)
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), onnx=model)
    assert status(report, "onnx.format") is CheckStatus.FAIL


# --- the GPU phase, driven by a fake child's answer ---


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


def test_real_child_without_gpu(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(
        engine, gpu_manifest(engine), gpu=GpuOptions(env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    )
    assert status(report, "gpu.deserialize") is CheckStatus.FAIL
    assert "no GPU" in message(report, "gpu.deserialize")
    assert report.to_json()["sha256"] == hash_file(engine).sha256


def test_gpu_without_a_manifest_is_refused(plans_dir: Path) -> None:
    report = verify_engine(
        VerifyRequest(engine=plans_dir / MNIST, gpu=GpuOptions(child_command=("/nonexistent",)))
    )
    assert status(report, "gpu.deserialize") is CheckStatus.FAIL
    assert "only after its hash matched a manifest signed by a trusted key" in message(
        report, "gpu.deserialize"
    )
    assert report.gpu is None
