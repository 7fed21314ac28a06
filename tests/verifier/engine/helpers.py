"""Shared test helpers for the engine verifier: small ONNX models and canned GPU-child answers.

The canned answers stand in for what the real child prints after TensorRT loaded an engine; they drive the
parent's comparisons on machines without a GPU (through fake_children/fake_answers.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtguard.cli import verify_engine as engine_cli
from verifier.base._digests import hash_file
from verifier.base._errors import TrtguardError
from verifier.crypto._dsse import Envelope
from verifier.crypto._intoto import ResourceDescriptor, Statement, sign_statement
from verifier.crypto._keys import PrivateKey
from verifier.engine import CheckStatus, EngineReport
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE

HERE = Path(__file__).resolve().parent
FAKE_CHILDREN = HERE / "fake_children"
FAKE_TENSORRT = HERE / "fake_tensorrt"
CHILD_PROGRAM = Path(__file__).resolve().parents[3] / "verifier" / "engine" / "_private" / "child.py"

#: The TensorRT 10.5 plan most tests use.
MNIST = "sampleMNIST.trt10.5.0.18.engine"
#: The public plans (shared/fixtures/tensorrt/plans) with the version their header carries (None: pre-8.6).
PLANS: dict[str, str | None] = {
    "controlnet-fork-model.trt8.6.1.6.plan": "8.6.1.6",
    "guorbit-model.trt8.2.engine": None,
    "hackathon-engine-int8-3-2.trt7.trt": None,
    "hackathon-model-Dim1.trt10.0.1.6.plan": "10.0.1.6",
    "hackathon-model-Dim4.trt10.0.1.6.plan": "10.0.1.6",
    "ppo-hil-jetson-model.trt7.1.trt": None,
    "sampleMNIST.trt10.5.0.18.engine": "10.5.0.18",
}

#: A version each pre-8.6 plan could have been built with (the header does not say).
LEGACY_VERSIONS = {
    "guorbit-model.trt8.2.engine": "8.2.1.8",
    "hackathon-engine-int8-3-2.trt7.trt": "7.2.3.4",
    "ppo-hil-jetson-model.trt7.1.trt": "7.1.3.0",
}


def manifest_for(engine: Path, **changes: Any) -> dict[str, Any]:
    """A valid weakly typed TensorRT 10.5 build manifest for ``engine``; ``changes`` replace dotted paths,
    e.g. ``**{"builder_config.hardware_compatibility_level": "ampere_plus"}``."""
    digest = hash_file(engine)
    manifest: dict[str, Any] = {
        "build_timestamp": "2025-05-01T12:00:00Z",
        "toolchain": {
            "image": "nvcr.io/nvidia/tensorrt:24.10-py3@sha256:" + "1" * 64,
            "tensorrt_version": "10.5.0.18",
            "cuda_version": "12.6.2",
        },
        "build_node": {
            "gpu_name": "NVIDIA H200",
            "compute_capability": "9.0",
            "driver_version": "580.159.04",
        },
        "onnx": {"sha256": "2" * 64, "name": "model.onnx", "opset": 17},
        "calibration": None,
        "builder_config": {
            "typing": "weak",
            "precision_flags": ["fp16"],
            "optimization_profiles": [],
            "hardware_compatibility_level": "none",
        },
        "output_engine": {"sha256": digest.sha256, "size": digest.size, "name": engine.name},
        "audit_id": "AUDIT-500",
    }
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = manifest
        for part in parents:
            target = target[part]
        target[last] = value
    return manifest


def sign_manifest(
    manifest: dict[str, Any], key: PrivateKey, *, subject_sha256: str | None = None
) -> Envelope:
    """The DSSE envelope of the in-toto Statement of ``manifest`` (subject: output_engine, or the digest
    given)."""
    engine = manifest["output_engine"]
    statement = Statement(
        subject=[
            ResourceDescriptor(name=engine["name"], digest={"sha256": subject_sha256 or engine["sha256"]})
        ],
        predicate_type=ENGINE_BUILD_PREDICATE_TYPE,
        predicate=manifest,
    )
    return sign_statement(statement, key)


def write_model(
    path: Path, *, dtype: int = TensorProto.FLOAT, opset: int = 17, batch: int | str = "batch"
) -> Path:
    weights = np.ones((10, 3 * 8 * 8), dtype=np.float16 if dtype == TensorProto.FLOAT16 else np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Flatten", ["images"], ["flat"]),
            helper.make_node("Gemm", ["flat", "W"], ["logits"], transB=1),
        ],
        "mnist-like",
        [helper.make_tensor_value_info("images", dtype, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", dtype, [batch, 10])],
        [numpy_helper.from_array(weights, name="W")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


PROFILE = {"inputs": {"images": {"min": [1, 3, 8, 8], "opt": [4, 3, 8, 8], "max": [8, 3, 8, 8]}}}


def engine_facts(
    *,
    images_max: int = 8,
    profiles: int = 1,
    level: str = "NONE",
    images_dtype: str = "FLOAT",
    logits_dtype: str = "FLOAT",
) -> dict[str, Any]:
    tensor = {"format": "Row major linear FP32 format", "location": "DEVICE", "shape_tensor": False}
    return {
        "name": "mnist",
        "num_layers": 4,
        "io_tensors": [
            {"name": "images", "mode": "INPUT", "dtype": images_dtype, "shape": [-1, 3, 8, 8], **tensor},
            {"name": "logits", "mode": "OUTPUT", "dtype": logits_dtype, "shape": [-1, 10], **tensor},
        ],
        "optimization_profiles": [
            {"inputs": {"images": {"min": [1, 3, 8, 8], "opt": [4, 3, 8, 8], "max": [images_max, 3, 8, 8]}}}
        ]
        * profiles,
        "hardware_compatibility_level": level,
        "profiling_verbosity": "LAYER_NAMES_ONLY",
        "engine_capability": "STANDARD",
        "device_memory_size": 1 << 20,
        "refittable": False,
        "unavailable": [],
    }


def answer(
    status_: str = "ok",
    *,
    engine: dict[str, Any] | None = None,
    module: str = "tensorrt_lean_bindings",
    inspector: dict[str, Any] | None = None,
    compute_capability: str = "9.0",
    log: list[dict[str, str]] | None = None,
    message_: str = "the engine deserialized",
) -> dict[str, Any]:
    return {
        "protocol": 1,
        "status": status_,
        "message": message_,
        "timings": {"probe_gpu_s": 0.01, "deserialize_s": 0.2},
        "gpu": {
            "available": True,
            "reason": None,
            "device_nodes": ["/dev/nvidia0"],
            "count": 1,
            "name": "NVIDIA H200",
            "compute_capability": compute_capability,
            "total_memory": 150 * 1024**3,
            "driver_version": "580.159.04",
        },
        "runtime": {"module": module, "version": "11.4.0.106"},
        "log": log or [],
        "log_dropped": 0,
        "engine": engine if status_ == "ok" else None,
        "inspector": inspector
        or {"available": False, "reason": f"{module} has no EngineInspector binding", "information": None},
    }


def gpu_manifest(
    engine: Path, model: Path | None = None, changes: dict[str, Any] | None = None
) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "builder_config.optimization_profiles": [PROFILE],
        "builder_config.version_compatible": True,
    }
    if model is not None:
        settings["onnx"] = {"sha256": hash_file(model).sha256, "opset": 17}
    settings.update(changes or {})
    return manifest_for(engine, **settings)


def trtguard(*argv: str | Path) -> int:
    """The verify-engine command as ``trtguard`` runs it (errors printed as diagnostics, not raised)."""
    parser = argparse.ArgumentParser(prog="trtguard")
    engine_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["verify-engine", *map(str, argv)])
    try:
        status: int = args.handler(args)
    except TrtguardError as error:
        print(f"trtguard: error: {error.diagnostics()}", file=sys.stderr)
        return error.exit_code
    return status


def status(report: EngineReport, name: str) -> CheckStatus | None:
    """The status of the check ``name`` in ``report`` (None when the report has no such check)."""
    check = report.check(name)
    return check.status if check else None


def message(report: EngineReport, name: str) -> str:
    """The message of the check ``name``, which ``report`` must have."""
    check = report.check(name)
    assert check is not None, name
    return check.message
