"""trtguard.release.manifest._create: a manifest from real build files and a (partly fake) build node.

The ONNX models are real (written with the ``onnx`` package), the engine is a real TensorRT 10.5 plan from the
shared fixtures, calibration caches are real files; only ``nvidia-smi`` is a FAKE script (no driver here).
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from trtguard.release.manifest._create import CreateInputs, Environment, create_manifest
from trtguard.release.manifest._hashing import hash_paths
from trtguard.release.manifest._probe import Distribution
from trtguard.release.manifest._settings import ManifestSettings
from verifier.engine._calibration import InvalidCalibrationCache

IMAGE = "nvcr.io/nvidia/tensorrt:24.10-py3@sha256:" + "5d" * 32
NOW = datetime(2025, 3, 14, 9, 26, 53, 123456, tzinfo=UTC)
CACHE = (
    b"TRT-100500-EntropyCalibration2\ninput: 3c010a14\n(Unnamed Layer* 0) [Convolution]_output: 3c8954f2\n"
)


def write_float_model(path: Path) -> None:
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3, 8, 8])
    graph = helper.make_graph([helper.make_node("Relu", ["input"], ["output"])], "relu", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def write_qdq_model(path: Path) -> None:
    """A Q/DQ (explicitly quantized, INT8) model as ModelOpt writes them."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3, 8, 8])
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [], [0.02])
    zero = helper.make_tensor("zero", TensorProto.INT8, [], [0])
    nodes = [
        helper.make_node("QuantizeLinear", ["input", "scale", "zero"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["dq"]),
        helper.make_node("Relu", ["dq"], ["output"]),
    ]
    graph = helper.make_graph(nodes, "qdq", [x], [y], initializer=[scale, zero])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), str(path))


def fake_nvidia_smi(folder: Path, line: str = "NVIDIA H200, 9.0, 580.159.04") -> str:
    """A FAKE nvidia-smi script printing ``line``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(f'#!/bin/sh\n# FAKE nvidia-smi written by trtguard\'s tests\necho "{line}"\n')
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def build(tmp_path: Path, shared_fixtures: Path) -> dict[str, Path]:
    """The files of a weakly typed INT8 build in a temporary folder."""
    files = {
        "onnx": tmp_path / "model.onnx",
        "engine": tmp_path / "mnist.plan",
        "data": tmp_path / "calibration",
        "cache": tmp_path / "calibration.cache",
    }
    write_float_model(files["onnx"])
    shutil.copyfile(shared_fixtures / "tensorrt/plans/sampleMNIST.trt10.5.0.18.engine", files["engine"])
    (files["data"] / "batch-0").mkdir(parents=True)
    (files["data"] / "batch-0" / "0000.npy").write_bytes(b"\x93NUMPY" + bytes(200))
    (files["data"] / "batch-0" / "0001.npy").write_bytes(b"\x93NUMPY" + bytes(300))
    files["cache"].write_bytes(CACHE)
    return files


def environment(tmp_path: Path, **environ: str) -> Environment:
    return Environment(
        environ=environ,
        distributions=(Distribution("tensorrt-cu12", "10.5.0.18"), Distribution("numpy", "2.1.0")),
        nvidia_smi=fake_nvidia_smi(tmp_path / "fake-bin"),
        nvidia_smi_timeout=10,
        now=NOW,
    )


def weak_settings(**changes: Any) -> ManifestSettings:
    values: dict[str, Any] = {
        "toolchain_image": IMAGE,
        "audit_id": "CHG-2025-0142",
        "calibration": {
            "sampling": "every 10th frame",
            "time_range": {"start": "2025-01-01T00:00:00Z", "end": "2025-01-31T00:00:00Z"},
        },
        "builder_config": {
            "typing": "weak",
            "precision_flags": ["fp16", "int8"],
            "max_workspace_size": 2**30,
            "optimization_profiles": [
                {"inputs": {"input": {"min": [1, 3, 8, 8], "opt": [4, 3, 8, 8], "max": [16, 3, 8, 8]}}}
            ],
        },
        "accuracy": [
            {"metric": "top1_acc", "value": 0.981, "dataset": {"name": "mnist-test", "sha256": "11" * 32}}
        ],
    }
    values.update(changes)
    return ManifestSettings.model_validate(values)


def inputs(build: dict[str, Path], **changes: Path | None) -> CreateInputs:
    values: dict[str, Path | None] = {
        "onnx": build["onnx"],
        "engine": build["engine"],
        "calibration_data": build["data"],
        "calibration_cache": build["cache"],
    }
    values.update(changes)
    return CreateInputs(
        onnx=values["onnx"],  # type: ignore[arg-type]
        engine=values["engine"],  # type: ignore[arg-type]
        calibration_data=values["calibration_data"],
        calibration_cache=values["calibration_cache"],
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_weak_int8_build(build: dict[str, Path], tmp_path: Path) -> None:
    draft = create_manifest(
        inputs(build),
        weak_settings(),
        environment(tmp_path, CUDA_VERSION="12.6.2", CUDNN_VERSION="9.5.0.50"),
        workers=2,
        progress_stream=None,
    )
    assert draft.missing == ()
    manifest = draft.manifest
    assert manifest is not None
    assert manifest.build_timestamp == NOW.replace(microsecond=0)
    assert manifest.toolchain.tensorrt_version == "10.5.0.18"
    assert (manifest.toolchain.cuda_version, manifest.toolchain.cudnn_version) == ("12.6.2", "9.5.0.50")
    assert (manifest.build_node.gpu_name, manifest.build_node.compute_capability) == ("NVIDIA H200", "9.0")
    assert manifest.build_node.driver_version == "580.159.04"
    assert manifest.onnx.sha256 == _sha256(build["onnx"])
    assert (manifest.onnx.name, manifest.onnx.opset) == ("model.onnx", 17)
    assert manifest.output_engine.sha256 == _sha256(build["engine"])
    assert manifest.output_engine.size == 284092
    assert manifest.output_engine.name == "mnist.plan"
    assert manifest.calibration is not None
    dataset, cache = manifest.calibration.dataset, manifest.calibration.cache
    assert dataset is not None and cache is not None
    assert dataset.hash_method == "trtguard-tree-v1"
    assert dataset.sha256 == hash_paths({"d": build["data"]}, workers=1, progress_stream=None)["d"].sha256
    assert dataset.name == "calibration"
    assert dataset.sampling == "every 10th frame"
    assert dataset.time_range is not None and dataset.time_range.end.day == 31
    assert (cache.sha256, cache.algorithm) == (hashlib.sha256(CACHE).hexdigest(), "EntropyCalibration2")
    assert manifest.has_calibration_evidence()
    sources = {note.field: note.message for note in draft.notes}
    assert sources == {
        "toolchain.tensorrt_version": "10.5.0.18 from the engine's plan header",
        "toolchain.cuda_version": "12.6.2 from CUDA_VERSION=12.6.2",
        "toolchain.cudnn_version": "9.5.0.50 from CUDNN_VERSION=9.5.0.50",
        "build_node.gpu_name": "NVIDIA H200 from nvidia-smi --query-gpu=name,compute_cap,driver_version",
        "build_node.compute_capability": "9.0 from nvidia-smi --query-gpu=name,compute_cap,driver_version",
        "build_node.driver_version": "580.159.04 from nvidia-smi --query-gpu=name,compute_cap,driver_version",
        "build_timestamp": "2025-03-14T09:26:53Z: the time of `manifest create`",
    }


def test_strong_build_reads_network_precisions_from_the_onnx(build: dict[str, Path], tmp_path: Path) -> None:
    write_qdq_model(build["onnx"])
    settings = weak_settings(
        builder_config={"typing": "strong"}, calibration={"sampling": "512 images from the August split"}
    )
    draft = create_manifest(
        inputs(build, calibration_cache=None),
        settings,
        environment(tmp_path, CUDA_VERSION="12.6.2"),
        workers=2,
        progress_stream=None,
    )
    assert draft.manifest is not None, draft.notes
    assert draft.manifest.builder_config.network_precisions == ["int8"]
    assert draft.manifest.precisions() == frozenset({"fp32", "int8"})
    assert draft.manifest.onnx.opset == 19
    assert draft.manifest.has_calibration_evidence()
    note = next(note for note in draft.notes if note.field == "builder_config.network_precisions")
    assert note.message == "['int8'] read from the ONNX model's tensor types"


def test_strong_build_declaring_other_precisions_than_the_onnx(
    build: dict[str, Path], tmp_path: Path
) -> None:
    write_qdq_model(build["onnx"])
    settings = weak_settings(builder_config={"typing": "strong", "network_precisions": ["fp16"]})
    draft = create_manifest(
        inputs(build, calibration_cache=None),
        settings,
        environment(tmp_path),
        workers=1,
        progress_stream=None,
    )
    assert draft.manifest is None
    (note,) = [note for note in draft.missing if note.field == "builder_config.network_precisions"]
    assert note.message == (
        "the builder config says ['fp16'] but the ONNX model carries ['int8']; a strongly typed build "
        "computes "
        "in the ONNX model's types"
    )


def test_what_cannot_be_determined_is_listed(build: dict[str, Path], tmp_path: Path) -> None:
    bare = Environment(environ={}, distributions=(), nvidia_smi=None, nvidia_smi_timeout=1, now=NOW)
    settings = ManifestSettings(builder_config={"typing": "weak", "precision_flags": ["int8"]})
    draft = create_manifest(
        inputs(build, calibration_data=None, calibration_cache=None),
        settings,
        bare,
        workers=1,
        progress_stream=None,
    )
    assert draft.manifest is None
    assert {note.field: note.message for note in draft.missing} == {
        "toolchain.cuda_version": "could not be determined (CUDA_VERSION is not set and no "
        "nvidia-cuda-runtime-cuNN "
        "is installed); pass --cuda-version",
        "toolchain.image": "cannot be read from inside the container; pass --toolchain-image with the "
        "builder image "
        "pinned by digest (the Job template knows it)",
        "build_node.gpu_name": "could not be determined (nvidia-smi is not on PATH (no NVIDIA driver in this "
        "container?)); pass --gpu-name",
        "build_node.compute_capability": "could not be determined (nvidia-smi is not on PATH (no NVIDIA "
        "driver in "
        "this container?)); pass --compute-capability",
        "build_node.driver_version": "could not be determined (nvidia-smi is not on PATH (no NVIDIA "
        "driver in this "
        "container?)); pass --driver-version",
        "audit_id": "not given; pass --audit-id (or audit_id in --config)",
    }
    calibration = next(note for note in draft.notes if note.field == "calibration")
    assert not calibration.blocking
    assert calibration.message.startswith("INT8 is enabled without both a calibration dataset and a cache")
    assert draft.document["toolchain"]["tensorrt_version"] == "10.5.0.18"
    assert draft.document["build_node"] == {
        "gpu_name": None,
        "compute_capability": None,
        "driver_version": None,
    }


def test_given_version_contradicting_the_plan_header_blocks(build: dict[str, Path], tmp_path: Path) -> None:
    draft = create_manifest(
        inputs(build),
        weak_settings(tensorrt_version="10.8.0.43", cuda_version="12.6.2"),
        environment(tmp_path),
        workers=1,
        progress_stream=None,
    )
    (note,) = draft.missing
    assert note.field == "toolchain.tensorrt_version"
    assert note.message == (
        "--tensorrt-version 10.8.0.43 contradicts the engine's plan header (10.5.0.18), which names the "
        "TensorRT "
        "that built it"
    )


def test_environment_tensorrt_other_than_the_engine_is_reported(
    build: dict[str, Path], tmp_path: Path
) -> None:
    env = environment(tmp_path, CUDA_VERSION="12.6.2")
    env = Environment(
        environ=env.environ,
        distributions=(Distribution("tensorrt", "10.8.0.43"),),
        nvidia_smi=env.nvidia_smi,
        nvidia_smi_timeout=10,
        now=NOW,
    )
    draft = create_manifest(inputs(build), weak_settings(), env, workers=1, progress_stream=None)
    assert draft.manifest is not None
    assert draft.manifest.toolchain.tensorrt_version == "10.5.0.18"
    note = next(note for note in draft.notes if note.field == "toolchain.tensorrt_version")
    assert not note.blocking
    assert note.message == (
        "10.5.0.18 from the plan header; the environment has 10.8.0.43 (Python package tensorrt "
        "10.8.0.43), so the "
        "engine was not built with this environment's TensorRT"
    )


def test_cache_of_another_tensorrt_is_reported(
    build: dict[str, Path], tmp_path: Path, shared_fixtures: Path
) -> None:
    cache = shared_fixtures / "tensorrt/calibration/hackathon-TRT-8204-int8.cache"
    draft = create_manifest(
        inputs(build, calibration_cache=cache),
        weak_settings(),
        environment(tmp_path, CUDA_VERSION="12.6.2"),
        workers=1,
        progress_stream=None,
    )
    assert draft.manifest is not None
    assert draft.manifest.calibration is not None and draft.manifest.calibration.cache is not None
    assert draft.manifest.calibration.cache.sha256 == _sha256(cache)
    note = next(note for note in draft.notes if note.field == "calibration.cache")
    assert note.message == (
        "the cache was written by TensorRT 8.2.4 (TRT-8204-EntropyCalibration2), the engine by 10.5.0.18"
    )


def test_malformed_cache_is_refused(build: dict[str, Path], tmp_path: Path) -> None:
    build["cache"].write_bytes(b"input 0.5\n")
    with pytest.raises(InvalidCalibrationCache):
        create_manifest(
            inputs(build), weak_settings(), environment(tmp_path), workers=1, progress_stream=None
        )


def test_described_calibration_without_data_blocks(build: dict[str, Path], tmp_path: Path) -> None:
    draft = create_manifest(
        inputs(build, calibration_data=None, calibration_cache=None),
        weak_settings(cuda_version="12.6.2"),
        environment(tmp_path),
        workers=1,
        progress_stream=None,
    )
    (note,) = draft.missing
    assert note.field == "calibration.dataset"


def test_a_file_that_is_no_plan_blocks(build: dict[str, Path], tmp_path: Path) -> None:
    build["engine"].write_bytes(b"PK\x03\x04 a zip, not an engine")
    draft = create_manifest(
        inputs(build),
        weak_settings(cuda_version="12.6.2"),
        environment(tmp_path),
        workers=1,
        progress_stream=None,
    )
    (note,) = draft.missing
    assert note.field == "output_engine"
    assert note.message == (
        "plan header: the file starts with b'PK\\x03\\x04', not with a TensorRT plan tag ('ftrt', 'ptrt' "
        "or 'vtrt')"
    )
    # Without a header version the environment's TensorRT is used, and said so.
    assert draft.document["toolchain"]["tensorrt_version"] == "10.5.0.18"


def test_strong_build_without_onnx_package_needs_declared_precisions(
    build: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_qdq_model(build["onnx"])
    # Stand-in for an environment without the optional 'onnx' package: find_spec answers None for it.
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "onnx" else real_find_spec(name, *args),
    )
    settings = weak_settings(builder_config={"typing": "strong"}, cuda_version="12.6.2")
    draft = create_manifest(
        inputs(build, calibration_cache=None),
        settings,
        environment(tmp_path),
        workers=1,
        progress_stream=None,
    )
    assert draft.manifest is None
    (note,) = draft.missing
    assert note.field == "builder_config.network_precisions"
    opset = next(note for note in draft.notes if note.field == "onnx.opset")
    assert opset.message == "not recorded: the 'onnx' package is not installed (pip install 'trtguard[onnx]')"
    declared = weak_settings(
        builder_config={"typing": "strong", "network_precisions": ["int8"]}, cuda_version="12.6.2"
    )
    draft = create_manifest(
        inputs(build, calibration_cache=None),
        declared,
        environment(tmp_path),
        workers=1,
        progress_stream=None,
    )
    assert draft.manifest is not None
    assert draft.manifest.onnx.opset is None
