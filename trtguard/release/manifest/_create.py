"""Assembling a build manifest inside the engine build Job (``trtguard manifest create``).

Values come, in this order of precedence, from command-line flags, the ``--config`` file, and what can be
read here: file hashes, the engine's plan header, Python packages, NVIDIA's environment variables and
``nvidia-smi``. Every value read from the environment is reported with its source; every value that could
not be determined is reported with what to pass instead.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO, get_args

from trtguard.release.manifest._draft import Draft, Note, finish
from trtguard.release.manifest._hashing import hash_paths
from trtguard.release.manifest._probe import (
    Distribution,
    Finding,
    cuda_version,
    cudnn_version,
    query_gpu,
    tensorrt_version,
)
from trtguard.release.manifest._settings import ManifestSettings
from verifier.base import InputError, VerificationError, read_limited, sha256_bytes
from verifier.engine import PlanMagic, read_calibration_cache, read_onnx_model, read_plan_header
from verifier.manifest import parse_tensorrt_version
from verifier.predicates import Precision

_PRECISIONS = frozenset(get_args(Precision))


@dataclass(frozen=True, slots=True)
class CreateInputs:
    """The files of the build."""

    onnx: Path
    engine: Path
    calibration_data: Path | None
    calibration_cache: Path | None
    #: The ONNX model's OpenSSF Model Signing signature, recorded as ``onnx.signature`` (it must list it).
    onnx_signature: Path | None = None


@dataclass(frozen=True, slots=True)
class Environment:
    """What the build node offers, gathered by the caller (nothing here reads globals)."""

    environ: Mapping[str, str]
    distributions: tuple[Distribution, ...]
    nvidia_smi: str | None
    nvidia_smi_timeout: float
    now: datetime


def create_manifest(
    inputs: CreateInputs,
    settings: ManifestSettings,
    environment: Environment,
    *,
    workers: int,
    progress_stream: TextIO | None,
) -> Draft:
    """Hash the build's files, read the environment and assemble the manifest draft."""
    notes: list[Note] = []
    paths = {"ONNX model": inputs.onnx, "engine": inputs.engine}
    if inputs.calibration_data is not None:
        paths["calibration dataset"] = inputs.calibration_data
    digests = hash_paths(paths, workers=workers, progress_stream=progress_stream)

    onnx: dict[str, Any] = {
        "sha256": digests["ONNX model"].sha256,
        "name": settings.onnx_name or inputs.onnx.name,
        "uri": settings.onnx_uri,
        "opset": None,
    }
    onnx_precisions = _read_onnx(inputs.onnx, onnx, notes)
    if inputs.onnx_signature is not None:
        onnx["signature"] = _onnx_signature(inputs.onnx_signature, onnx["sha256"])

    engine = digests["engine"]
    header_version = _plan_version(inputs.engine, notes)
    toolchain = {
        "image": settings.toolchain_image,
        "tensorrt_version": _tensorrt(settings, header_version, environment, notes),
        "cuda_version": _pick(
            "toolchain.cuda_version",
            settings.cuda_version,
            cuda_version(environment.environ, environment.distributions),
            "--cuda-version",
            notes,
        ),
        "cudnn_version": _pick(
            "toolchain.cudnn_version",
            settings.cudnn_version,
            cudnn_version(environment.environ, environment.distributions),
            "--cudnn-version",
            notes,
            required=False,
        ),
    }
    if settings.toolchain_image is None:
        notes.append(
            Note(
                "toolchain.image",
                "cannot be read from inside the container; pass --toolchain-image with the builder image "
                "pinned by digest (the Job template knows it)",
                True,
            )
        )

    gpu = query_gpu(environment.nvidia_smi, timeout=environment.nvidia_smi_timeout)
    build_node = {
        "gpu_name": _pick("build_node.gpu_name", settings.gpu_name, gpu.gpu_name, "--gpu-name", notes),
        "compute_capability": _pick(
            "build_node.compute_capability",
            settings.compute_capability,
            gpu.compute_capability,
            "--compute-capability",
            notes,
        ),
        "driver_version": _pick(
            "build_node.driver_version",
            settings.driver_version,
            gpu.driver_version,
            "--driver-version",
            notes,
        ),
    }

    builder_config = _builder_config(settings, onnx_precisions, notes)
    calibration = _calibration(
        inputs,
        settings,
        digests,
        builder_config=builder_config,
        tensorrt=toolchain["tensorrt_version"],
        notes=notes,
    )

    timestamp = settings.build_timestamp
    if timestamp is None:
        timestamp = environment.now.replace(microsecond=0).isoformat().replace("+00:00", "Z")
        notes.append(Note("build_timestamp", f"{timestamp}: the time of `manifest create`", False))
    if settings.audit_id is None:
        notes.append(Note("audit_id", "not given; pass --audit-id (or audit_id in --config)", True))
    accuracy = settings.accuracy
    if accuracy is None:
        accuracy = []
        notes.append(Note("accuracy", "no accuracy metrics given (--accuracy FILE); none recorded", False))

    document: dict[str, Any] = {
        "build_timestamp": timestamp,
        "toolchain": toolchain,
        "build_node": build_node,
        "onnx": onnx,
        "calibration": calibration,
        "builder_config": builder_config,
        "output_engine": {
            "sha256": engine.sha256,
            "size": engine.size,
            "name": settings.engine_name or inputs.engine.name,
        },
        "accuracy": accuracy,
        "audit_id": settings.audit_id,
        "previous_manifest_digest": settings.previous_manifest_digest,
        "previous_engine": settings.previous_engine,
    }
    return finish(document, notes)


def _onnx_signature(path: Path, onnx_sha256: str) -> dict[str, Any]:
    """The record of the model signature at ``path``, which must list a file of the ONNX model's digest
    (:class:`InputError` otherwise: a signature of other files recorded would mislead whoever reads it)."""
    from verifier.model_signing import read_signature  # noqa: PLC0415 - only with --onnx-signature

    raw = read_limited(
        path, "the ONNX model's signature", hint="give the model_signing signature (model.sig)"
    )
    signature = read_signature(raw, str(path))
    files = signature.covers(onnx_sha256)
    if not files:
        raise InputError(
            f"the model signature lists no file with the ONNX model's SHA-256 ({onnx_sha256})",
            location=str(path),
            hint="give the signature the publisher made of this ONNX model (or of the folder holding it)",
        )
    return {"sha256": sha256_bytes(raw), "model_name": signature.model_name or None, "file": files[0]}


def _read_onnx(path: Path, onnx: dict[str, Any], notes: list[Note]) -> frozenset[str] | None:
    if importlib.util.find_spec("onnx") is None:
        notes.append(
            Note(
                "onnx.opset",
                "not recorded: the 'onnx' package is not installed (pip install 'trtguard[onnx]')",
                False,
            )
        )
        return None
    info = read_onnx_model(path)
    if info.sha256 != onnx["sha256"]:
        raise VerificationError(
            "the ONNX model changed while it was being read (two reads gave different hashes)",
            location=str(path),
            hint="run `manifest create` after the build has finished writing its files",
        )
    onnx["opset"] = info.opset
    return info.precisions


def _plan_version(engine: Path, notes: list[Note]) -> str | None:
    header = read_plan_header(engine)
    for problem in header.problems:
        notes.append(Note("output_engine", f"plan header: {problem}", True))
    if header.magic is None:
        return None
    if header.magic is PlanMagic.VTRT:
        notes.append(
            Note(
                "toolchain.tensorrt_version",
                f"the engine is a TensorRT-RTX plan (RTX {header.tensorrt_version}); its version is not a "
                "TensorRT version",
                False,
            )
        )
        return None
    if header.tensorrt_version is None:
        notes.append(
            Note(
                "toolchain.tensorrt_version",
                "the plan predates TensorRT 8.6 and does not carry its version",
                False,
            )
        )
    return header.tensorrt_version


def _tensorrt(
    settings: ManifestSettings, header_version: str | None, environment: Environment, notes: list[Note]
) -> str | None:
    field = "toolchain.tensorrt_version"
    found = tensorrt_version(environment.environ, environment.distributions)
    if header_version is not None:
        if settings.tensorrt_version is not None and not _same_release(
            settings.tensorrt_version, header_version
        ):
            notes.append(
                Note(
                    field,
                    f"--tensorrt-version {settings.tensorrt_version} contradicts the engine's plan header "
                    f"({header_version}), which names the TensorRT that built it",
                    True,
                )
            )
            return settings.tensorrt_version
        if found.value is not None and not _same_release(found.value, header_version):
            notes.append(
                Note(
                    field,
                    f"{header_version} from the plan header; the environment has {found.value} "
                    f"({found.source}), so the engine was not built with this environment's TensorRT",
                    False,
                )
            )
        elif settings.tensorrt_version is None:
            notes.append(Note(field, f"{header_version} from the engine's plan header", False))
        return settings.tensorrt_version or header_version
    return _pick(field, settings.tensorrt_version, found, "--tensorrt-version", notes)


def _same_release(given: str, other: str) -> bool:
    try:
        left, right = parse_tensorrt_version(given), parse_tensorrt_version(other)
    except ValueError:
        return False
    length = min(len(left), len(right))
    return left[:length] == right[:length]


def _pick(
    field: str, given: str | None, found: Finding, flag: str, notes: list[Note], *, required: bool = True
) -> str | None:
    if given is not None:
        return given
    if found.value is not None:
        notes.append(Note(field, f"{found.value} from {found.source}", False))
        return found.value
    notes.append(Note(field, f"could not be determined ({found.problem}); pass {flag}", required))
    return None


def _builder_config(
    settings: ManifestSettings, onnx_precisions: frozenset[str] | None, notes: list[Note]
) -> dict[str, Any] | None:
    config = settings.builder_config
    if config is None:
        notes.append(Note("builder_config", "not given; pass --builder-config FILE (YAML or JSON)", True))
        return None
    config = dict(config)
    if config.get("typing") != "strong":
        return config
    if onnx_precisions is None:
        if "network_precisions" not in config:
            # An empty list would claim an FP32-only network, which could hide INT8 from every policy.
            notes.append(
                Note(
                    "builder_config.network_precisions",
                    "not given, and the ONNX model could not be read to find them; list the precisions the "
                    "model carries in the builder config, or install the 'onnx' package",
                    True,
                )
            )
        return config
    carried = sorted(onnx_precisions & _PRECISIONS)
    declared = config.get("network_precisions")
    if declared is None:
        config["network_precisions"] = carried
        notes.append(
            Note(
                "builder_config.network_precisions",
                f"{carried} read from the ONNX model's tensor types",
                False,
            )
        )
    elif isinstance(declared, list) and sorted(map(str, declared)) != carried:
        notes.append(
            Note(
                "builder_config.network_precisions",
                f"the builder config says {sorted(map(str, declared))} but the ONNX model carries {carried}; "
                "a strongly typed build computes in the ONNX model's types",
                True,
            )
        )
    return config


def _calibration(
    inputs: CreateInputs,
    settings: ManifestSettings,
    digests: Mapping[str, Any],
    *,
    builder_config: Mapping[str, Any] | None,
    tensorrt: str | None,
    notes: list[Note],
) -> dict[str, Any] | None:
    described = settings.calibration
    calibration: dict[str, Any] = {}
    if inputs.calibration_data is not None:
        data = digests["calibration dataset"]
        dataset: dict[str, Any] = {
            "sha256": data.sha256,
            "hash_method": data.method,
            "name": (described.name if described else None) or inputs.calibration_data.name,
            "uri": described.uri if described else None,
            "sampling": described.sampling if described else None,
            "time_range": described.time_range if described else None,
        }
        calibration["dataset"] = dataset
        if dataset["sampling"] is None:
            notes.append(
                Note(
                    "calibration.dataset.sampling",
                    "not given; describe how the samples were chosen (--calibration-sampling)",
                    False,
                )
            )
        if dataset["time_range"] is None:
            notes.append(
                Note(
                    "calibration.dataset.time_range",
                    "not given; pass --calibration-start and --calibration-end",
                    False,
                )
            )
    elif described is not None:
        notes.append(
            Note(
                "calibration.dataset",
                "the calibration is described (--config or flags) but no --calibration-data was given "
                "to hash",
                True,
            )
        )
    if inputs.calibration_cache is not None:
        cache = read_calibration_cache(inputs.calibration_cache)
        calibration["cache"] = {"sha256": cache.sha256, "algorithm": cache.algorithm}
        if tensorrt is not None and not _same_release(cache.tensorrt_version, tensorrt):
            notes.append(
                Note(
                    "calibration.cache",
                    f"the cache was written by TensorRT {cache.tensorrt_version} ({cache.header}), "
                    f"the engine by {tensorrt}",
                    False,
                )
            )
    flags = builder_config.get("precision_flags") if builder_config else None
    if isinstance(flags, list) and "int8" in flags and not {"dataset", "cache"} <= calibration.keys():
        notes.append(
            Note(
                "calibration",
                "INT8 is enabled without both a calibration dataset and a cache, so the manifest carries "
                "no complete calibration evidence (fine for an explicitly quantized Q/DQ model; policies "
                "decide)",
                False,
            )
        )
    return calibration or None
