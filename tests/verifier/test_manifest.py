"""verifier.manifest: the build manifest model, both TensorRT eras, loading and the JSON Schema."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # (a dev dependency through kubernetes-validate)
import pytest
from pydantic import ValidationError

from verifier.base._errors import InputError
from verifier.crypto._dsse import Envelope, sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, Statement, statement_from_envelope
from verifier.crypto._keys import generate_private_key
from verifier.manifest import (
    ENGINE_BUILD_PREDICATE_TYPE,
    EngineBuildManifest,
    load_manifest,
    manifest_json_schema,
    manifest_statement,
    parse_tensorrt_version,
)

_MISSING = object()


@pytest.fixture
def weak(data_dir: Path) -> dict[str, Any]:
    """Predicate of a weakly typed TensorRT 10.5 INT8 build."""
    document: dict[str, Any] = json.loads((data_dir / "202-manifest-trt10-weak-int8.json").read_text())
    return document


@pytest.fixture
def strong_statement(data_dir: Path) -> dict[str, Any]:
    """Statement around a strongly typed TensorRT 11.1 INT8 build."""
    document: dict[str, Any] = json.loads(
        (data_dir / "203-manifest-trt11-strong-int8-statement.json").read_text()
    )
    return document


@pytest.fixture
def strong(strong_statement: dict[str, Any]) -> dict[str, Any]:
    predicate: dict[str, Any] = copy.deepcopy(strong_statement["predicate"])
    return predicate


def _set(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``document`` with ``path`` (dots; digits index lists) set, or deleted for _MISSING."""
    result = copy.deepcopy(document)
    *parents, last = path.split(".")
    node: Any = result
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    key: Any = int(last) if last.isdigit() else last
    if value is _MISSING:
        del node[key]
    else:
        node[key] = value
    return result


def _problems(document: dict[str, Any]) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_manifest(document, "m.json")
    assert caught.value.location == "m.json"
    return caught.value.message.splitlines()[1:]


# --- both eras ----------------------------------------------------------------------------


def test_weak_tensorrt10_build(weak: dict[str, Any]) -> None:
    manifest = load_manifest(weak, "202")
    assert manifest.toolchain.tensorrt_release[0] == 10
    assert manifest.builder_config.typing == "weak"
    assert manifest.precisions() == frozenset({"fp32", "fp16", "int8"})
    assert manifest.uses_int8()
    assert manifest.has_calibration_evidence()
    assert manifest.accuracy_value("top1_acc") == 0.7612
    assert manifest.accuracy_value("top5_acc") is None
    assert manifest.builder_config.plugins[0].library_sha256.startswith("b5bb9d80")


def test_strong_tensorrt11_build(strong_statement: dict[str, Any]) -> None:
    manifest = load_manifest(strong_statement, "203")
    assert manifest.toolchain.tensorrt_release == (11, 1, 0, 106)
    assert manifest.builder_config.typing == "strong"
    assert manifest.builder_config.precision_flags == []
    assert manifest.precisions() == frozenset({"fp32", "fp16", "int8"})
    assert manifest.uses_int8()
    # Strong typing: the ModelOpt calibration dataset (bound to the hashed Q/DQ ONNX) is the evidence.
    assert manifest.calibration is not None and manifest.calibration.cache is None
    assert manifest.has_calibration_evidence()
    assert manifest.accuracy_value("miss_rate") == 0.081
    assert len(manifest.builder_config.optimization_profiles) == 2


def test_tensorrt8_implicit_batch_build(weak: dict[str, Any]) -> None:
    document = _set(weak, "toolchain.tensorrt_version", "8.5.3.1")
    document = _set(document, "builder_config.max_batch_size", 16)
    document = _set(document, "builder_config.version_compatible", False)
    document = _set(document, "builder_config.optimization_profiles", [])
    manifest = load_manifest(document, "trt8")
    assert manifest.builder_config.max_batch_size == 16


def test_fp32_only_build_has_no_int8(weak: dict[str, Any]) -> None:
    document = _set(weak, "builder_config.precision_flags", [])
    document = _set(document, "calibration", None)
    manifest = load_manifest(document, "fp32")
    assert manifest.precisions() == frozenset({"fp32"})
    assert not manifest.uses_int8()
    assert not manifest.has_calibration_evidence()


@pytest.mark.parametrize(
    ("changes", "evidence"),
    [
        ({"calibration.cache": None}, False),  # weak INT8 without the cache: allowed, but no evidence
        ({"calibration.dataset": None}, False),
        ({"calibration": None}, False),
        ({}, True),
    ],
)
def test_weak_calibration_evidence_needs_dataset_and_cache(
    weak: dict[str, Any], changes: dict[str, Any], evidence: bool
) -> None:
    document = weak
    for path, value in changes.items():
        document = _set(document, path, value)
    manifest = load_manifest(document, "weak")
    assert manifest.uses_int8()
    assert manifest.has_calibration_evidence() is evidence


def test_strong_without_calibration_dataset_has_no_evidence(strong: dict[str, Any]) -> None:
    manifest = load_manifest(_set(strong, "calibration", None), "strong")
    assert manifest.uses_int8()
    assert not manifest.has_calibration_evidence()


# --- round trips ----------------------------------------------------------------------------


def test_predicate_round_trip_is_lossless(weak: dict[str, Any]) -> None:
    manifest = load_manifest(weak, "202")
    dumped = manifest.model_dump(mode="json")
    assert dumped == weak
    assert EngineBuildManifest.model_validate_json(json.dumps(dumped)) == manifest


def test_statement_round_trip_keeps_offsets_and_fractions(strong_statement: dict[str, Any]) -> None:
    manifest = load_manifest(strong_statement, "203")
    statement = manifest_statement(manifest)
    again = json.loads(statement.to_json())
    assert again["_type"] == "https://in-toto.io/Statement/v1"
    assert again["predicateType"] == ENGINE_BUILD_PREDICATE_TYPE
    assert again["subject"] == [
        {"name": "detector-qdq.plan", "digest": {"sha256": manifest.output_engine.sha256}}
    ]
    assert again["predicate"]["build_timestamp"] == "2025-09-02T16:04:11.250000+02:00"
    assert load_manifest(again, "again") == manifest


def test_signed_envelope_statement_loads(weak: dict[str, Any]) -> None:
    manifest = load_manifest(weak, "202")
    envelope = sign_envelope(PAYLOAD_TYPE, manifest_statement(manifest).to_json(), generate_private_key())
    statement = statement_from_envelope(Envelope.from_json(envelope.to_json()))
    assert load_manifest(statement, "envelope") == manifest


def test_manifest_is_immutable(weak: dict[str, Any]) -> None:
    manifest = load_manifest(weak, "202")
    with pytest.raises(ValidationError):
        manifest.audit_id = "other"  # type: ignore[misc]


# --- Statement checks ----------------------------------------------------------------------------


def test_statement_subject_must_be_the_engine(strong_statement: dict[str, Any]) -> None:
    document = _set(strong_statement, "subject.0.digest.sha256", "0" * 64)
    with pytest.raises(InputError) as caught:
        load_manifest(document, "s.json")
    assert "output_engine.sha256" in caught.value.message
    assert "sha256:" + "0" * 64 in caught.value.message
    assert caught.value.hint == "the Statement's subject must be the engine file its predicate describes"


def test_statement_subject_name_may_differ(strong_statement: dict[str, Any]) -> None:
    document = _set(strong_statement, "subject.0.name", "renamed.engine")
    assert load_manifest(document, "s.json").output_engine.name == "detector-qdq.plan"


def test_statement_of_another_predicate_type_is_refused(strong_statement: dict[str, Any]) -> None:
    document = _set(strong_statement, "predicateType", "https://slsa.dev/provenance/v1")
    with pytest.raises(InputError) as caught:
        load_manifest(document, "s.json")
    assert caught.value.message == (
        f"predicateType is 'https://slsa.dev/provenance/v1', not {ENGINE_BUILD_PREDICATE_TYPE} (engine "
        "build manifest)"
    )


def test_invalid_predicate_inside_statement_names_predicate_path(strong_statement: dict[str, Any]) -> None:
    document = _set(strong_statement, "predicate.builder_config.typing", "weak")
    document = _set(document, "predicate.builder_config.network_precisions", [])
    document = _set(document, "predicate.builder_config.precision_flags", ["fp16", "int8"])
    (line,) = _problems(document)
    assert line.startswith(
        "  predicate.builder_config.typing: expected 'strong': TensorRT 11.1.0.106 has no weak"
    )


def test_malformed_statement_is_reported(strong_statement: dict[str, Any]) -> None:
    document = _set(strong_statement, "subject", [])
    lines = _problems(document)
    assert lines == ["  subject: expected at least 1 item(s); got []"]


def test_non_object_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        load_manifest([1, 2], "list.json")  # type: ignore[arg-type]
    assert caught.value.message == "engine build manifest must be a JSON object, not list"


# --- every validation rule: path, value and what was expected ---------------------------------

_HEX = "a" * 64
_RULES: list[tuple[str, Any, str, str]] = [
    # (path, value, reported path, reported line after the path)
    (
        "onnx.sha256",
        "sha256:" + _HEX,
        "onnx.sha256",
        "expected 64 lower-case hexadecimal characters without the 'sha256:' prefix; got \"sha256:aaaa",
    ),
    (
        "onnx.sha256",
        "A" * 64,
        "onnx.sha256",
        'expected a SHA-256 digest: 64 lower-case hexadecimal characters; got "AAAA',
    ),
    (
        "output_engine.sha256",
        "abc",
        "output_engine.sha256",
        'expected a SHA-256 digest: 64 lower-case hexadecimal characters; got "abc"',
    ),
    (
        "toolchain.image",
        "nvcr.io/nvidia/tensorrt:24.10-py3",
        "toolchain.image",
        "expected an image reference pinned by digest, e.g. 'nvcr.io/nvidia/tensorrt:24.05-py3@sha256:<64 "
        "hex>'; "
        'got "nvcr.io/nvidia/tensorrt:24.10-py3"',
    ),
    (
        "toolchain.image",
        "nvcr.io/NVIDIA/tensorrt@sha256:" + _HEX,
        "toolchain.image",
        "expected a valid image reference (repository path component 'NVIDIA' has upper-case letters)",
    ),
    (
        "toolchain.tensorrt_version",
        "ten",
        "toolchain.tensorrt_version",
        "expected a dotted version number such as '10.5.0.18'; got \"ten\"",
    ),
    (
        "build_timestamp",
        "2025-03-14T09:26:53",
        "build_timestamp",
        "expected an RFC 3339 timestamp with a time zone, e.g. '2025-05-01T12:00:00Z'; "
        'got "2025-03-14T09:26:53"',
    ),
    (
        "build_timestamp",
        1741944413,
        "build_timestamp",
        "expected an RFC 3339 timestamp with a time zone, e.g. '2025-05-01T12:00:00Z'; got 1741944413",
    ),
    (
        "build_node.compute_capability",
        "sm_90",
        "build_node.compute_capability",
        "expected a compute capability as nvidia-smi prints it, e.g. '9.0'; got \"sm_90\"",
    ),
    ("builder_config.typing", "mixed", "builder_config.typing", "expected 'weak' or 'strong'; got \"mixed\""),
    (
        "builder_config.precision_flags",
        ["fp16", "fp64"],
        "builder_config.precision_flags[1]",
        "expected 'fp16', 'bf16', 'int8', 'fp8', 'int4', 'fp4' or 'tf32'; got \"fp64\"",
    ),
    (
        "builder_config.precision_flags",
        ["fp16", "fp16"],
        "builder_config.precision_flags",
        "expected each value once; 'fp16' is listed twice",
    ),
    (
        "builder_config.network_precisions",
        ["fp16"],
        "builder_config.network_precisions",
        "expected network_precisions only on a strongly typed build",
    ),
    (
        "builder_config.max_workspace_size",
        1024,
        "builder_config.max_workspace_size",
        "expected the same value as memory_pool_limits.workspace (4294967296); both name the workspace "
        "pool limit; "
        "got 1024",
    ),
    (
        "builder_config.max_workspace_size",
        -1,
        "builder_config.max_workspace_size",
        "expected greater than or equal to 0; got -1",
    ),
    (
        "builder_config.memory_pool_limits",
        {"Workspace": 1},
        "builder_config.memory_pool_limits.Workspace (key)",
        'expected a string matching the pattern ^[a-z][a-z0-9_]*$; got "Workspace"',
    ),
    (
        "builder_config.builder_optimization_level",
        6,
        "builder_config.builder_optimization_level",
        "expected less than or equal to 5; got 6",
    ),
    ("builder_config.exclude_lean_runtime", True, "builder_config.exclude_lean_runtime", ""),
    (
        "builder_config.optimization_profiles.0.inputs.images.opt",
        [8, 3, 224],
        ("builder_config.optimization_profiles[0].inputs.images.opt"),
        "expected min, opt and max of the same rank; min has rank 4, opt has rank 3; got [8, 3, 224]",
    ),
    (
        "builder_config.optimization_profiles.0.inputs.images.opt",
        [64, 3, 224, 224],
        ("builder_config.optimization_profiles[0].inputs.images.max"),
        "expected min <= opt <= max in every dimension; dimension 0 is 1/64/32 (min/opt/max); got [32, 3, "
        "224, 224]",
    ),
    (
        "builder_config.optimization_profiles.0.inputs.images.min",
        [0, 3, -1, 224],
        ("builder_config.optimization_profiles[0].inputs.images.min[2]"),
        "expected greater than or equal to 0; got -1",
    ),
    (
        "builder_config.optimization_profiles.0.inputs",
        {},
        "builder_config.optimization_profiles[0].inputs",
        "expected at least 1 item(s); got {}",
    ),
    (
        "builder_config.plugins.0.library_sha256",
        None,
        "builder_config.plugins[0].library_sha256",
        "expected a string; got null",
    ),
    (
        "calibration",
        {},
        "calibration",
        "expected a dataset or a cache (or calibration: null when there was none); got {}",
    ),
    (
        "calibration.dataset.time_range",
        {"start": "2025-03-01T00:00:00Z", "end": "2025-02-01T00:00:00Z"},
        "calibration.dataset.time_range.end",
        'expected start no later than end; got "2025-02-01T00:00:00+00:00"',
    ),
    (
        "calibration.dataset.hash_method",
        "md5",
        "calibration.dataset.hash_method",
        "expected 'file' or 'trtguard-tree-v1'; got \"md5\"",
    ),
    ("accuracy.0.value", float("nan"), "accuracy[0].value", "expected a finite number; got NaN"),
    (
        "accuracy.0.dataset",
        {"name": "x"},
        "accuracy[0].dataset.sha256",
        "expected a value (this field is required)",
    ),
    (
        "previous_manifest_digest",
        _HEX,
        "previous_manifest_digest",
        "expected a digest of the form 'sha256:' followed by 64 lower-case hexadecimal characters; got "
        '"aaaa',
    ),
    ("audit_id", _MISSING, "audit_id", "expected a value (this field is required)"),
    ("audit_id", "", "audit_id", 'expected a string of at least 1 character(s); got ""'),
    (
        "toolchain.imag",
        "x",
        "toolchain.imag",
        "expected no field of this name (did you mean 'image'?); got \"x\"",
    ),
    ("builder_confg", {}, "builder_confg", "expected no field of this name (did you mean 'builder_config'?)"),
]


@pytest.mark.parametrize(
    ("path", "value", "where", "text"), _RULES, ids=[f"{r[0]}={r[1]!r}"[:60] for r in _RULES]
)
def test_validation_errors_name_path_value_and_expectation(
    weak: dict[str, Any], path: str, value: Any, where: str, text: str
) -> None:
    if path == "builder_config.exclude_lean_runtime":
        document = _set(_set(weak, "builder_config.version_compatible", False), path, value)
        text = (
            "expected exclude_lean_runtime only together with version_compatible: true (TensorRT ignores it "
            "otherwise); got true"
        )
    else:
        document = _set(weak, path, value)
    lines = _problems(document)
    assert any(line.startswith(f"  {where}: {text}") for line in lines), lines


def test_accuracy_metric_names_are_unique(weak: dict[str, Any]) -> None:
    document = _set(weak, "accuracy", weak["accuracy"] * 2)
    assert _problems(document) == [
        "  accuracy: expected each value once; 'top1_acc' is listed twice; got "
        + (json.dumps(weak["accuracy"] * 2)[:77] + "...")
    ]


def test_plugin_names_are_unique(weak: dict[str, Any]) -> None:
    # manifest diff keys plugins by name: a second entry of one name could hide a changed library.
    plugin = {"name": "CustomNMS", "version": "1", "library_sha256": "b5" * 32}
    document = _set(weak, "builder_config.plugins", [plugin, {**plugin, "library_sha256": "c6" * 32}])
    (line,) = _problems(document)
    assert line.startswith("  builder_config.plugins: expected each value once; 'CustomNMS' is listed twice")


@pytest.mark.parametrize(
    ("changes", "where", "text"),
    [
        (
            {"toolchain.tensorrt_version": "11.0.0.1"},
            "builder_config.typing",
            "expected 'strong': TensorRT 11.0.0.1 has no weak typing (removed in 11.0); got \"weak\"",
        ),
        (
            {"builder_config.max_batch_size": 8},
            "builder_config.max_batch_size",
            "expected null: TensorRT 10.5.0.18 has no implicit batch (removed in 10.0); record the batch "
            "range in "
            "optimization_profiles; got 8",
        ),
        (
            {"toolchain.tensorrt_version": "8.5.3.1"},
            "builder_config.version_compatible",
            "expected no version or hardware compatibility: TensorRT 8.5.3.1 predates them (added in "
            "8.6); got true",
        ),
        (
            {
                "builder_config.hardware_compatibility_level": "ampere_plus",
                "build_node.compute_capability": "7.5",
            },
            "builder_config.hardware_compatibility_level",
            "expected a build GPU of compute capability 8.0 or newer for 'ampere_plus'; "
            'build_node.compute_capability is 7.5; got "ampere_plus"',
        ),
    ],
)
def test_era_rules(weak: dict[str, Any], changes: dict[str, Any], where: str, text: str) -> None:
    document = weak
    for path, value in changes.items():
        document = _set(document, path, value)
    assert _problems(document) == [f"  {where}: {text}"]


@pytest.mark.parametrize(
    ("path", "value", "where", "text"),
    [
        (
            "builder_config.precision_flags",
            ["fp16"],
            "builder_config.precision_flags",
            "expected no precision flags on a strongly typed build (its precisions follow the ONNX model: "
            "list them "
            'in network_precisions); got ["fp16"]',
        ),
        (
            "builder_config.max_batch_size",
            4,
            "builder_config.max_batch_size",
            "expected no max_batch_size on a strongly typed build (implicit batch needs weak typing; "
            "record the "
            "batch range in optimization_profiles); got 4",
        ),
        (
            "calibration.cache",
            {"sha256": _HEX},
            "calibration.cache",
            "expected no calibration cache on a strongly typed build (TensorRT uses no calibrator there; "
            "the scales "
            'are in the quantized ONNX): record the ModelOpt calibration dataset instead; got "aaaa',
        ),
    ],
)
def test_strong_typing_rules(strong: dict[str, Any], path: str, value: Any, where: str, text: str) -> None:
    (line,) = _problems(_set(strong, path, value))
    assert line.startswith(f"  {where}: {text}")


def test_all_problems_reported_at_once(weak: dict[str, Any]) -> None:
    document = _set(weak, "onnx.sha256", "x")
    document = _set(document, "audit_id", _MISSING)
    document = _set(document, "builder_config.typing", "mixed")
    lines = _problems(document)
    assert [line.split(":")[0].strip() for line in lines] == [
        "onnx.sha256",
        "builder_config.typing",
        "audit_id",
    ]


# --- JSON Schema ----------------------------------------------------------------------------


def test_json_schema_accepts_the_examples_and_rejects_unknown_fields(
    weak: dict[str, Any], strong: dict[str, Any]
) -> None:
    schema = manifest_json_schema()
    assert schema["$id"] == ENGINE_BUILD_PREDICATE_TYPE
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    validator.validate(weak)
    validator.validate(strong)
    assert not validator.is_valid(_set(weak, "surprise", 1))
    assert not validator.is_valid(_set(weak, "onnx.sha256", "sha256:" + _HEX))
    assert not validator.is_valid(_set(weak, "builder_config.typing", "mixed"))
    assert set(schema["required"]) == {
        "build_timestamp",
        "toolchain",
        "build_node",
        "onnx",
        "builder_config",
        "output_engine",
        "audit_id",
    }


def test_json_schema_is_json() -> None:
    assert json.loads(json.dumps(manifest_json_schema())) == manifest_json_schema()


@pytest.mark.parametrize(
    ("text", "release"), [("10.5.0.18", (10, 5, 0, 18)), ("11.1", (11, 1)), ("8.6.1", (8, 6, 1))]
)
def test_parse_tensorrt_version(text: str, release: tuple[int, ...]) -> None:
    assert parse_tensorrt_version(text) == release


@pytest.mark.parametrize("text", ["10", "10.5.0.18.1", "v10.5", "10.x", ""])
def test_parse_tensorrt_version_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a dotted version number"):
        parse_tensorrt_version(text)


def test_statement_type_is_the_intoto_model(weak: dict[str, Any]) -> None:
    statement = manifest_statement(load_manifest(weak, "202"))
    assert isinstance(statement, Statement)
    assert statement.subject_digests() == frozenset({"sha256:" + weak["output_engine"]["sha256"]})
