"""A calibration cache file given with ``--calibration-cache`` against the manifest's calibration.cache."""

from __future__ import annotations

from collections.abc import Sequence

from verifier.engine._calibration import CalibrationCacheFile
from verifier.engine._report import Check, compared, failed, not_read, passed, sha256_matches, skipped
from verifier.manifest import EngineBuildManifest, parse_tensorrt_version


def calibration_checks(
    cache: CalibrationCacheFile | None,
    problem: str | None,
    manifest: EngineBuildManifest | None,
    unavailable: str,
) -> list[Check]:
    """A calibration cache given with ``--calibration-cache`` (``cache`` parsed, or ``problem`` saying
    why it did not parse), against ``calibration.cache``; ``cache`` and ``problem`` both ``None`` means
    no cache was given."""
    declared = manifest.calibration.cache if manifest and manifest.calibration else None
    if cache is None:
        ask = "the manifest binds a calibration cache; give it with --calibration-cache to check it"
        unchecked = None if declared is None else skipped("calibration.cache.sha256", ask, declared.sha256)
        return not_read(problem, "calibration_cache.format", "TRT-<version>-<algorithm>", unchecked)
    checks = [
        passed(
            "calibration_cache.format",
            f"{cache.header}: {len(cache.scales)} tensors, each with one finite positive scale; "
            f"version {cache.version_number} = TensorRT {cache.tensorrt_version} ({cache.version_encoding} "
            "encoding)",
            None,
            cache.header,
        )
    ]
    if manifest is None:
        checks.append(skipped("calibration.cache.sha256", unavailable))
        return checks
    if declared is None:
        checks.append(
            failed(
                "calibration.cache.sha256",
                "a calibration cache was given but the manifest records none"
                + (
                    " (a strongly typed build uses no calibrator)"
                    if manifest.builder_config.typing == "strong"
                    else ""
                ),
                None,
                cache.sha256,
            )
        )
        return checks
    checks.append(
        sha256_matches(
            "calibration.cache.sha256",
            "cache",
            declared.sha256,
            cache.sha256,
            "this is not the cache the build used",
        )
    )
    checks.append(
        compared(
            "calibration.cache.algorithm",
            declared.algorithm,
            cache.algorithm,
            cache.algorithm,
            f"the cache was written by {cache.algorithm}, the manifest says {declared.algorithm}",
            unrecorded="the manifest does not name the algorithm",
        )
    )
    toolchain = parse_tensorrt_version(manifest.toolchain.tensorrt_version)[:3]
    observed = tuple(int(part) for part in cache.tensorrt_version.split("."))
    if observed[: len(toolchain)] == toolchain:
        checks.append(
            passed(
                "calibration_cache.tensorrt_version",
                f"the cache was written by TensorRT {cache.tensorrt_version}",
                _version_text(toolchain),
                cache.tensorrt_version,
            )
        )
    else:
        checks.append(
            failed(
                "calibration_cache.tensorrt_version",
                f"the cache header says TensorRT {cache.tensorrt_version} ({cache.header}), the manifest's "
                f"toolchain is TensorRT {manifest.toolchain.tensorrt_version}",
                _version_text(toolchain),
                cache.tensorrt_version,
            )
        )
    return checks


def _version_text(parts: Sequence[int]) -> str:
    return ".".join(str(part) for part in parts)
