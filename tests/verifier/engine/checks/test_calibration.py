"""verifier/engine/checks/calibration.py: a calibration cache against the manifest (a public TensorRT 8.2
cache), disagreeing fields, a cache given but not declared and declared but not given, a malformed cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.verifier.engine.helpers import MNIST, manifest_for, message, status
from verifier.base._digests import hash_file
from verifier.engine import CheckStatus, EngineReport


@pytest.fixture
def trt8204_cache(shared_fixtures: Path) -> Path:
    return shared_fixtures / "tensorrt" / "calibration" / "hackathon-TRT-8204-int8.cache"


def _weak_int8(engine: Path, cache: Path, **changes: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "toolchain.tensorrt_version": "8.2.4.2",
        "builder_config.precision_flags": ["fp16", "int8"],
        "calibration": {
            "dataset": {"sha256": "3" * 64, "sampling": "1000 random frames"},
            "cache": {"sha256": hash_file(cache).sha256, "algorithm": "EntropyCalibration2"},
        },
    }
    settings.update(changes)
    return manifest_for(engine, **settings)


def test_calibration_cache_matches(
    plans_dir: Path, trt8204_cache: Path, verify: Callable[..., EngineReport]
) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    report = verify(engine, _weak_int8(engine, trt8204_cache), calibration_cache=trt8204_cache)
    for check in (
        "calibration_cache.format",
        "calibration.cache.sha256",
        "calibration.cache.algorithm",
        "calibration_cache.tensorrt_version",
    ):
        assert status(report, check) is CheckStatus.PASS, check
    assert report.calibration_cache is not None and report.calibration_cache.tensorrt_version == "8.2.4"


@pytest.mark.parametrize(
    ("changes", "check", "text"),
    [
        (
            {"calibration.cache": {"sha256": "4" * 64}},
            "calibration.cache.sha256",
            "not the cache the build used",
        ),
        (
            {"calibration.cache.algorithm": "MinMaxCalibration"},
            "calibration.cache.algorithm",
            "written by EntropyCalibration2",
        ),
        ({"toolchain.tensorrt_version": "8.6.1.6"}, "calibration_cache.tensorrt_version", "TensorRT 8.2.4"),
    ],
)
def test_calibration_disagreements(
    plans_dir: Path,
    trt8204_cache: Path,
    verify: Callable[..., EngineReport],
    changes: dict[str, Any],
    check: str,
    text: str,
) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    manifest = _weak_int8(engine, trt8204_cache)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = manifest
        for part in parents:
            target = target[part]
        target[last] = value
    report = verify(engine, manifest, calibration_cache=trt8204_cache)
    assert status(report, check) is CheckStatus.FAIL
    assert text in message(report, check)


def test_cache_given_but_not_in_manifest(
    plans_dir: Path, trt8204_cache: Path, verify: Callable[..., EngineReport]
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), calibration_cache=trt8204_cache)
    assert status(report, "calibration.cache.sha256") is CheckStatus.FAIL
    assert "the manifest records none" in message(report, "calibration.cache.sha256")


def test_cache_in_manifest_but_not_given(
    plans_dir: Path, trt8204_cache: Path, verify: Callable[..., EngineReport]
) -> None:
    engine = plans_dir / "guorbit-model.trt8.2.engine"
    report = verify(engine, _weak_int8(engine, trt8204_cache))
    assert status(report, "calibration.cache.sha256") is CheckStatus.SKIPPED
    assert "--calibration-cache" in message(report, "calibration.cache.sha256")


def test_malformed_cache(plans_dir: Path, tmp_path: Path, verify: Callable[..., EngineReport]) -> None:
    cache = tmp_path / "bad.cache"
    cache.write_text("TRT-8204-EntropyCalibration2\nx: 00000000\n")
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), calibration_cache=cache)
    assert status(report, "calibration_cache.format") is CheckStatus.FAIL
    assert "finite and positive" in message(report, "calibration_cache.format")
    assert f"{cache}:2" in message(report, "calibration_cache.format")
