"""verifier.manifest_diff: field differences and their classification."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from verifier.manifest import EngineBuildManifest, load_manifest
from verifier.manifest_diff import ChangeKind, FieldChange, diff_manifests

K = ChangeKind
_DIGEST_B = "b" * 64


@pytest.fixture
def base(data_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((data_dir / "202-manifest-trt10-weak-int8.json").read_text())
    return document


@pytest.fixture
def strong(data_dir: Path) -> dict[str, Any]:
    document = json.loads((data_dir / "203-manifest-trt11-strong-int8-statement.json").read_text())
    predicate: dict[str, Any] = document["predicate"]
    return predicate


def _with(document: dict[str, Any], **changes: Any) -> EngineBuildManifest:
    """``document`` with dotted paths (``__`` for ``.``, digits index lists) replaced."""
    result = copy.deepcopy(document)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node: Any = result
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return load_manifest(result, "test")


_FP16_ONLY = {"builder_config__precision_flags": ["fp16"], "calibration": None}
_NMS = {"name": "CustomNMS", "version": "1", "library_sha256": "b5" * 32}
_OTHER_PLUGIN = {"name": "RoIAlign", "version": "1", "library_sha256": "c6" * 32}

# (name, old changes, new changes, expected kinds)
_TABLE: list[tuple[str, dict[str, Any], dict[str, Any], set[ChangeKind]]] = [
    ("first INT8", _FP16_ONLY, {}, {K.FIRST_INT8, K.PRECISION_CHANGE, K.CALIBRATION_DATA_CHANGE}),
    ("INT8 dropped", {}, _FP16_ONLY, {K.PRECISION_CHANGE, K.CALIBRATION_DATA_CHANGE}),
    ("bf16 added", {}, {"builder_config__precision_flags": ["fp16", "int8", "bf16"]}, {K.PRECISION_CHANGE}),
    ("flag order only", {}, {"builder_config__precision_flags": ["int8", "fp16"]}, set()),
    ("TensorRT minor", {}, {"toolchain__tensorrt_version": "10.8.0.43"}, {K.TENSORRT_MINOR_UPGRADE}),
    ("TensorRT build", {}, {"toolchain__tensorrt_version": "10.5.0.19"}, {K.TENSORRT_MINOR_UPGRADE}),
    (
        "TensorRT same release spelled short",
        {"toolchain__tensorrt_version": "10.5"},
        {"toolchain__tensorrt_version": "10.5.0.0"},
        set(),
    ),
    ("TensorRT downgrade", {}, {"toolchain__tensorrt_version": "10.3.0.26"}, {K.TENSORRT_DOWNGRADE}),
    ("CUDA", {}, {"toolchain__cuda_version": "12.8.0"}, {K.CUDA_VERSION_CHANGE}),
    ("cuDNN", {}, {"toolchain__cudnn_version": None}, {K.CUDNN_VERSION_CHANGE}),
    (
        "image digest",
        {},
        {"toolchain__image": "nvcr.io/nvidia/tensorrt:24.10-py3@sha256:" + _DIGEST_B},
        {K.TOOLCHAIN_IMAGE_CHANGE},
    ),
    (
        "image repository",
        {},
        {
            "toolchain__image": "registry.corp.example/trt/builder:24.10-py3@sha256:"
            "5d4d4b1e1a5f1b3a6c8a9f7e0d2c4b6a8e0f1d3c5b7a9e1f3d5c7b9a1e3f5d7c"
        },
        {K.TOOLCHAIN_IMAGE_CHANGE},
    ),
    (
        "image tag only",
        {},
        {
            "toolchain__image": "nvcr.io/nvidia/tensorrt:latest@sha256:"
            "5d4d4b1e1a5f1b3a6c8a9f7e0d2c4b6a8e0f1d3c5b7a9e1f3d5c7b9a1e3f5d7c"
        },
        set(),
    ),
    (
        "GPU",
        {},
        {"build_node__gpu_name": "NVIDIA A100-SXM4-80GB", "build_node__compute_capability": "8.0"},
        {K.BUILD_GPU_CHANGE},
    ),
    ("driver only", {}, {"build_node__driver_version": "570.86.15"}, set()),
    ("ONNX", {}, {"onnx__sha256": _DIGEST_B}, {K.ONNX_MODEL_CHANGE}),
    ("ONNX uri only", {}, {"onnx__uri": "s3://mirror/resnet50.onnx"}, set()),
    ("calibration data", {}, {"calibration__dataset__sha256": _DIGEST_B}, {K.CALIBRATION_DATA_CHANGE}),
    ("calibration cache", {}, {"calibration__cache__sha256": _DIGEST_B}, {K.CALIBRATION_DATA_CHANGE}),
    (
        "calibration sampling",
        {},
        {"calibration__dataset__sampling": "every frame"},
        {K.CALIBRATION_DATA_CHANGE},
    ),
    (
        "profile max",
        {},
        {"builder_config__optimization_profiles__0__inputs__images__max": [64, 3, 224, 224]},
        {K.DYNAMIC_SHAPE_CHANGE, K.BATCH_SIZE_CHANGE},
    ),
    (
        "profile opt",
        {},
        {"builder_config__optimization_profiles__0__inputs__images__opt": [16, 3, 224, 224]},
        {K.DYNAMIC_SHAPE_CHANGE},
    ),
    (
        "profile added",
        {},
        {
            "builder_config__optimization_profiles": [
                {
                    "inputs": {
                        "images": {"min": [1, 3, 224, 224], "opt": [8, 3, 224, 224], "max": [32, 3, 224, 224]}
                    }
                },
                {
                    "inputs": {
                        "images": {"min": [1, 3, 448, 448], "opt": [1, 3, 448, 448], "max": [4, 3, 448, 448]}
                    }
                },
            ]
        },
        {K.DYNAMIC_SHAPE_CHANGE},
    ),
    (
        "implicit batch",
        {"toolchain__tensorrt_version": "8.6.1.6", "builder_config__max_batch_size": 8},
        {"toolchain__tensorrt_version": "8.6.1.6", "builder_config__max_batch_size": 16},
        {K.BATCH_SIZE_CHANGE},
    ),
    (
        "workspace",
        {},
        {"builder_config__max_workspace_size": 2**33, "builder_config__memory_pool_limits": {}},
        {K.WORKSPACE_CHANGE},
    ),
    (
        "tactic pool",
        {},
        {"builder_config__memory_pool_limits": {"workspace": 2**32, "tactic_dram": 2**30}},
        {K.WORKSPACE_CHANGE},
    ),
    (
        "hardware compatibility",
        {},
        {"builder_config__hardware_compatibility_level": "ampere_plus"},
        {K.HARDWARE_COMPATIBILITY_CHANGE},
    ),
    (
        "version compatibility",
        {},
        {"builder_config__version_compatible": False},
        {K.HARDWARE_COMPATIBILITY_CHANGE},
    ),
    (
        "optimization level",
        {},
        {"builder_config__builder_optimization_level": 5},
        {K.OPTIMIZATION_LEVEL_CHANGE},
    ),
    ("plugin library", {}, {"builder_config__plugins__0__library_sha256": _DIGEST_B}, {K.PLUGIN_CHANGE}),
    ("plugin removed", {}, {"builder_config__plugins": []}, {K.PLUGIN_CHANGE}),
    ("accuracy drop", {}, {"accuracy__0__value": 0.7501}, {K.ACCURACY_DROP}),
    ("accuracy gain", {}, {"accuracy__0__value": 0.77}, set()),
    (
        "accuracy dataset",
        {},
        {"accuracy__0__dataset__sha256": _DIGEST_B, "accuracy__0__value": 0.70},
        {K.ACCURACY_DATASET_CHANGE},
    ),
    ("accuracy removed", {}, {"accuracy": []}, {K.ACCURACY_METRIC_REMOVED}),
    (
        "accuracy drop behind a flipped direction",
        {},
        {"accuracy__0__value": 0.5, "accuracy__0__higher_is_better": False},
        {K.ACCURACY_DROP},
    ),
    (
        "accuracy gain with a flipped direction",
        {},
        {"accuracy__0__value": 0.77, "accuracy__0__higher_is_better": False},
        set(),
    ),
    (
        "plugin order only",
        {"builder_config__plugins": [_NMS, _OTHER_PLUGIN]},
        {"builder_config__plugins": [_OTHER_PLUGIN, _NMS]},
        set(),
    ),
    (
        "plugin version",
        {"builder_config__plugins": [_NMS, _OTHER_PLUGIN]},
        {"builder_config__plugins": [_NMS, {**_OTHER_PLUGIN, "version": "2"}]},
        {K.PLUGIN_CHANGE},
    ),
    (
        "bookkeeping only",
        {},
        {
            "build_timestamp": "2025-04-01T00:00:00Z",
            "audit_id": "CHG-9",
            "output_engine__sha256": _DIGEST_B,
            "previous_manifest_digest": None,
        },
        set(),
    ),
]


@pytest.mark.parametrize(("old", "new", "kinds"), [row[1:] for row in _TABLE], ids=[row[0] for row in _TABLE])
def test_classification(
    base: dict[str, Any], old: dict[str, Any], new: dict[str, Any], kinds: set[ChangeKind]
) -> None:
    result = diff_manifests(_with(base, **old), _with(base, **new))
    assert result.kinds == kinds
    assert bool(result) == bool(result.fields)


def test_identical_manifests_have_no_differences(base: dict[str, Any]) -> None:
    result = diff_manifests(_with(base), _with(base))
    assert not result
    assert result.changes == () and result.fields == ()
    assert result.to_json() == {"changes": [], "fields": []}


def test_tensorrt_major_upgrade_to_strong_typing(base: dict[str, Any], strong: dict[str, Any]) -> None:
    old = _with(base)
    new = load_manifest(strong, "strong")
    result = diff_manifests(old, new)
    assert {
        K.TENSORRT_MAJOR_UPGRADE,
        K.TYPING_CHANGE,
        K.ONNX_MODEL_CHANGE,
        K.CALIBRATION_DATA_CHANGE,
    } <= result.kinds
    assert K.FIRST_INT8 not in result.kinds  # INT8 before (flag) and after (network precision)
    assert K.PRECISION_CHANGE not in result.kinds
    major = next(change for change in result.changes if change.kind is K.TENSORRT_MAJOR_UPGRADE)
    assert (major.old, major.new) == ("10.5.0.18", "11.1.0.106")
    assert major.summary == "TensorRT: 10.5.0.18 → 11.1.0.106"
    assert major.paths == ("toolchain.tensorrt_version",)
    calibration = next(change for change in result.changes if change.kind is K.CALIBRATION_DATA_CHANGE)
    assert calibration.summary.startswith("calibration: dataset ")
    assert "cache removed" in calibration.summary


def test_accuracy_drop_reports_its_size(base: dict[str, Any]) -> None:
    result = diff_manifests(_with(base), _with(base, accuracy__0__value=0.7512))
    (drop,) = result.changes
    assert drop.kind is K.ACCURACY_DROP
    assert drop.amount == pytest.approx(0.01)
    assert (drop.old, drop.new) == (0.7612, 0.7512)
    assert drop.paths == ("accuracy[metric=top1_acc].value",)
    assert drop.summary == "top1_acc 0.7612 → 0.7512 (worse by 0.01, 1.31%) on imagenet-val-2012"


def test_accuracy_tolerance(base: dict[str, Any]) -> None:
    old, new = _with(base), _with(base, accuracy__0__value=0.7602)
    assert diff_manifests(old, new).kinds == {K.ACCURACY_DROP}
    assert diff_manifests(old, new, accuracy_tolerance=0.002).kinds == set()
    with pytest.raises(ValueError, match="accuracy_tolerance"):
        diff_manifests(old, new, accuracy_tolerance=-1)


def test_a_flipped_direction_is_judged_by_the_old_manifest(base: dict[str, Any]) -> None:
    result = diff_manifests(
        _with(base), _with(base, accuracy__0__value=0.5, accuracy__0__higher_is_better=False)
    )
    drop = next(change for change in result.changes if change.kind is K.ACCURACY_DROP)
    assert drop.amount == pytest.approx(0.2612)
    assert "judged by the old manifest's higher_is_better: True" in drop.summary


def test_lower_is_better_metric(strong: dict[str, Any]) -> None:
    old = _with(strong)
    worse = _with(strong, accuracy__1__value=0.09)
    better = _with(strong, accuracy__1__value=0.05)
    (drop,) = diff_manifests(old, worse).changes
    assert drop.kind is K.ACCURACY_DROP
    assert drop.amount == pytest.approx(0.009)
    assert diff_manifests(old, better).kinds == set()


def test_batch_size_from_profiles_reports_the_increase(base: dict[str, Any]) -> None:
    result = diff_manifests(
        _with(base),
        _with(base, builder_config__optimization_profiles__0__inputs__images__max=[64, 3, 224, 224]),
    )
    batch = next(change for change in result.changes if change.kind is K.BATCH_SIZE_CHANGE)
    assert (batch.old, batch.new, batch.amount) == (32, 64, 32.0)
    shape = next(change for change in result.changes if change.kind is K.DYNAMIC_SHAPE_CHANGE)
    assert (
        shape.summary == "optimization profiles: profile 0 'images' max [32, 3, 224, 224] → [64, 3, 224, 224]"
    )


def test_workspace_change_amount(base: dict[str, Any]) -> None:
    result = diff_manifests(
        _with(base),
        _with(base, builder_config__max_workspace_size=2**33, builder_config__memory_pool_limits={}),
    )
    (change,) = result.changes
    assert change.amount == float(2**32)
    assert change.summary == "workspace / memory pools: workspace=4294967296 → workspace=8589934592"


def test_workspace_limit_under_either_name_is_one_fact(base: dict[str, Any]) -> None:
    limit = 2**32
    as_pool = _with(
        base, builder_config__max_workspace_size=None, builder_config__memory_pool_limits={"workspace": limit}
    )
    as_size = _with(base, builder_config__max_workspace_size=limit, builder_config__memory_pool_limits={})
    assert as_pool.builder_config == as_size.builder_config
    assert as_pool.builder_config.max_workspace_size == limit
    assert not diff_manifests(as_pool, as_size).changes


def test_field_changes_list_every_leaf(base: dict[str, Any]) -> None:
    result = diff_manifests(
        _with(base),
        _with(
            base,
            audit_id="CHG-9",
            builder_config__plugins__0__version="2",
            accuracy__0__value=0.8,
            builder_config__optimization_profiles__0__inputs__images__opt=[16, 3, 224, 224],
        ),
    )
    assert result.fields == (
        FieldChange(
            "builder_config.optimization_profiles[0].inputs.images.opt", [8, 3, 224, 224], [16, 3, 224, 224]
        ),
        FieldChange("builder_config.plugins[name=CustomNMS].version", "1", "2"),
        FieldChange("accuracy[metric=top1_acc].value", 0.7612, 0.8),
        FieldChange("audit_id", "CHG-2025-0142", "CHG-9"),
    )


def test_added_subtree_is_listed_leaf_by_leaf(base: dict[str, Any]) -> None:
    result = diff_manifests(_with(base, calibration=None), _with(base))
    paths = [change.path for change in result.fields]
    assert "calibration.dataset.sha256" in paths
    assert "calibration.cache.algorithm" in paths
    added = next(change for change in result.fields if change.path == "calibration.dataset.sha256")
    assert added.old is None


def test_json_form_is_serialisable(base: dict[str, Any], strong: dict[str, Any]) -> None:
    result = diff_manifests(_with(base), load_manifest(strong, "strong"))
    document = json.loads(json.dumps(result.to_json()))
    assert {change["kind"] for change in document["changes"]} == {kind.value for kind in result.kinds}
    assert all(
        set(change) == {"kind", "summary", "paths", "old", "new", "amount"} for change in document["changes"]
    )
    assert all(set(field) == {"path", "old", "new"} for field in document["fields"])
