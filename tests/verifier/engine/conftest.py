"""Fixtures for the engine verifier tests: real keys, signed manifests, the public plans, the GPU skip rule.

GPU tests (``@pytest.mark.gpu``) run only where the CUDA driver reports a device *and* a TensorRT runtime
module imports; both are asked in a subprocess, so that the test process itself never initialises CUDA.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.verifier.engine.helpers import CHILD_PROGRAM, FAKE_CHILDREN, HERE, sign_manifest
from verifier.crypto._keys import PrivateKey, PublicKey, generate_private_key
from verifier.engine import EngineReport, GpuOptions, VerifyRequest, load_signed_manifest, verify_engine

_PROBE = f"""
import importlib.util, json, runpy, sys
child = runpy.run_path({str(CHILD_PROGRAM)!r})
probe = child["probe_gpu"]()
modules = [m for m in child["RUNTIME_MODULES"] if importlib.util.find_spec(m) is not None]
print(json.dumps({{"gpu": probe, "modules": modules}}))
"""


@functools.cache
def environment() -> dict[str, Any]:
    """What the CUDA driver and the import system say here (asked once, in a subprocess)."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    return dict(json.loads(result.stdout))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu`` tests where there is no GPU or no TensorRT runtime, saying which is missing."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") and HERE in Path(item.path).parents]
    if not gpu_items:
        return
    found = environment()
    reasons = []
    if not found["gpu"]["available"]:
        reasons.append(f"no GPU ({found['gpu']['reason']})")
    if not found["modules"]:
        reasons.append("no TensorRT runtime module (tensorrt, tensorrt_lean or tensorrt_lean_bindings)")
    if reasons:
        marker = pytest.mark.skip(reason="; ".join(reasons))
        for item in gpu_items:
            item.add_marker(marker)


@pytest.fixture(scope="session")
def plans_dir(shared_fixtures: Path) -> Path:
    """shared/fixtures/tensorrt/plans."""
    return shared_fixtures / "tensorrt" / "plans"


@pytest.fixture(scope="session")
def builder_key() -> PrivateKey:
    """The build pipeline's signing key (a real ECDSA P-256 key, made for the session)."""
    return generate_private_key()


@pytest.fixture(scope="session")
def other_key() -> PrivateKey:
    """A key nobody trusts."""
    return generate_private_key()


@pytest.fixture
def write_signed(tmp_path: Path, builder_key: PrivateKey) -> Callable[..., Path]:
    """Write a signed manifest envelope for ``manifest`` and return its path."""
    counter = iter(range(1000))

    def write(manifest: dict[str, Any], key: PrivateKey | None = None, **options: Any) -> Path:
        path = tmp_path / f"manifest-{next(counter)}.dsse.json"
        path.write_bytes(sign_manifest(manifest, key or builder_key, **options).to_json())
        return path

    return write


@pytest.fixture
def builder_pub(tmp_path: Path, builder_key: PrivateKey) -> Path:
    """The builder's public key as a PEM file."""
    path = tmp_path / "builder.pub"
    path.write_bytes(builder_key.public_key().to_pem())
    return path


@pytest.fixture
def copy_plan(tmp_path: Path, plans_dir: Path) -> Callable[[str], Path]:
    """Copy a public plan into the test's folder (so that tests may modify it)."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        target.write_bytes((plans_dir / name).read_bytes())
        return target

    return copy


@pytest.fixture
def fake_gpu(tmp_path: Path) -> Callable[[dict[str, Any]], GpuOptions]:
    def options(canned: dict[str, Any]) -> GpuOptions:
        path = tmp_path / f"answer-{len(list(tmp_path.glob('answer-*')))}.json"
        path.write_text(json.dumps(canned))
        return GpuOptions(
            child_command=(sys.executable, str(FAKE_CHILDREN / "fake_answers.py")),
            env={**os.environ, "FAKE_CHILD_ANSWER": str(path)},
        )

    return options


@pytest.fixture
def verify(
    builder_pub: Path, builder_key: PrivateKey, write_signed: Callable[..., Path]
) -> Callable[..., EngineReport]:
    """verify_engine with a manifest signed by the builder key and checked with its public key."""
    keys = {"builder": PublicKey.from_pem(builder_pub.read_bytes())}

    def run(engine: Path, manifest: dict[str, Any] | None, **request: Any) -> EngineReport:
        signed = None
        if manifest is not None:
            key = request.pop("key", None)
            sign_options = request.pop("sign_options", {})
            signed = load_signed_manifest(write_signed(manifest, key, **sign_options), keys)
        return verify_engine(VerifyRequest(engine=engine, manifest=signed, **request))

    return run
