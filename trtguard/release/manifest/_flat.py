"""Converting the flat build record teams already keep into a build manifest draft.

The flat record::

    {"build_timestamp": …, "tensorrt_image": …, "input_onnx_hash": …, "calibration_dataset_hash": …,
     "builder_config": {"fp16_mode": …, "int8_mode": …, "max_batch_size": …, "max_workspace_size": …,
                        "dynamic_shapes": …},
     "output_engine_hash": …, "accuracy_metrics": {"top1_acc": …, "psnr_db": …}}

It describes a weakly typed (TensorRT ≤ 10) build and lacks much of what the manifest requires (build GPU,
CUDA version, audit ID, the dataset accuracy was measured on, …). Every such gap becomes a blocking
:class:`~trtguard.release.manifest._draft.Note` that says what to add; nothing is guessed except where the
record says it plainly (a version written in the image tag).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from trtguard.release.manifest._draft import Draft, Note, finish, get_path, set_path
from trtguard.release.manifest._settings import ManifestSettings
from trtguard.release.manifest._shapes import profile_from_shapes
from verifier.base import FileDigest, ImageReference, InputError, VerificationError, is_sha256_hex, short_repr
from verifier.manifest import parse_tensorrt_version

_TOP_LEVEL = frozenset(
    {
        "build_timestamp",
        "tensorrt_image",
        "input_onnx_hash",
        "calibration_dataset_hash",
        "builder_config",
        "output_engine_hash",
        "accuracy_metrics",
    }
)
_BUILDER = frozenset({"fp16_mode", "int8_mode", "max_batch_size", "max_workspace_size", "dynamic_shapes"})
_HEX = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")
_NGC_TAG = re.compile(r"[0-9]{2}\.[0-9]{2}(?:[-.].*)?")
_TRT_IN_TAG = re.compile(
    r"(?:^|[^a-z])(?:trt|tensorrt)[-_]?v?([0-9]+\.[0-9]+(?:\.[0-9]+){0,2})(?![0-9.])", re.IGNORECASE
)
_VERSION_AT_START = re.compile(r"([0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?)(?![0-9.])")
_CUDA_IN_TAG = re.compile(r"cuda[-_]?([0-9]+\.[0-9]+(?:\.[0-9]+)?)(?![0-9.])", re.IGNORECASE)


def import_flat(
    record: Any,
    *,
    settings: ManifestSettings | None = None,
    engine: tuple[str, FileDigest] | None = None,
) -> Draft:
    """Map ``record`` onto a manifest draft, completed with ``settings`` (flags and ``--config``).

    A value in ``settings`` fills in or replaces the record's (a replaced value is reported).
    ``engine`` is ``(file name, digest)`` of the engine file when the caller hashed it: its size and name
    are then filled in, and a digest that differs from ``output_engine_hash`` raises
    :class:`VerificationError`. Raises :class:`InputError` when the record is not a JSON object.
    """
    settings = settings or ManifestSettings()
    if not isinstance(record, Mapping):
        raise InputError(
            f"the flat record must be a JSON object, not {type(record).__name__}",
            hint="give the JSON file the build pipeline wrote (keys build_timestamp, tensorrt_image, …)",
        )
    document: dict[str, Any] = {}
    notes: list[Note] = []
    for key in record:
        if key not in _TOP_LEVEL:
            notes.append(
                Note(str(key), "not a field of the flat record format; map it by hand or drop it", True)
            )

    _timestamp(record, document, notes)
    tensorrt_release = _toolchain(record, document, notes)
    if settings.tensorrt_version is not None:
        try:
            tensorrt_release = parse_tensorrt_version(settings.tensorrt_version)
        except ValueError:
            tensorrt_release = None  # the manifest model reports the malformed version
    set_path(document, "build_node", {"gpu_name": None, "compute_capability": None, "driver_version": None})
    for field, how in (
        ("gpu_name", "name"),
        ("compute_capability", "compute_cap"),
        ("driver_version", "driver_version"),
    ):
        notes.append(
            Note(
                f"build_node.{field}",
                f"not in the flat record; add it (on the build node: nvidia-smi --query-gpu={how} "
                "--format=csv,noheader)",
                True,
            )
        )
    document["onnx"] = {"sha256": _hash(record, "input_onnx_hash", "onnx.sha256", notes)}
    _builder(record, document, notes, tensorrt_release)
    _calibration(record, document, notes)
    _engine(record, document, notes, engine)
    _accuracy(record, document, notes)
    document["audit_id"] = None
    notes.append(Note("audit_id", "not in the flat record; pass --audit-id", True))
    document["previous_manifest_digest"] = None
    document["previous_engine"] = None
    _overlay(document, notes, settings)
    return finish(document, notes)


# Settings that set one manifest field each.
_SETTING_PATHS = {
    "build_timestamp": "build_timestamp",
    "toolchain_image": "toolchain.image",
    "tensorrt_version": "toolchain.tensorrt_version",
    "cuda_version": "toolchain.cuda_version",
    "cudnn_version": "toolchain.cudnn_version",
    "gpu_name": "build_node.gpu_name",
    "compute_capability": "build_node.compute_capability",
    "driver_version": "build_node.driver_version",
    "onnx_name": "onnx.name",
    "onnx_uri": "onnx.uri",
    "engine_name": "output_engine.name",
    "audit_id": "audit_id",
    "previous_manifest_digest": "previous_manifest_digest",
    "previous_engine": "previous_engine",
}


def _overlay(document: dict[str, Any], notes: list[Note], settings: ManifestSettings) -> None:
    """Apply the user's values; each one settles the notes about its field."""

    def settle(path: str, value: Any, replaced: Any) -> None:
        notes[:] = [note for note in notes if not _within(note.field, path)]
        if replaced is not None and replaced != value:
            notes.append(
                Note(path, f"{short_repr(value)} given replaces the record's {short_repr(replaced)}", False)
            )

    for name, path in _SETTING_PATHS.items():
        value = getattr(settings, name)
        if value is not None:
            previous = get_path(document, path)
            set_path(document, path, value)
            settle(path, value, previous)
    if settings.builder_config is not None:
        config = document["builder_config"]
        for key, value in settings.builder_config.items():
            previous = config.get(key)
            config[key] = value
            settle(f"builder_config.{key}", value, previous)
    if settings.accuracy is not None:
        previous = document["accuracy"]
        document["accuracy"] = settings.accuracy
        settle("accuracy", settings.accuracy, previous or None)
    described = settings.calibration
    if described is not None:
        dataset = (document.get("calibration") or {}).get("dataset")
        if dataset is None:
            notes.append(
                Note(
                    "calibration.dataset",
                    "the calibration is described but the record has no calibration_dataset_hash",
                    True,
                )
            )
        else:
            dataset.update(described.model_dump(exclude_none=True))


def _within(field: str, path: str) -> bool:
    return field == path or field.startswith((f"{path}.", f"{path}["))


def _timestamp(record: Mapping[str, Any], document: dict[str, Any], notes: list[Note]) -> None:
    value = record.get("build_timestamp")
    if value is None:
        document["build_timestamp"] = None
        notes.append(
            Note("build_timestamp", "missing; add when the engine was built (RFC 3339 with time zone)", True)
        )
    elif isinstance(value, int | float) and not isinstance(value, bool):
        # A Unix time is unambiguous; write it in the manifest's form.
        try:
            converted = datetime.fromtimestamp(value, tz=UTC).isoformat().replace("+00:00", "Z")
        except (OverflowError, ValueError, OSError):  # Infinity, NaN, beyond year 9999
            raise InputError(
                f"build_timestamp {value!r} is not a Unix time trtguard can represent",
                location="build_timestamp",
                hint="give seconds since 1970 (or an RFC 3339 time with time zone)",
            ) from None
        document["build_timestamp"] = converted
        notes.append(Note("build_timestamp", f"Unix time {value} written as {converted}", False))
    elif isinstance(value, str):
        document["build_timestamp"] = value
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is None:
            notes.append(
                Note(
                    "build_timestamp",
                    f"{value!r} has no time zone, and trtguard will not guess one; append it (Z for UTC)",
                    True,
                )
            )
    else:
        document["build_timestamp"] = value


def _toolchain(
    record: Mapping[str, Any], document: dict[str, Any], notes: list[Note]
) -> tuple[int, ...] | None:
    toolchain: dict[str, Any] = {
        "image": None,
        "tensorrt_version": None,
        "cuda_version": None,
        "cudnn_version": None,
    }
    document["toolchain"] = toolchain
    image = record.get("tensorrt_image")
    release: tuple[int, ...] | None = None
    if image is None:
        notes.append(Note("toolchain.image", "missing; add the builder image pinned by digest", True))
    elif not isinstance(image, str):
        toolchain["image"] = image
        notes.append(Note("toolchain.image", f"expected an image reference string; got {image!r}", True))
    else:
        toolchain["image"] = image
        try:
            reference = ImageReference.parse(image)
        except InputError as error:
            notes.append(Note("toolchain.image", f"{error.message}; {error.hint}", True))
            reference = None
        if reference is not None:
            if reference.digest is None:
                notes.append(
                    Note(
                        "toolchain.image",
                        f"{image!r} has no digest, so it does not say which image was used; append "
                        "'@sha256:<digest>' (`trtguard digest IMAGE` prints the reference pinned)",
                        True,
                    )
                )
            release = _versions_from_tag(reference, toolchain, notes)
    if toolchain["tensorrt_version"] is None:
        notes.append(
            Note(
                "toolchain.tensorrt_version",
                "not in the flat record; add it (trtexec --getPlanVersionOnly reads it from the engine)",
                True,
            )
        )
    if toolchain["cuda_version"] is None:
        notes.append(
            Note("toolchain.cuda_version", "not in the flat record; add the CUDA version of the image", True)
        )
    return release


def _versions_from_tag(
    reference: ImageReference, toolchain: dict[str, Any], notes: list[Note]
) -> tuple[int, ...] | None:
    tag = reference.tag or ""
    if _NGC_TAG.fullmatch(tag) and reference.repository.endswith("tensorrt"):
        notes.append(
            Note(
                "toolchain.tensorrt_version",
                f"the NGC tag {tag!r} names a container release, not a TensorRT version; the NGC "
                "release notes map one to the other, and trtguard does not carry that table",
                False,
            )
        )
        return None
    match = _TRT_IN_TAG.search(tag)
    if match is None and reference.repository.split("/")[-1] == "tensorrt":
        match = _VERSION_AT_START.match(tag)
    release = None
    if match is not None:
        toolchain["tensorrt_version"] = match.group(1)
        release = parse_tensorrt_version(match.group(1))
        notes.append(
            Note(
                "toolchain.tensorrt_version",
                f"{match.group(1)} read from the image tag {tag!r}; check it",
                False,
            )
        )
    cuda = _CUDA_IN_TAG.search(tag)
    if cuda is not None:
        toolchain["cuda_version"] = cuda.group(1)
        notes.append(
            Note(
                "toolchain.cuda_version", f"{cuda.group(1)} read from the image tag {tag!r}; check it", False
            )
        )
    return release


def _hash(record: Mapping[str, Any], key: str, field: str, notes: list[Note]) -> Any:
    value = record.get(key)
    if value is None:
        notes.append(Note(field, f"missing ({key} is absent or null); add the SHA-256", True))
        return None
    match = _HEX.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        notes.append(Note(field, f"{key} is {value!r}, not a SHA-256 digest", True))
        return value
    digest = match.group(1).lower()
    if digest != value:
        notes.append(Note(field, f"{key} written as {digest} (bare lower-case hex)", False))
    return digest


def _builder(
    record: Mapping[str, Any], document: dict[str, Any], notes: list[Note], release: tuple[int, ...] | None
) -> None:
    flat = record.get("builder_config")
    config: dict[str, Any] = {"typing": "weak", "precision_flags": []}
    document["builder_config"] = config
    if flat is None:
        notes.append(Note("builder_config", "missing; add the builder settings", True))
        return
    if not isinstance(flat, Mapping):
        notes.append(Note("builder_config", f"expected an object; got {flat!r}", True))
        return
    for key in flat:
        if key not in _BUILDER:
            notes.append(
                Note(f"builder_config.{key}", "not a field of the flat record format; map it by hand", True)
            )
    notes.append(
        Note(
            "builder_config.typing",
            "'weak': the flat record describes builder precision flags (TensorRT <= 10)",
            False,
        )
    )
    for key, precision in (("fp16_mode", "fp16"), ("int8_mode", "int8")):
        value = flat.get(key)
        if value is True:
            config["precision_flags"].append(precision)
        elif value not in (False, None):
            notes.append(
                Note("builder_config.precision_flags", f"{key} is {value!r}, not true or false", True)
            )
    batch = flat.get("max_batch_size")
    if batch is not None:
        if release is not None and release[0] >= 10:
            notes.append(
                Note(
                    "builder_config.max_batch_size",
                    f"dropped ({batch}): TensorRT {'.'.join(map(str, release))} has no implicit batch; "
                    "the batch range belongs in optimization_profiles",
                    False,
                )
            )
        else:
            config["max_batch_size"] = batch
    workspace = flat.get("max_workspace_size")
    if workspace is not None:
        config["max_workspace_size"] = workspace
    shapes = flat.get("dynamic_shapes")
    if shapes is None or shapes is False:
        return
    profile = profile_from_shapes(shapes)
    if profile is None:
        notes.append(
            Note(
                "builder_config.optimization_profiles",
                f"dynamic_shapes {short_repr(shapes)} could not be read as shape ranges; write them as "
                '[{"inputs": {"<input>": {"min": [...], "opt": [...], "max": [...]}}}]',
                True,
            )
        )
    else:
        config["optimization_profiles"] = [{"inputs": profile}]


def _calibration(record: Mapping[str, Any], document: dict[str, Any], notes: list[Note]) -> None:
    if record.get("calibration_dataset_hash") is None:
        document["calibration"] = None
        if "int8" in document["builder_config"].get("precision_flags", []):
            notes.append(
                Note(
                    "calibration",
                    "int8_mode is on but the record names no calibration dataset; add calibration.dataset "
                    "and calibration.cache if the build was calibrated",
                    False,
                )
            )
        return
    digest = _hash(record, "calibration_dataset_hash", "calibration.dataset.sha256", notes)
    document["calibration"] = {"dataset": {"sha256": digest}}
    notes.append(
        Note(
            "calibration.cache",
            "the flat record has no calibration cache hash; without it a weakly typed INT8 build has no "
            "complete calibration evidence (add calibration.cache.sha256 if the cache was kept)",
            False,
        )
    )


def _engine(
    record: Mapping[str, Any],
    document: dict[str, Any],
    notes: list[Note],
    engine: tuple[str, FileDigest] | None,
) -> None:
    digest = _hash(record, "output_engine_hash", "output_engine.sha256", notes)
    size: int | None = None
    name: str | None = None
    if engine is not None:
        file_name, file_digest = engine
        if isinstance(digest, str) and is_sha256_hex(digest) and file_digest.sha256 != digest:
            raise VerificationError(
                f"the engine file's sha256 is {file_digest.sha256}, but the record says output_engine_hash "
                f"{digest}",
                location=file_name,
                hint="give the engine file this record describes",
            )
        digest = file_digest.sha256 if digest is None else digest
        size = file_digest.size
        name = file_name
    document["output_engine"] = {"sha256": digest, "size": size, "name": name}
    if size is None:
        notes.append(
            Note("output_engine.size", "not in the flat record; pass --engine FILE to read it", True)
        )
    if name is None:
        notes.append(Note("output_engine.name", "not in the flat record; pass --engine-name NAME", True))


def _accuracy(record: Mapping[str, Any], document: dict[str, Any], notes: list[Note]) -> None:
    metrics = record.get("accuracy_metrics")
    document["accuracy"] = []
    if metrics is None:
        return
    if not isinstance(metrics, Mapping):
        notes.append(
            Note(
                "accuracy",
                f"accuracy_metrics should be an object of name: value; got {short_repr(metrics)}",
                True,
            )
        )
        return
    for index, (metric, value) in enumerate(metrics.items()):
        document["accuracy"].append({"metric": metric, "value": value, "dataset": None})
        notes.append(
            Note(
                f"accuracy[{index}].dataset",
                f"the record does not say which dataset {metric} was measured on; add its name and sha256",
                True,
            )
        )
