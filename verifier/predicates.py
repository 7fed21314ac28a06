"""Field types shared by the build manifest and the other trtguard predicates.

Each constrained type validates with a message that says what was expected (the validation formatter shows
it next to the field path and the offending value) and carries the matching JSON Schema keywords.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError


class StrictModel(BaseModel):
    """Base of every predicate model: unknown keys are errors and instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_COMPUTE_CAPABILITY = re.compile(r"[0-9]+\.[0-9]+")
# RFC 3339 section 5.6 date-time: a full date, "T" (or a space, per its note), a time and a mandatory offset.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})",
)


def _sha256_hex(value: str) -> str:
    if _SHA256_HEX.fullmatch(value):
        return value
    if value.startswith("sha256:") and _SHA256_HEX.fullmatch(value[7:]):
        raise PydanticCustomError(
            "sha256_hex", "64 lower-case hexadecimal characters without the 'sha256:' prefix"
        )
    raise PydanticCustomError("sha256_hex", "a SHA-256 digest: 64 lower-case hexadecimal characters")


def _digest(value: str) -> str:
    if _DIGEST.fullmatch(value):
        return value
    raise PydanticCustomError(
        "sha256_digest", "a digest of the form 'sha256:' followed by 64 lower-case hexadecimal characters"
    )


def _rfc3339(value: Any) -> Any:
    # pydantic also takes Unix timestamps and ISO 8601 variants; a signed record should carry one form.
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and _RFC3339.fullmatch(value):
        return value
    raise PydanticCustomError(
        "rfc3339", "an RFC 3339 timestamp with a time zone, e.g. '2025-05-01T12:00:00Z'"
    )


Sha256Hex = Annotated[
    str,
    AfterValidator(_sha256_hex),
    WithJsonSchema({"type": "string", "pattern": "^[0-9a-f]{64}$"}),
]
"""A bare SHA-256 digest: 64 lower-case hexadecimal characters."""

Digest = Annotated[
    str,
    AfterValidator(_digest),
    WithJsonSchema({"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}),
]
"""A ``sha256:<hex>`` digest (OCI and DSSE style)."""

Timestamp = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An RFC 3339 date-time with a time zone."""

NonEmptyStr = Annotated[str, Field(min_length=1)]

Precision = Literal["fp16", "bf16", "int8", "fp8", "int4", "fp4", "tf32"]
"""Reduced precisions a build can enable (weak typing) or a network can carry (strong typing)."""


def _compute_capability(value: str) -> str:
    if _COMPUTE_CAPABILITY.fullmatch(value):
        return value
    raise PydanticCustomError(
        "compute_capability", "a compute capability as nvidia-smi prints it, e.g. '9.0'"
    )


ComputeCapability = Annotated[
    str,
    AfterValidator(_compute_capability),
    WithJsonSchema({"type": "string", "pattern": "^[0-9]+\\.[0-9]+$", "examples": ["9.0"]}),
]

Dimension = Annotated[int, Field(ge=0)]


class ShapeRange(StrictModel):
    """The smallest, optimal and largest shape of one input in an optimization profile."""

    min: list[Dimension]
    opt: list[Dimension]
    max: list[Dimension]

    @model_validator(mode="after")
    def _ordered(self) -> ShapeRange:
        for name, shape in (("opt", self.opt), ("max", self.max)):
            if len(shape) != len(self.min):
                raise PydanticCustomError(
                    "shape_rank",
                    "min, opt and max of the same rank; min has rank {rank}, {name} has rank {other}",
                    {"field": name, "got": shape, "rank": len(self.min), "name": name, "other": len(shape)},
                )
        for axis, (low, mid, high) in enumerate(zip(self.min, self.opt, self.max, strict=True)):
            if not low <= mid <= high:
                name, shape = ("opt", self.opt) if low > mid else ("max", self.max)
                raise PydanticCustomError(
                    "shape_order",
                    "min <= opt <= max in every dimension; "
                    "dimension {axis} is {low}/{mid}/{high} (min/opt/max)",
                    {"field": name, "got": shape, "axis": axis, "low": low, "mid": mid, "high": high},
                )
        return self


class OptimizationProfile(StrictModel):
    """One optimization profile: a shape range per dynamic input, keyed by the input tensor's name."""

    inputs: Annotated[dict[NonEmptyStr, ShapeRange], Field(min_length=1)]


class Gpu(StrictModel):
    """A GPU as ``nvidia-smi`` names it."""

    gpu_name: NonEmptyStr
    compute_capability: ComputeCapability
    driver_version: NonEmptyStr


class ChangeKind(StrEnum):
    """Kinds of change between two engine builds, as ``manifest diff`` classifies them.

    Policies gate deployments on these names and approvals list the ones they cover, so a name never
    changes once released.
    """

    FIRST_INT8 = "FirstInt8"
    PRECISION_CHANGE = "PrecisionChange"
    TYPING_CHANGE = "TypingChange"
    TENSORRT_MAJOR_UPGRADE = "TensorRTMajorUpgrade"
    TENSORRT_MINOR_UPGRADE = "TensorRTMinorUpgrade"
    TENSORRT_DOWNGRADE = "TensorRTDowngrade"
    CUDA_VERSION_CHANGE = "CudaVersionChange"
    CUDNN_VERSION_CHANGE = "CudnnVersionChange"
    TOOLCHAIN_IMAGE_CHANGE = "ToolchainImageChange"
    BUILD_GPU_CHANGE = "BuildGpuChange"
    ONNX_MODEL_CHANGE = "OnnxModelChange"
    CALIBRATION_DATA_CHANGE = "CalibrationDataChange"
    DYNAMIC_SHAPE_CHANGE = "DynamicShapeChange"
    BATCH_SIZE_CHANGE = "BatchSizeChange"
    WORKSPACE_CHANGE = "WorkspaceChange"
    HARDWARE_COMPATIBILITY_CHANGE = "HardwareCompatibilityChange"
    OPTIMIZATION_LEVEL_CHANGE = "OptimizationLevelChange"
    PLUGIN_CHANGE = "PluginChange"
    ACCURACY_DROP = "AccuracyDrop"
    ACCURACY_METRIC_REMOVED = "AccuracyMetricRemoved"
    ACCURACY_DATASET_CHANGE = "AccuracyDatasetChange"
    FIRST_ENGINE = "FirstEngine"

    @property
    def meaning(self) -> str:
        """What the kind of change is, in a few words (the policy README's table and ``approve --help``)."""
        return _CHANGE_MEANINGS[self]


_CHANGE_MEANINGS: Final[Mapping[ChangeKind, str]] = {
    ChangeKind.FIRST_INT8: "the engine uses INT8 and its baseline did not (or there is no earlier engine)",
    ChangeKind.PRECISION_CHANGE: "precisions were added or removed",
    ChangeKind.TYPING_CHANGE: "weak typing became strong, or the other way round",
    ChangeKind.TENSORRT_MAJOR_UPGRADE: "a newer TensorRT major version",
    ChangeKind.TENSORRT_MINOR_UPGRADE: "a newer TensorRT release within the major version",
    ChangeKind.TENSORRT_DOWNGRADE: "an older TensorRT release",
    ChangeKind.CUDA_VERSION_CHANGE: "another CUDA version in the toolchain",
    ChangeKind.CUDNN_VERSION_CHANGE: "another cuDNN version in the toolchain",
    ChangeKind.TOOLCHAIN_IMAGE_CHANGE: "another builder image (repository or digest)",
    ChangeKind.BUILD_GPU_CHANGE: "built on another GPU model or compute capability",
    ChangeKind.ONNX_MODEL_CHANGE: "built from another ONNX model",
    ChangeKind.CALIBRATION_DATA_CHANGE: "another calibration dataset or cache (or one added or removed)",
    ChangeKind.DYNAMIC_SHAPE_CHANGE: "other optimization profiles (input shape ranges)",
    ChangeKind.BATCH_SIZE_CHANGE: "another largest batch size",
    ChangeKind.WORKSPACE_CHANGE: "another workspace or memory pool limit",
    ChangeKind.HARDWARE_COMPATIBILITY_CHANGE: "another hardware or version compatibility setting",
    ChangeKind.OPTIMIZATION_LEVEL_CHANGE: "another builder optimization level",
    ChangeKind.PLUGIN_CHANGE: "plugins added, removed or changed",
    ChangeKind.ACCURACY_DROP: "a recorded accuracy metric got worse by more than the tolerance",
    ChangeKind.ACCURACY_METRIC_REMOVED: "an accuracy metric the baseline recorded is missing",
    ChangeKind.ACCURACY_DATASET_CHANGE: "an accuracy metric measured on another dataset",
    ChangeKind.FIRST_ENGINE: "the policy confirmed no build of the engine's ONNX model in this workload "
    "(a new or renamed workload, a new model)",
}
