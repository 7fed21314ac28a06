"""Reading the toolchain versions and the GPU of the build node from the environment it runs in.

Sources, each recorded with the finding so that the user sees where a value came from:

* TensorRT: the Python distributions ``tensorrt``, ``tensorrt-cuNN``, ``tensorrt-lean*``,
  ``tensorrt-dispatch*`` (and their ``-libs``/``-bindings`` parts), and the ``TRT_VERSION`` /
  ``TENSORRT_VERSION`` variables NVIDIA's images set. Sources that disagree leave the version undetermined.
* CUDA: ``CUDA_VERSION`` (set by NVIDIA's CUDA images), else the ``nvidia-cuda-runtime-cuNN`` distribution.
* cuDNN: ``CUDNN_VERSION``, else the ``nvidia-cudnn-cuNN`` distribution.
* GPU: ``nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader``, with a time limit.

Nothing here reads the environment by itself: the caller passes the variables, the distributions and the
path of ``nvidia-smi``.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){1,3}")
_TENSORRT_DIST = re.compile(r"tensorrt(?:[-_](?:lean|dispatch))?(?:[-_]cu[0-9]+)?(?:[-_](?:libs|bindings))?")
_CUDA_DIST = re.compile(r"nvidia[-_]cuda[-_]runtime(?:[-_]cu[0-9]+)?")
_CUDNN_DIST = re.compile(r"nvidia[-_]cudnn(?:[-_]cu[0-9]+)?")
_COMPUTE = re.compile(r"[0-9]+\.[0-9]+")


@dataclass(frozen=True, slots=True)
class Finding:
    """One value read from the environment, or why it could not be read."""

    value: str | None
    source: str
    """Where the value came from, or what was tried."""
    problem: str | None = None
    """Why the value is None (or doubtful)."""


@dataclass(frozen=True, slots=True)
class Distribution:
    """An installed Python distribution: normalised name and version."""

    name: str
    version: str


def _release(version: str) -> str | None:
    """The leading dotted-number part of a version string ("10.5.0.18.post1" → "10.5.0.18")."""
    match = _VERSION.match(version)
    return match.group(0) if match else None


def tensorrt_version(environ: Mapping[str, str], distributions: Iterable[Distribution]) -> Finding:
    """The TensorRT version from the Python packages and NVIDIA's environment variables."""
    seen: dict[str, list[str]] = {}
    for dist in distributions:
        if _TENSORRT_DIST.fullmatch(dist.name.lower()):
            release = _release(dist.version)
            if release:
                seen.setdefault(release, []).append(f"Python package {dist.name} {dist.version}")
    for variable in ("TRT_VERSION", "TENSORRT_VERSION"):
        raw = environ.get(variable)
        if raw:
            # NVIDIA's images write e.g. "8.6.1.6+cuda12.0.1.011".
            release = _release(raw.split("+", 1)[0])
            if release:
                seen.setdefault(release, []).append(f"{variable}={raw}")
    if not seen:
        return Finding(
            None,
            "Python packages tensorrt*, TRT_VERSION, TENSORRT_VERSION",
            "no TensorRT Python package is installed and neither variable is set",
        )
    if len(seen) > 1:
        sources = "; ".join(f"{version} ({', '.join(where)})" for version, where in seen.items())
        return Finding(None, "environment", f"the sources disagree: {sources}")
    ((version, where),) = seen.items()
    return Finding(version, ", ".join(where))


def _versioned(
    environ: Mapping[str, str],
    distributions: Iterable[Distribution],
    variable: str,
    pattern: re.Pattern[str],
    label: str,
) -> Finding:
    raw = environ.get(variable)
    if raw:
        release = _release(raw)
        if release:
            return Finding(release, f"{variable}={raw}")
        return Finding(None, f"{variable}={raw}", f"{variable} is not a version number")
    for dist in distributions:
        if pattern.fullmatch(dist.name.lower()):
            release = _release(dist.version)
            if release:
                return Finding(release, f"Python package {dist.name} {dist.version}")
    return Finding(
        None, f"{variable}, Python package {label}", f"{variable} is not set and no {label} is installed"
    )


def cuda_version(environ: Mapping[str, str], distributions: Iterable[Distribution]) -> Finding:
    """The CUDA version: ``CUDA_VERSION``, else the CUDA runtime Python package."""
    return _versioned(environ, distributions, "CUDA_VERSION", _CUDA_DIST, "nvidia-cuda-runtime-cuNN")


def cudnn_version(environ: Mapping[str, str], distributions: Iterable[Distribution]) -> Finding:
    """The cuDNN version: ``CUDNN_VERSION``, else the cuDNN Python package."""
    return _versioned(environ, distributions, "CUDNN_VERSION", _CUDNN_DIST, "nvidia-cudnn-cuNN")


@dataclass(frozen=True, slots=True)
class GpuFindings:
    """The build GPU as ``nvidia-smi`` reports it."""

    gpu_name: Finding
    compute_capability: Finding
    driver_version: Finding


def query_gpu(nvidia_smi: str | None, *, timeout: float) -> GpuFindings:
    """Ask ``nvidia-smi`` (at the given path; None when it is not installed) for the GPU.

    Several GPUs of one model are fine; different models leave the GPU undetermined, because which one
    built the engine cannot be told from here.
    """
    source = "nvidia-smi --query-gpu=name,compute_cap,driver_version"

    def failed(problem: str) -> GpuFindings:
        finding = Finding(None, source, problem)
        return GpuFindings(finding, finding, finding)

    if nvidia_smi is None:
        return failed("nvidia-smi is not on PATH (no NVIDIA driver in this container?)")
    try:
        completed = subprocess.run(
            [nvidia_smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return failed(f"nvidia-smi did not answer within {timeout:g} s")
    except OSError as error:
        return failed(f"nvidia-smi could not be run: {error.strerror}")
    if completed.returncode != 0:
        first = (completed.stderr or completed.stdout).strip().splitlines()
        return failed(
            f"nvidia-smi exited with status {completed.returncode}: {first[0] if first else ''}".rstrip()
        )
    rows = {
        tuple(part.strip() for part in line.split(","))
        for line in completed.stdout.splitlines()
        if line.strip()
    }
    if not rows:
        return failed("nvidia-smi listed no GPU")
    if len(rows) > 1:
        listed = "; ".join(", ".join(row) for row in sorted(rows))
        return failed(f"several different GPUs ({listed}); say which one built the engine")
    (row,) = rows
    if len(row) != 3:
        return failed(f"unexpected nvidia-smi output {', '.join(row)!r}")
    name, compute, driver = row
    return GpuFindings(
        Finding(name or None, source, None if name else "empty GPU name"),
        Finding(
            compute if _COMPUTE.fullmatch(compute) else None,
            source,
            None
            if _COMPUTE.fullmatch(compute)
            else f"compute capability {compute!r} (driver too old to report it?)",
        ),
        Finding(
            driver if _release(driver) else None,
            source,
            None if _release(driver) else f"driver version {driver!r}",
        ),
    )
