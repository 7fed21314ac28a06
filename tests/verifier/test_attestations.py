"""verifier.attestations: predicate types, the verification and approval predicates."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_BUILD_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    ChangeApproval,
    ChangeKind,
    EngineVerification,
    load_approval,
    load_verification,
)
from verifier.base._errors import InputError
from verifier.crypto._intoto import ResourceDescriptor, Statement

ENGINE = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"


def _verification() -> dict[str, Any]:
    return {
        "verified_at": "2025-03-15T08:00:00Z",
        "verifier": {"name": "trtguard", "version": "0.1.0"},
        "engine": {"name": "resnet50-int8.plan", "sha256": ENGINE, "size": 103809024},
        "manifest_digest": "sha256:" + "4" * 64,
        "runtime": {
            "module": "tensorrt_lean",
            "tensorrt_version": "11.4.0.106",
            "plan_tensorrt_version": "10.5.0.18",
        },
        "gpu": {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.159.04"},
        "io_tensors": [
            {"name": "images", "mode": "input", "dtype": "float32", "shape": [-1, 3, 224, 224]},
            {"name": "logits", "mode": "output", "dtype": "float32", "shape": [-1, 1000]},
        ],
        "optimization_profiles": [
            {
                "inputs": {
                    "images": {"min": [1, 3, 224, 224], "opt": [8, 3, 224, 224], "max": [32, 3, 224, 224]}
                }
            }
        ],
        "layer_precisions": None,
        "checks": [
            {"field": "output_engine.sha256", "status": "pass", "declared": ENGINE, "observed": ENGINE},
            {"field": "builder_config.optimization_profiles", "status": "pass"},
            {
                "field": "layer_precisions",
                "status": "not_checked",
                "detail": "the lean runtime has no inspector",
            },
        ],
        "result": "pass",
    }


def _approval() -> dict[str, Any]:
    return {
        "engine_digest": "sha256:" + ENGINE,
        "audit_id": "CHG-2025-0142",
        "changes": ["FirstInt8", "TensorRTMajorUpgrade"],
        "approver": "alice@example.com",
        "approved_at": "2025-03-15T10:00:00+01:00",
        "expires_at": "2025-06-15T10:00:00+01:00",
        "manifest_digest": "sha256:" + "5" * 64,
        "reference": "https://tickets.example.com/CHG-2025-0142",
    }


def _statement(predicate_type: str, predicate: dict[str, Any], digest: str = ENGINE) -> dict[str, Any]:
    statement = Statement(
        subject=[ResourceDescriptor(name="resnet50-int8.plan", digest={"sha256": digest})],
        predicate_type=predicate_type,
        predicate=predicate,
    )
    document: dict[str, Any] = json.loads(statement.to_json())
    return document


def test_predicate_types_are_distinct_versioned_uris() -> None:
    types = {ENGINE_BUILD_PREDICATE_TYPE, ENGINE_VERIFICATION_PREDICATE_TYPE, CHANGE_APPROVAL_PREDICATE_TYPE}
    assert len(types) == 3
    assert all(uri.startswith("https://trtguard.dev/attestations/") and uri.endswith("/v1") for uri in types)


def test_verification_round_trip() -> None:
    verification = load_verification(_verification(), "v.json")
    assert isinstance(verification, EngineVerification)
    assert verification.runtime.module == "tensorrt_lean"
    assert verification.io_tensors[0].shape == [-1, 3, 224, 224]
    assert verification.model_dump(mode="json", exclude={"io_tensors"}) == {
        key: value for key, value in _verification().items() if key != "io_tensors"
    } | {
        "checks": [
            {
                "field": "output_engine.sha256",
                "status": "pass",
                "declared": ENGINE,
                "observed": ENGINE,
                "detail": None,
            },
            {
                "field": "builder_config.optimization_profiles",
                "status": "pass",
                "declared": None,
                "observed": None,
                "detail": None,
            },
            {
                "field": "layer_precisions",
                "status": "not_checked",
                "declared": None,
                "observed": None,
                "detail": "the lean runtime has no inspector",
            },
        ]
    }


def test_verification_in_statement_checks_subject() -> None:
    document = _statement(ENGINE_VERIFICATION_PREDICATE_TYPE, _verification())
    assert load_verification(document, "s").engine.sha256 == ENGINE
    with pytest.raises(InputError, match=r"engine\.sha256"):
        load_verification(_statement(ENGINE_VERIFICATION_PREDICATE_TYPE, _verification(), "1" * 64), "s")
    with pytest.raises(InputError, match=re.escape(f"not {ENGINE_VERIFICATION_PREDICATE_TYPE}")):
        load_verification(_statement(CHANGE_APPROVAL_PREDICATE_TYPE, _verification()), "s")


def test_verification_result_must_agree_with_checks() -> None:
    failed = _verification()
    failed["checks"][1]["status"] = "fail"
    with pytest.raises(InputError) as caught:
        load_verification(failed, "v.json")
    assert caught.value.message.splitlines()[1] == (
        "  result: expected 'fail' because these checks failed: builder_config.optimization_profiles; "
        'got "pass"'
    )
    failed["result"] = "fail"
    assert load_verification(failed, "v.json").result == "fail"
    passing = _verification()
    passing["result"] = "fail"
    with pytest.raises(InputError, match="result: expected 'pass', or a check with status 'fail'"):
        load_verification(passing, "v.json")


@pytest.mark.parametrize(
    ("path", "value", "line"),
    [
        (
            ("runtime", "module"),
            "onnxruntime",
            "runtime.module: expected 'tensorrt', 'tensorrt_lean' or 'tensorrt_rtx'",
        ),
        (("io_tensors", 0, "mode"), "inout", "io_tensors[0].mode: expected 'input' or 'output'"),
        (
            ("io_tensors", 0, "shape"),
            [-2],
            "io_tensors[0].shape[0]: expected greater than or equal to -1; got -2",
        ),
        (("engine", "sha256"), "xyz", "engine.sha256: expected a SHA-256 digest"),
        (("checks", 0, "status"), "ok", "checks[0].status: expected 'pass', 'fail' or 'not_checked'"),
        (("verified_at",), "yesterday", "verified_at: expected an RFC 3339 timestamp"),
    ],
)
def test_verification_errors(path: tuple[str | int, ...], value: Any, line: str) -> None:
    document = _verification()
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(InputError) as caught:
        load_verification(document, "v.json")
    assert caught.value.message.splitlines()[1].startswith(f"  {line}")


def test_approval_round_trip() -> None:
    approval = load_approval(_approval(), "a.json")
    assert isinstance(approval, ChangeApproval)
    assert approval.changes == [ChangeKind.FIRST_INT8, ChangeKind.TENSORRT_MAJOR_UPGRADE]
    dumped = approval.model_dump(mode="json")
    assert dumped == _approval() | {"comment": None}


def test_approval_in_statement_checks_subject() -> None:
    assert (
        load_approval(_statement(CHANGE_APPROVAL_PREDICATE_TYPE, _approval()), "s").audit_id
        == "CHG-2025-0142"
    )
    with pytest.raises(InputError, match="engine_digest"):
        load_approval(_statement(CHANGE_APPROVAL_PREDICATE_TYPE, _approval(), "2" * 64), "s")


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("changes", [], "changes: expected at least 1 item(s); got []"),
        ("changes", ["FirstInt8", "FirstInt8"], "changes: expected each change kind once"),
        ("changes", ["FirstInt9"], "changes[0]: expected 'FirstInt8', 'PrecisionChange'"),
        ("engine_digest", ENGINE, "engine_digest: expected a digest of the form 'sha256:'"),
        (
            "expires_at",
            "2025-03-15T09:00:00Z",
            'expires_at: expected a time after approved_at; got "2025-03-15T09:00:00+00:00"',
        ),
        ("audit_id", "", "audit_id: expected a string of at least 1 character(s)"),
        ("approver", None, "approver: expected a string; got null"),
    ],
)
def test_approval_errors(field: str, value: Any, line: str) -> None:
    document = copy.deepcopy(_approval())
    document[field] = value
    with pytest.raises(InputError) as caught:
        load_approval(document, "a.json")
    assert caught.value.message.splitlines()[1].startswith(f"  {line}"), caught.value.message


def test_change_kind_names_are_stable() -> None:
    # Policies gate on these names and signed approvals carry them: renaming one breaks both.
    assert [kind.value for kind in ChangeKind] == [
        "FirstInt8",
        "PrecisionChange",
        "TypingChange",
        "TensorRTMajorUpgrade",
        "TensorRTMinorUpgrade",
        "TensorRTDowngrade",
        "CudaVersionChange",
        "CudnnVersionChange",
        "ToolchainImageChange",
        "BuildGpuChange",
        "OnnxModelChange",
        "CalibrationDataChange",
        "DynamicShapeChange",
        "BatchSizeChange",
        "WorkspaceChange",
        "HardwareCompatibilityChange",
        "OptimizationLevelChange",
        "PluginChange",
        "AccuracyDrop",
        "AccuracyMetricRemoved",
        "AccuracyDatasetChange",
        "FirstEngine",
    ]
