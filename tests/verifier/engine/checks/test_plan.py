"""verifier/engine/checks/plan.py: the engine file and its plan header against the manifest: fields that
disagree, versions written short or for another plan layout, broken engine files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.verifier.engine.helpers import MNIST, manifest_for, message, status
from verifier.base._digests import hash_file
from verifier.engine import CheckStatus, EngineReport


@pytest.mark.parametrize(
    ("changes", "check", "text"),
    [
        ({"output_engine.size": 1}, "output_engine.size", "the manifest declares 1"),
        (
            {"toolchain.tensorrt_version": "10.4.0.18"},
            "toolchain.tensorrt_version",
            "the manifest says 10.4.0.18",
        ),
        (
            {"toolchain.tensorrt_version": "10.5.1"},
            "toolchain.tensorrt_version",
            "written by TensorRT 10.5.0.18",
        ),
        ({"toolchain.tensorrt_version": "8.6.1.6"}, "toolchain.tensorrt_version", "8.6.1.6"),
    ],
)
def test_field_disagreements(
    plans_dir: Path, verify: Callable[..., EngineReport], changes: dict[str, Any], check: str, text: str
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine, **changes))
    assert status(report, check) is CheckStatus.FAIL
    assert text in message(report, check)
    assert not report.ok


def test_short_version_matches_as_a_prefix(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine, **{"toolchain.tensorrt_version": "10.5"}))
    assert status(report, "toolchain.tensorrt_version") is CheckStatus.PASS


def test_modern_version_on_a_legacy_plan_fails(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    report = verify(engine, manifest_for(engine))  # says 10.5.0.18
    assert status(report, "toolchain.tensorrt_version") is CheckStatus.FAIL
    assert "bare 'ptrt' layout" in message(report, "toolchain.tensorrt_version")


def _mutations(data: bytes) -> dict[str, bytes]:
    flipped = bytearray(data)
    flipped[0x11] ^= 0xFF  # inside the size field
    return {
        "truncated": data[: len(data) // 2],
        "padded": data + b"\0" * 512,
        "size-byte-flipped": bytes(flipped),
        "empty": b"",
        "random": os.urandom(4096),
    }


@pytest.mark.parametrize("kind", ["truncated", "padded", "size-byte-flipped", "empty", "random"])
def test_broken_engine_files(
    plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport], kind: str
) -> None:
    engine = tmp_path / f"{kind}.plan"
    engine.write_bytes(_mutations((plans_dir / MNIST).read_bytes())[kind])
    report = verify(engine, manifest_for(engine))  # a signed manifest that binds these very bytes
    assert status(report, "output_engine.sha256") is CheckStatus.PASS
    assert not report.ok
    document = report.to_json()
    assert document["sha256"] == hash_file(engine).sha256
    if kind in ("empty", "random"):
        assert status(report, "plan.format") is CheckStatus.FAIL
    else:
        assert status(report, "plan.size") is CheckStatus.FAIL
