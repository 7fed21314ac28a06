"""verifier/engine/checks/onnx.py: an ONNX model against the manifest: hash, opset, inputs against the
optimization profiles, precisions under weak and strong typing, a model not given or malformed."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from onnx import TensorProto

from tests.verifier.engine.helpers import MNIST, PROFILE, manifest_for, message, status, write_model
from verifier.base._digests import hash_file
from verifier.engine import CheckStatus, EngineReport


def _onnx_manifest(engine: Path, model: Path, **changes: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "onnx": {"sha256": hash_file(model).sha256, "opset": 17},
        "builder_config.optimization_profiles": [PROFILE],
    }
    settings.update(changes)
    return manifest_for(engine, **settings)


def test_onnx_matches(plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx")
    report = verify(engine, _onnx_manifest(engine, model), onnx=model)
    for check in ("onnx.format", "onnx.sha256", "onnx.opset", "onnx.inputs", "onnx.precisions"):
        assert status(report, check) is CheckStatus.PASS, (check, report.render_text())


def _profile(**ranges: list[int]) -> dict[str, Any]:
    return {"inputs": {"images": {"min": [1, 3, 8, 8], "opt": [4, 3, 8, 8], "max": [8, 3, 8, 8], **ranges}}}


@pytest.mark.parametrize(
    ("changes", "check", "text"),
    [
        (
            {"onnx": {"sha256": "5" * 64, "opset": 17}},
            "onnx.sha256",
            "not the model the engine was built from",
        ),
        ({"onnx.opset": 13}, "onnx.opset", "the manifest says 13"),
        ({"builder_config.optimization_profiles": []}, "onnx.inputs", "declares no optimization profile"),
        (
            {"builder_config.optimization_profiles": [{"inputs": {"pixels": PROFILE["inputs"]["images"]}}]},
            "onnx.inputs",
            "'pixels', which is not an input of the model",
        ),
        (
            {"builder_config.optimization_profiles": [_profile(max=[8, 3, 8, 16])]},
            "onnx.inputs",
            "dimension 3 of 'images' is fixed at 8",
        ),
        (
            {
                "builder_config.optimization_profiles": [
                    {"inputs": {"images": {"min": [1], "opt": [1], "max": [1]}}}
                ]
            },
            "onnx.inputs",
            "rank 1",
        ),
        ({"builder_config.precision_flags": []}, "onnx.precisions", "carries ['fp16']"),
    ],
)
def test_onnx_disagreements(
    plans_dir: Path,
    tmp_path: Path,
    verify: Callable[..., EngineReport],
    changes: dict[str, Any],
    check: str,
    text: str,
) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx", dtype=TensorProto.FLOAT16)
    manifest = _onnx_manifest(engine, model, **changes)
    report = verify(engine, manifest, onnx=model)
    assert status(report, check) is CheckStatus.FAIL, report.render_text()
    assert text in message(report, check)


def test_strong_typing_network_precisions(
    plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]
) -> None:
    engine, model = plans_dir / MNIST, write_model(tmp_path / "m.onnx", dtype=TensorProto.FLOAT16)
    strong = {"builder_config.typing": "strong", "builder_config.precision_flags": []}
    report = verify(engine, _onnx_manifest(engine, model, **strong), onnx=model)
    assert status(report, "builder_config.network_precisions") is CheckStatus.FAIL
    report = verify(
        engine,
        _onnx_manifest(engine, model, **strong, **{"builder_config.network_precisions": ["fp16", "int8"]}),
        onnx=model,
    )
    assert status(report, "builder_config.network_precisions") is CheckStatus.PASS
    assert "also lists ['int8']" in message(report, "builder_config.network_precisions")


def test_onnx_not_given_is_skipped(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine))
    assert status(report, "onnx.sha256") is CheckStatus.SKIPPED
    assert "--onnx" in message(report, "onnx.sha256")


def test_malformed_onnx(plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]) -> None:
    model = tmp_path / "bad.onnx"
    model.write_bytes(struct.pack("<Q", 12345) * 100)
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), onnx=model)
    assert status(report, "onnx.format") is CheckStatus.FAIL
