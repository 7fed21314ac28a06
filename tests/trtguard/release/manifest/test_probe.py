"""trtguard.release.manifest._probe: versions from packages and variables, the GPU from nvidia-smi.

The ``nvidia-smi`` used here is a FAKE: a shell script written into the test's temporary folder (this machine
has no NVIDIA driver). Its output lines are copied from the real tool's ``--format=csv,noheader`` form.
"""

from __future__ import annotations

import time
from pathlib import Path

from trtguard.release.manifest._probe import (
    Distribution,
    cuda_version,
    cudnn_version,
    query_gpu,
    tensorrt_version,
)


def fake_nvidia_smi(folder: Path, body: str) -> str:
    """Write a FAKE nvidia-smi script with ``body`` and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n# FAKE nvidia-smi written by trtguard's tests\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_tensorrt_from_python_packages() -> None:
    found = tensorrt_version(
        {},
        [
            Distribution("tensorrt-cu12", "10.5.0.18"),
            Distribution("tensorrt_cu12_libs", "10.5.0.18"),
            Distribution("tensorrt-cu12-bindings", "10.5.0.18.post1"),
            Distribution("tensorrt-rtx-cu13", "1.7.1.116"),  # a different product: ignored
            Distribution("numpy", "2.1.0"),
        ],
    )
    assert found.value == "10.5.0.18"
    assert found.problem is None
    assert "Python package tensorrt-cu12 10.5.0.18" in found.source


def test_tensorrt_from_nvidia_image_variable() -> None:
    found = tensorrt_version({"TRT_VERSION": "8.6.1.6+cuda12.0.1.011"}, [])
    assert found.value == "8.6.1.6"
    assert found.source == "TRT_VERSION=8.6.1.6+cuda12.0.1.011"


def test_tensorrt_sources_that_disagree_leave_it_open() -> None:
    found = tensorrt_version({"TRT_VERSION": "10.3.0.26"}, [Distribution("tensorrt", "10.5.0.18")])
    assert found.value is None
    assert found.problem is not None
    assert found.problem.startswith("the sources disagree: ")
    assert "10.3.0.26 (TRT_VERSION=10.3.0.26)" in found.problem
    assert "10.5.0.18 (Python package tensorrt 10.5.0.18)" in found.problem


def test_tensorrt_nowhere() -> None:
    found = tensorrt_version({}, [Distribution("torch", "2.5.0")])
    assert found.value is None
    assert found.problem == "no TensorRT Python package is installed and neither variable is set"


def test_lean_runtime_package_counts() -> None:
    assert tensorrt_version({}, [Distribution("tensorrt-lean-cu13", "11.4.0.106")]).value == "11.4.0.106"


def test_cuda_prefers_the_image_variable() -> None:
    packages = [Distribution("nvidia-cuda-runtime-cu12", "12.4.127")]
    assert cuda_version({"CUDA_VERSION": "12.4.1"}, packages).value == "12.4.1"
    from_package = cuda_version({}, packages)
    assert from_package.value == "12.4.127"
    assert from_package.source == "Python package nvidia-cuda-runtime-cu12 12.4.127"
    broken = cuda_version({"CUDA_VERSION": "twelve"}, packages)
    assert broken.value is None
    assert broken.problem == "CUDA_VERSION is not a version number"


def test_cudnn() -> None:
    assert cudnn_version({"CUDNN_VERSION": "9.1.0.70"}, []).value == "9.1.0.70"
    assert cudnn_version({}, [Distribution("nvidia-cudnn-cu12", "9.1.0.70")]).value == "9.1.0.70"
    missing = cudnn_version({}, [])
    assert missing.value is None
    assert missing.problem == "CUDNN_VERSION is not set and no nvidia-cudnn-cuNN is installed"


def test_gpu_from_fake_nvidia_smi(tmp_path: Path) -> None:
    smi = fake_nvidia_smi(tmp_path, 'echo "NVIDIA H200, 9.0, 580.159.04"')
    found = query_gpu(smi, timeout=10)
    assert (found.gpu_name.value, found.compute_capability.value, found.driver_version.value) == (
        "NVIDIA H200",
        "9.0",
        "580.159.04",
    )


def test_eight_identical_gpus_from_fake_nvidia_smi(tmp_path: Path) -> None:
    smi = fake_nvidia_smi(tmp_path, 'for i in 1 2 3 4 5 6 7 8; do echo "NVIDIA H200, 9.0, 580.159.04"; done')
    assert query_gpu(smi, timeout=10).gpu_name.value == "NVIDIA H200"


def test_mixed_gpus_from_fake_nvidia_smi(tmp_path: Path) -> None:
    smi = fake_nvidia_smi(
        tmp_path, 'echo "NVIDIA H200, 9.0, 580.159.04"; echo "NVIDIA A100-SXM4-80GB, 8.0, 580.159.04"'
    )
    found = query_gpu(smi, timeout=10)
    assert found.gpu_name.value is None
    assert found.gpu_name.problem == (
        "several different GPUs (NVIDIA A100-SXM4-80GB, 8.0, 580.159.04; NVIDIA H200, 9.0, 580.159.04); "
        "say which one built the engine"
    )


def test_failing_fake_nvidia_smi(tmp_path: Path) -> None:
    smi = fake_nvidia_smi(
        tmp_path,
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2; exit 9',
    )
    found = query_gpu(smi, timeout=10)
    assert found.driver_version.value is None
    assert found.driver_version.problem == (
        "nvidia-smi exited with status 9: NVIDIA-SMI has failed because it couldn't communicate with the "
        "NVIDIA "
        "driver."
    )


def test_hanging_fake_nvidia_smi_is_cut_off(tmp_path: Path) -> None:
    smi = fake_nvidia_smi(tmp_path, "exec sleep 30")
    started = time.monotonic()
    found = query_gpu(smi, timeout=0.5)
    assert time.monotonic() - started < 10
    assert found.gpu_name.problem == "nvidia-smi did not answer within 0.5 s"


def test_old_driver_without_compute_capability(tmp_path: Path) -> None:
    smi = fake_nvidia_smi(tmp_path, 'echo "Tesla V100-SXM2-16GB, [N/A], 470.57.02"')
    found = query_gpu(smi, timeout=10)
    assert found.gpu_name.value == "Tesla V100-SXM2-16GB"
    assert found.compute_capability.value is None
    assert found.compute_capability.problem == "compute capability '[N/A]' (driver too old to report it?)"


def test_no_nvidia_smi() -> None:
    assert (
        query_gpu(None, timeout=1).gpu_name.problem
        == "nvidia-smi is not on PATH (no NVIDIA driver in this container?)"
    )
