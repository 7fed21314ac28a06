"""trtguard.release.manifest._flat: the flat build record → build manifest draft (``manifest import``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from trtguard.release.manifest._flat import import_flat
from trtguard.release.manifest._settings import ManifestSettings
from verifier.base._digests import hash_file
from verifier.base._errors import InputError, VerificationError

IMAGE = "nvcr.io/nvidia/tensorrt:24.05-py3@sha256:" + "5d" * 32


@pytest.fixture
def record(data_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((data_dir / "201-flat-record-missing-fields.json").read_text())
    return document


def _completing_settings() -> ManifestSettings:
    return ManifestSettings(
        build_timestamp="2024-06-01T10:15:00+02:00",
        toolchain_image=IMAGE,
        tensorrt_version="8.6.1.6",
        cuda_version="12.4.1",
        gpu_name="NVIDIA A100-SXM4-80GB",
        compute_capability="8.0",
        driver_version="550.54.15",
        audit_id="CHG-2024-0042",
        accuracy=[
            {"metric": "top1_acc", "value": 0.7612, "dataset": {"name": "imagenet-val", "sha256": "7d" * 32}},
        ],
    )


def test_sample_record_lists_every_gap(record: dict[str, Any]) -> None:
    draft = import_flat(record, settings=ManifestSettings(engine_name="resnet50.plan"))
    assert draft.manifest is None
    assert [(note.field, note.blocking) for note in draft.notes] == [
        ("build_timestamp", True),
        ("toolchain.image", True),
        ("toolchain.tensorrt_version", False),
        ("toolchain.tensorrt_version", True),
        ("toolchain.cuda_version", True),
        ("build_node.gpu_name", True),
        ("build_node.compute_capability", True),
        ("build_node.driver_version", True),
        ("onnx.sha256", False),
        ("builder_config.strict_types", True),
        ("builder_config.typing", False),
        ("calibration", False),
        ("output_engine.size", True),
        ("accuracy[0].dataset", True),
        ("accuracy[1].dataset", True),
        ("audit_id", True),
    ]
    messages = {note.field: note.message for note in draft.notes if note.blocking}
    assert messages["build_timestamp"] == (
        "'2024-06-01T10:15:00' has no time zone, and trtguard will not guess one; append it (Z for UTC)"
    )
    assert messages["toolchain.image"].startswith(
        "'nvcr.io/nvidia/tensorrt:24.05-py3' has no digest, so it does not say which image was used; append "
        "'@sha256:<digest>'"
    )
    assert messages["builder_config.strict_types"] == "not a field of the flat record format; map it by hand"
    assert messages["accuracy[1].dataset"] == (
        "the record does not say which dataset psnr_db was measured on; add its name and sha256"
    )
    assert messages["build_node.compute_capability"] == (
        "not in the flat record; add it (on the build node: nvidia-smi --query-gpu=compute_cap "
        "--format=csv,noheader)"
    )
    info = {note.field: note.message for note in draft.notes if not note.blocking}
    assert info["toolchain.tensorrt_version"].startswith("the NGC tag '24.05-py3' names a container release")
    assert info["onnx.sha256"] == (
        "input_onnx_hash written as 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 "
        "(bare lower-case hex)"
    )
    assert info["calibration"].startswith("int8_mode is on but the record names no calibration dataset")


def test_sample_record_maps_what_it_can(record: dict[str, Any]) -> None:
    document = import_flat(record).document
    assert document["onnx"] == {"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
    assert document["builder_config"] == {
        "typing": "weak",
        "precision_flags": ["fp16", "int8"],
        "max_batch_size": 16,
        "max_workspace_size": 2147483648,
        "optimization_profiles": [
            {
                "inputs": {
                    "images": {"min": [1, 3, 224, 224], "opt": [8, 3, 224, 224], "max": [16, 3, 224, 224]}
                }
            }
        ],
    }
    assert document["output_engine"] == {
        "sha256": "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752",
        "size": None,
        "name": None,
    }
    assert document["accuracy"] == [
        {"metric": "top1_acc", "value": 0.7612, "dataset": None},
        {"metric": "psnr_db", "value": 38.4, "dataset": None},
    ]
    assert document["build_node"] == {"gpu_name": None, "compute_capability": None, "driver_version": None}
    assert document["audit_id"] is None
    assert document["calibration"] is None
    # The draft is JSON as it stands (nulls are explicit placeholders).
    assert json.loads(json.dumps(document)) == document


def test_settings_and_engine_file_complete_the_record(record: dict[str, Any], tmp_path: Path) -> None:
    engine = tmp_path / "resnet50.plan"
    engine.write_bytes(b"ftrt" + bytes(100))
    digest = hash_file(engine)
    complete = copy.deepcopy(record)
    del complete["builder_config"]["strict_types"]
    complete["output_engine_hash"] = digest.sha256
    complete["calibration_dataset_hash"] = "2c" * 32
    draft = import_flat(complete, settings=_completing_settings(), engine=(engine.name, digest))
    assert draft.missing == ()
    manifest = draft.manifest
    assert manifest is not None
    assert manifest.output_engine.size == 104
    assert manifest.output_engine.name == "resnet50.plan"
    assert manifest.toolchain.image == IMAGE
    assert manifest.builder_config.max_batch_size == 16
    assert manifest.precisions() == frozenset({"fp32", "fp16", "int8"})
    assert manifest.calibration is not None and manifest.calibration.dataset is not None
    assert not manifest.has_calibration_evidence()  # no cache in the flat record
    replaced = {note.field: note.message for note in draft.notes}
    assert replaced["toolchain.image"].startswith("'nvcr.io/nvidia/tensorrt:24.05-py3@sha256:5d5d")
    assert "replaces the record's 'nvcr.io/nvidia/tensorrt:24.05-py3'" in replaced["toolchain.image"]
    assert "replaces the record's [{'metric': 'top1_acc'" in replaced["accuracy"]


def test_tensorrt10_given_drops_the_implicit_batch(record: dict[str, Any]) -> None:
    draft = import_flat(record, settings=ManifestSettings(tensorrt_version="10.0.1.6"))
    assert "max_batch_size" not in draft.document["builder_config"]
    note = next(note for note in draft.notes if note.field == "builder_config.max_batch_size")
    assert not note.blocking
    assert note.message == (
        "dropped (16): TensorRT 10.0.1.6 has no implicit batch; the batch range belongs in "
        "optimization_profiles"
    )


def test_engine_file_must_match_the_record(record: dict[str, Any], tmp_path: Path) -> None:
    engine = tmp_path / "other.plan"
    engine.write_bytes(b"not the engine")
    with pytest.raises(VerificationError) as caught:
        import_flat(record, engine=(engine.name, hash_file(engine)))
    assert "but the record says output_engine_hash 60303ae2" in caught.value.message
    assert caught.value.exit_code == 1


def test_record_must_be_an_object() -> None:
    with pytest.raises(InputError, match="the flat record must be a JSON object, not list"):
        import_flat([1, 2])


def test_unknown_top_level_keys_block(record: dict[str, Any]) -> None:
    draft = import_flat({**record, "trt_logs": "…"})
    note = next(note for note in draft.notes if note.field == "trt_logs")
    assert note.blocking
    assert note.message == "not a field of the flat record format; map it by hand or drop it"


def test_unix_time_is_converted(record: dict[str, Any]) -> None:
    draft = import_flat({**record, "build_timestamp": 1717236900})
    assert draft.document["build_timestamp"] == "2024-06-01T10:15:00Z"
    assert not any(note.blocking for note in draft.notes if note.field == "build_timestamp")


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, -1e300])
def test_unix_time_out_of_range_is_an_input_error(record: dict[str, Any], value: float) -> None:
    with pytest.raises(InputError, match="not a Unix time trtguard can represent") as raised:
        import_flat({**record, "build_timestamp": value})
    assert raised.value.location == "build_timestamp"


@pytest.mark.parametrize(
    "shapes",
    [
        {"x": {"min": [1, 3], "opt": [2, 3], "max": [4, 3]}},
        {"x": {"min": "1x3", "opt": "2x3", "max": "4x3"}},
        {"x": [[1, 3], [2, 3], [4, 3]]},
        {"min_shapes": "x:1x3", "opt_shapes": "x:2x3", "max_shapes": "x:4x3"},
    ],
)
def test_dynamic_shape_forms(record: dict[str, Any], shapes: Any) -> None:
    changed = copy.deepcopy(record)
    changed["builder_config"]["dynamic_shapes"] = shapes
    profiles = import_flat(changed).document["builder_config"]["optimization_profiles"]
    assert profiles == [{"inputs": {"x": {"min": [1, 3], "opt": [2, 3], "max": [4, 3]}}}]


@pytest.mark.parametrize("shapes", [True, "x:1x3", {"x": "1x3"}, {"x": {"min": [1], "max": [2]}}, {}])
def test_unreadable_dynamic_shapes_block(record: dict[str, Any], shapes: Any) -> None:
    changed = copy.deepcopy(record)
    changed["builder_config"]["dynamic_shapes"] = shapes
    draft = import_flat(changed)
    note = next(note for note in draft.notes if note.field == "builder_config.optimization_profiles")
    assert note.blocking
    assert "could not be read as shape ranges" in note.message


def test_no_dynamic_shapes(record: dict[str, Any]) -> None:
    changed = copy.deepcopy(record)
    changed["builder_config"]["dynamic_shapes"] = False
    assert "optimization_profiles" not in import_flat(changed).document["builder_config"]


@pytest.mark.parametrize(
    ("image", "tensorrt", "cuda"),
    [
        ("registry.corp.example/ml/tensorrt:10.5.0-cuda12.6-py3@sha256:" + "ab" * 32, "10.5.0", "12.6"),
        ("registry.corp.example/ml/engine-builder:trt10.3.0.26@sha256:" + "ab" * 32, "10.3.0.26", None),
        ("registry.corp.example/ml/engine-builder:1.2.3@sha256:" + "ab" * 32, None, None),
        ("nvcr.io/nvidia/tensorrt:24.05-py3@sha256:" + "ab" * 32, None, None),
    ],
)
def test_versions_read_from_the_image_tag(
    record: dict[str, Any], image: str, tensorrt: str | None, cuda: str | None
) -> None:
    draft = import_flat({**record, "tensorrt_image": image})
    toolchain = draft.document["toolchain"]
    assert (toolchain["tensorrt_version"], toolchain["cuda_version"]) == (tensorrt, cuda)
    assert not any(note.field == "toolchain.image" for note in draft.notes)
    if tensorrt is not None:
        note = next(note for note in draft.notes if note.field == "toolchain.tensorrt_version")
        assert note.message.endswith(
            "read from the image tag " + repr(image.split(":")[1].split("@", maxsplit=1)[0]) + "; check it"
        )


def test_invalid_values_are_kept_and_reported(record: dict[str, Any]) -> None:
    draft = import_flat(
        {**record, "input_onnx_hash": "md5:abc", "tensorrt_image": "nvcr.io/NVIDIA/tensorrt:x"}
    )
    notes = {note.field: note for note in draft.notes if note.blocking}
    assert notes["onnx.sha256"].message == "input_onnx_hash is 'md5:abc', not a SHA-256 digest"
    assert draft.document["onnx"]["sha256"] == "md5:abc"
    assert notes["toolchain.image"].message.startswith(
        "repository path component 'NVIDIA' has upper-case letters"
    )
