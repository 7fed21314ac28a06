"""TensorRT engine files: static checks without a GPU, deserialization on a GPU, and the report.

* :func:`read_plan_header` — the plan header (magic, TensorRT version, size field) without a GPU;
* :func:`read_calibration_cache` — an INT8 calibration cache, validated;
* :func:`read_onnx_model` — the ONNX model an engine was built from;
* :func:`inspect_on_gpu` — deserialization in a supervised child process;
* :func:`load_signed_manifest` + :func:`verify_engine` — everything ``trtguard verify-engine`` does (a
  model-signing signature of the engine file: :class:`ModelSignatureRequest`);
* :func:`sign_verification` — the signed engine-verification attestation of a report.
"""

from __future__ import annotations

from verifier.engine._attest import sign_verification, verification_predicate
from verifier.engine._calibration import (
    CalibrationCacheFile,
    InvalidCalibrationCache,
    parse_calibration_cache,
    read_calibration_cache,
)
from verifier.engine._header import PlanHeader, PlanMagic, parse_plan_header, read_plan_header
from verifier.engine._inspector import LayerPrecisions, parse_engine_information
from verifier.engine._model_signature import ModelSignatureRequest
from verifier.engine._onnx_model import InvalidOnnxModel, OnnxModelInfo, OnnxTensor, read_onnx_model
from verifier.engine._report import Check, CheckStatus, EngineReport, ManifestSummary
from verifier.engine._runtime import GpuOptions, GpuOutcome, GpuRun, inspect_on_gpu
from verifier.engine._verify import SignedManifest, VerifyRequest, load_signed_manifest, verify_engine

__all__ = [
    "CalibrationCacheFile",
    "Check",
    "CheckStatus",
    "EngineReport",
    "GpuOptions",
    "GpuOutcome",
    "GpuRun",
    "InvalidCalibrationCache",
    "InvalidOnnxModel",
    "LayerPrecisions",
    "ManifestSummary",
    "ModelSignatureRequest",
    "OnnxModelInfo",
    "OnnxTensor",
    "PlanHeader",
    "PlanMagic",
    "SignedManifest",
    "VerifyRequest",
    "inspect_on_gpu",
    "load_signed_manifest",
    "parse_calibration_cache",
    "parse_engine_information",
    "parse_plan_header",
    "read_calibration_cache",
    "read_onnx_model",
    "read_plan_header",
    "sign_verification",
    "verification_predicate",
    "verify_engine",
]
