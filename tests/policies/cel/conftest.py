"""The data and helpers the CEL tests share: a realistic engine manifest and Pod."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from policies.cel import CelCompileError, CelProgram, compile_expression

VARIABLES = ("manifest", "workload")
#: The five policy expressions of the issue; they hold on the manifest and Pod below.
FIVE = [
    "manifest.builder_config.max_workspace_size <= 4 * 1024 * 1024 * 1024",
    'manifest.accuracy.exists(m, m.metric == "top1_acc" && m.value >= 0.75)',
    "size(manifest.builder_config.optimization_profiles) <= 4",
    'workload.metadata.namespace.startsWith("prod") && has(workload.metadata.labels.team)',
    'manifest.builder_config.plugins.all(p, p.library_sha256 != "")',
]


@pytest.fixture(scope="module")
def manifest(data_dir: Path) -> dict[str, Any]:
    return dict(json.loads((data_dir / "400-cel-engine-manifest.json").read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def workload(data_dir: Path) -> dict[str, Any]:
    return dict(json.loads((data_dir / "401-cel-pod-three-containers.json").read_text(encoding="utf-8")))


@pytest.fixture
def values(manifest: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    # a deep copy per test: some tests change the data
    return {"manifest": copy.deepcopy(manifest), "workload": copy.deepcopy(workload)}


def program(source: str, **kwargs: Any) -> CelProgram:
    return compile_expression(source, variables=VARIABLES, **kwargs)


def compile_error(source: str, **kwargs: Any) -> CelCompileError:
    with pytest.raises(CelCompileError) as caught:
        compile_expression(source, variables=kwargs.pop("variables", VARIABLES), **kwargs)
    return caught.value
