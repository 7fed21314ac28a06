"""The engine build manifest: what was built, from what, with which toolchain and settings.

The manifest is the predicate of an in-toto Statement v1 (predicate type :data:`ENGINE_BUILD_PREDICATE_TYPE`)
whose subject is the engine file. One model covers both TensorRT eras:

* TensorRT ≤ 10 builds may be *weakly typed*: builder flags (``precision_flags``) let the builder pick
  reduced precisions, INT8 comes from a calibrator (calibration dataset and cache), and TensorRT < 10 has an
  implicit batch dimension (``max_batch_size``).
* TensorRT 11 builds are *strongly typed* only: precision follows the ONNX model (``network_precisions``
  records what it carries), there are no calibrators, and INT8 evidence is the quantized ONNX (whose hash is
  always bound) plus the hash of the dataset ModelOpt calibrated it on.

Field names are a contract: policies and CEL expressions refer to them (see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from verifier._predicate_statement import validate_predicate
from verifier.attestations import ENGINE_BUILD_PREDICATE_TYPE
from verifier.base import ImageReference, InputError, sha256_bytes
from verifier.crypto import Envelope, ResourceDescriptor, Statement
from verifier.predicates import (
    Digest,
    Gpu,
    NonEmptyStr,
    OptimizationProfile,
    Precision,
    Sha256Hex,
    ShapeRange,
    StrictModel,
    Timestamp,
)

__all__ = [
    "ENGINE_BUILD_PREDICATE_TYPE",
    "AccuracyMetric",
    "BuildNode",
    "BuilderConfig",
    "Calibration",
    "CalibrationCache",
    "CalibrationDataset",
    "DatasetRef",
    "EngineBuildManifest",
    "ModelSignatureRef",
    "OnnxModel",
    "OptimizationProfile",
    "OutputEngine",
    "Plugin",
    "ShapeRange",
    "TimeRange",
    "Toolchain",
    "load_manifest",
    "manifest_digest",
    "manifest_json_schema",
    "manifest_statement",
    "parse_tensorrt_version",
]

_VERSION = re.compile(r"[0-9]+(\.[0-9]+){1,3}")


def parse_tensorrt_version(text: str) -> tuple[int, ...]:
    """``"10.5.0.18"`` → ``(10, 5, 0, 18)``; raises ``ValueError`` for anything that is not dotted numbers."""
    if not _VERSION.fullmatch(text):
        raise ValueError(f"{text!r} is not a dotted version number")
    return tuple(int(part) for part in text.split("."))


def _pinned_image(value: str) -> str:
    try:
        reference = ImageReference.parse(value)
    except InputError as error:
        raise PydanticCustomError(
            "image_reference", "a valid image reference ({reason})", {"reason": error.message}
        ) from None
    if reference.digest is None:
        raise PydanticCustomError(
            "image_digest",
            "an image reference pinned by digest, e.g. 'nvcr.io/nvidia/tensorrt:24.05-py3@sha256:<64 hex>'",
        )
    return value


def _version(value: str) -> str:
    if not _VERSION.fullmatch(value):
        raise PydanticCustomError("version", "a dotted version number such as '10.5.0.18'")
    return value


def _unique(values: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise PydanticCustomError(
                "duplicate", "each value once; '{value}' is listed twice", {"value": value}
            )
        seen.add(value)
    return values


PinnedImage = Annotated[str, AfterValidator(_pinned_image)]
Version = Annotated[str, AfterValidator(_version)]
PrecisionList = Annotated[list[Precision], AfterValidator(_unique)]


class Toolchain(StrictModel):
    """The builder image and the library versions inside it."""

    image: PinnedImage = Field(description="TensorRT builder image reference; must carry a digest")
    tensorrt_version: Version = Field(examples=["10.5.0.18"])
    cuda_version: Version = Field(examples=["12.6.3"])
    cudnn_version: Version | None = None

    @property
    def tensorrt_release(self) -> tuple[int, ...]:
        """The TensorRT version as a tuple of integers."""
        return parse_tensorrt_version(self.tensorrt_version)


class BuildNode(Gpu):
    """The GPU the engine was built on and its driver (``nvidia-smi`` names)."""


class ModelSignatureRef(StrictModel):
    """The OpenSSF Model Signing signature the build was given for the ONNX model (``manifest create
    --onnx-signature``): which signature, and which of its files the model is. A record, not a verdict: who
    signed it is decided where it is verified (``buildManifest.onnxSignedBy``)."""

    sha256: Sha256Hex = Field(description="SHA-256 of the signature file (model.sig) as given")
    model_name: str | None = Field(default=None, description="the signed model's name (its subject)")
    file: NonEmptyStr = Field(description="the signed file that is the ONNX model ('.': a one-file model)")


class OnnxModel(StrictModel):
    """The ONNX model the builder parsed (after any quantization: this is the file TensorRT read)."""

    sha256: Sha256Hex
    name: str | None = None
    uri: str | None = None
    opset: Annotated[int, Field(ge=1)] | None = None
    # Left out when absent, so that a manifest without it is written as before (and read by older readers).
    signature: ModelSignatureRef | None = Field(default=None, exclude_if=lambda value: value is None)


class TimeRange(StrictModel):
    """When the calibration samples were collected."""

    start: Timestamp
    end: Timestamp

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start > self.end:
            raise PydanticCustomError(
                "time_range", "start no later than end", {"field": "end", "got": self.end.isoformat()}
            )
        return self


class CalibrationDataset(StrictModel):
    """The calibration data: the calibrator's input (TensorRT ≤ 10) or ModelOpt's (TensorRT 11)."""

    sha256: Sha256Hex
    hash_method: Literal["file", "trtguard-tree-v1"] | None = Field(
        default=None,
        description="'file': SHA-256 of one file; 'trtguard-tree-v1': the directory tree hash of "
        "`trtguard manifest create` (see trtguard/release/manifest/_hashing.py); null: unknown",
    )
    name: str | None = None
    uri: str | None = None
    sampling: str | None = Field(default=None, description="how the samples were chosen, in words")
    time_range: TimeRange | None = None


class CalibrationCache(StrictModel):
    """The INT8 calibration cache a weakly typed TensorRT ≤ 10 build read or wrote."""

    sha256: Sha256Hex
    algorithm: str | None = Field(default=None, examples=["EntropyCalibration2"])


class Calibration(StrictModel):
    """Calibration evidence; at least one of dataset and cache."""

    dataset: CalibrationDataset | None = None
    cache: CalibrationCache | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> Calibration:
        if self.dataset is None and self.cache is None:
            raise PydanticCustomError(
                "calibration_empty", "a dataset or a cache (or calibration: null when there was none)"
            )
        return self


class Plugin(StrictModel):
    """A TensorRT plugin the engine needs at runtime."""

    name: NonEmptyStr
    version: str | None = None
    library_sha256: Sha256Hex


def _unique_plugins(plugins: list[Plugin]) -> list[Plugin]:
    # Change control compares plugins by name: a second entry of one name could hide a changed library.
    _unique([plugin.name for plugin in plugins])
    return plugins


HardwareCompatibility = Literal["none", "ampere_plus", "same_compute_capability"]


class BuilderConfig(StrictModel):
    """The builder settings that shape the engine."""

    typing: Literal["weak", "strong"]
    precision_flags: PrecisionList = Field(default_factory=list, description="weak typing only")
    network_precisions: PrecisionList = Field(
        default_factory=list, description="strong typing only: the precisions the ONNX model carries"
    )
    max_batch_size: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="implicit batch dimension, TensorRT < 10 only"
    )
    max_workspace_size: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="workspace memory pool limit in bytes"
    )
    memory_pool_limits: dict[
        Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")], Annotated[int, Field(ge=0)]
    ] = Field(default_factory=dict, description="bytes per pool, e.g. 'workspace', 'tactic_shared_memory'")
    optimization_profiles: list[OptimizationProfile] = Field(default_factory=list)
    hardware_compatibility_level: HardwareCompatibility = "none"
    version_compatible: bool = False
    exclude_lean_runtime: bool = False
    builder_optimization_level: Annotated[int, Field(ge=0, le=5)] | None = None
    plugins: Annotated[list[Plugin], AfterValidator(_unique_plugins)] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _one_workspace_limit(cls, data: Any) -> Any:
        """Fill ``max_workspace_size`` and ``memory_pool_limits.workspace`` each from the other.

        Both name the one workspace pool limit (TensorRT < 8.4 and later APIs); with both always set, a
        rule or CEL expression that reads either one sees the limit however the manifest recorded it.
        """
        if not isinstance(data, dict):
            return data
        size, pools = data.get("max_workspace_size"), data.get("memory_pool_limits")
        if pools is not None and not isinstance(pools, dict):
            return data  # validation reports it
        pool = (pools or {}).get("workspace")
        if size is None and pool is not None:
            return {**data, "max_workspace_size": pool}
        if size is not None and pool is None:
            return {**data, "memory_pool_limits": {**(pools or {}), "workspace": size}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> BuilderConfig:
        if self.typing == "strong":
            if self.precision_flags:
                raise _rule(
                    "precision_flags",
                    self.precision_flags,
                    "no precision flags on a strongly typed build (its precisions follow the ONNX model: "
                    "list them in network_precisions)",
                )
            if self.max_batch_size is not None:
                raise _rule(
                    "max_batch_size",
                    self.max_batch_size,
                    "no max_batch_size on a strongly typed build (implicit batch needs weak typing; "
                    "record the batch range in optimization_profiles)",
                )
        elif self.network_precisions:
            raise _rule(
                "network_precisions",
                self.network_precisions,
                "network_precisions only on a strongly typed build (a weakly typed build records the "
                "builder flags in precision_flags)",
            )
        if self.exclude_lean_runtime and not self.version_compatible:
            raise _rule(
                "exclude_lean_runtime",
                True,
                "exclude_lean_runtime only together with version_compatible: true "
                "(TensorRT ignores it otherwise)",
            )
        pool = self.memory_pool_limits.get("workspace")
        if pool is not None and self.max_workspace_size is not None and pool != self.max_workspace_size:
            raise _rule(
                "max_workspace_size",
                self.max_workspace_size,
                f"the same value as memory_pool_limits.workspace ({pool}); "
                "both name the workspace pool limit",
            )
        return self


class OutputEngine(StrictModel):
    """The engine file the build produced (also the Statement's subject)."""

    sha256: Sha256Hex
    size: Annotated[int, Field(ge=0)]
    name: NonEmptyStr


class DatasetRef(StrictModel):
    """A dataset named and pinned by hash."""

    name: NonEmptyStr
    sha256: Sha256Hex


class AccuracyMetric(StrictModel):
    """One accuracy figure and the dataset it was measured on."""

    metric: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$", examples=["top1_acc"])]
    value: Annotated[float, Field(allow_inf_nan=False)]
    dataset: DatasetRef
    higher_is_better: bool = Field(default=True, description="false for error rates and losses")


def _unique_metrics(metrics: list[AccuracyMetric]) -> list[AccuracyMetric]:
    _unique([metric.metric for metric in metrics])
    return metrics


class EngineBuildManifest(StrictModel):
    """The engine build manifest predicate (both TensorRT eras; see the module docstring)."""

    build_timestamp: Timestamp
    toolchain: Toolchain
    build_node: BuildNode
    onnx: OnnxModel
    calibration: Calibration | None = None
    builder_config: BuilderConfig
    output_engine: OutputEngine
    accuracy: Annotated[list[AccuracyMetric], AfterValidator(_unique_metrics)] = Field(default_factory=list)
    audit_id: NonEmptyStr
    previous_manifest_digest: Digest | None = Field(
        default=None,
        description="manifest_digest() of the previous engine's signed build manifest, for change control",
    )
    previous_engine: PinnedImage | None = Field(
        default=None,
        description="the previous engine artifact (registry/repo@sha256:…), where that manifest is attached",
    )

    @model_validator(mode="after")
    def _era(self) -> EngineBuildManifest:
        release = self.toolchain.tensorrt_release
        config = self.builder_config
        if release[0] >= 11 and config.typing == "weak":
            raise _rule(
                "builder_config.typing",
                "weak",
                f"'strong': TensorRT {self.toolchain.tensorrt_version} has no weak typing (removed in 11.0)",
            )
        if release[0] >= 10 and config.max_batch_size is not None:
            raise _rule(
                "builder_config.max_batch_size",
                config.max_batch_size,
                f"null: TensorRT {self.toolchain.tensorrt_version} has no implicit batch (removed in 10.0); "
                "record the batch range in optimization_profiles",
            )
        compatible = config.version_compatible or config.hardware_compatibility_level != "none"
        if release[:2] < (8, 6) and compatible:
            raise _rule(
                "builder_config.version_compatible",
                config.version_compatible,
                f"no version or hardware compatibility: TensorRT {self.toolchain.tensorrt_version} "
                "predates them (added in 8.6)",
            )
        if config.hardware_compatibility_level == "ampere_plus":
            major = int(self.build_node.compute_capability.split(".")[0])
            if major < 8:
                raise _rule(
                    "builder_config.hardware_compatibility_level",
                    "ampere_plus",
                    f"a build GPU of compute capability 8.0 or newer for 'ampere_plus'; "
                    f"build_node.compute_capability is {self.build_node.compute_capability}",
                )
        if config.typing == "strong" and self.calibration is not None and self.calibration.cache is not None:
            raise _rule(
                "calibration.cache",
                self.calibration.cache.sha256,
                "no calibration cache on a strongly typed build (TensorRT uses no calibrator there; the "
                "scales are in the quantized ONNX): record the ModelOpt calibration dataset instead",
            )
        return self

    def precisions(self) -> frozenset[str]:
        """Every precision the engine may use: the builder flags, the network's precisions and fp32."""
        config = self.builder_config
        return frozenset({*config.precision_flags, *config.network_precisions, "fp32"})

    def uses_int8(self) -> bool:
        """True when the build enabled INT8 (flag) or the network carries INT8 (strong typing)."""
        return "int8" in self.precisions()

    def has_calibration_evidence(self) -> bool:
        """True when the manifest binds the calibration evidence its typing calls for.

        Weakly typed builds need both the calibration dataset and the cache the calibrator produced from it;
        strongly typed builds need the dataset ModelOpt calibrated the quantized ONNX on (the ONNX hash is
        always bound). The answer does not depend on whether INT8 is used: policies combine it with
        :meth:`uses_int8`. A weak INT8 build from a Q/DQ (explicitly quantized) ONNX has no calibrator, so
        this is False for it and the policy decides.
        """
        calibration = self.calibration
        if calibration is None or calibration.dataset is None:
            return False
        return self.builder_config.typing == "strong" or calibration.cache is not None

    def accuracy_value(self, metric: str) -> float | None:
        """The value recorded for ``metric``, or None when the manifest has no such metric."""
        for entry in self.accuracy:
            if entry.metric == metric:
                return entry.value
        return None


def _rule(field: str, got: Any, expected: str) -> PydanticCustomError:
    # ``field`` and ``got`` let verifier.base._validation point at the sub-field a cross-field rule is about.
    return PydanticCustomError("manifest_rule", expected, {"field": field, "got": got})


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the build manifest predicate."""
    schema = EngineBuildManifest.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": ENGINE_BUILD_PREDICATE_TYPE,
        **schema,
    }


def manifest_statement(manifest: EngineBuildManifest) -> Statement:
    """The in-toto Statement v1 whose subject is the engine file and whose predicate is ``manifest``."""
    engine = manifest.output_engine
    return Statement(
        subject=[ResourceDescriptor(name=engine.name, digest={"sha256": engine.sha256})],
        predicate_type=ENGINE_BUILD_PREDICATE_TYPE,
        predicate=manifest.model_dump(mode="json"),
    )


def manifest_digest(envelope: Envelope) -> str:
    """The digest that names a signed build manifest: SHA-256 of its in-toto statement (the DSSE payload).

    It stays the same when the envelope is re-serialised or countersigned, so one manifest keeps one name in
    ``previous_manifest_digest``, change approvals and verification attestations.
    """
    return f"sha256:{sha256_bytes(envelope.payload)}"


def load_manifest(data: Mapping[str, Any] | Statement, source: str) -> EngineBuildManifest:
    """Validate a build manifest given as a bare predicate, an in-toto Statement, or a decoded Statement.

    ``source`` names where the data came from (a file name, "attestation sha256:…") for error messages.
    A Statement must have the engine-build predicate type and a subject whose sha256 equals
    ``output_engine.sha256`` (the subject's name is not compared: renaming a file does not change it).
    Raises :class:`InputError` listing every problem with its field path.
    """
    return validate_predicate(
        EngineBuildManifest,
        data,
        source,
        predicate_type=ENGINE_BUILD_PREDICATE_TYPE,
        what="engine build manifest",
        subject=("output_engine.sha256", lambda manifest: manifest.output_engine.sha256),
    )
