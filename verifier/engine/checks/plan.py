"""The engine file and its plan header against the manifest: hash, size, plan format, TensorRT version."""

from __future__ import annotations

from verifier.engine._header import PlanHeader, PlanMagic
from verifier.engine._report import Check, compared, failed, passed, sha256_matches, skipped
from verifier.manifest import EngineBuildManifest, parse_tensorrt_version

#: The oldest TensorRT whose plans carry the "ftrt" container with version bytes.
_FTRT_SINCE = (8, 6)


def engine_file_checks(
    sha256: str, size: int, manifest: EngineBuildManifest | None, unavailable: str
) -> list[Check]:
    """The file's SHA-256 and size against ``output_engine`` (which is also the Statement's subject)."""
    if manifest is None:
        return [skipped("output_engine.sha256", unavailable), skipped("output_engine.size", unavailable)]
    declared = manifest.output_engine
    return [
        sha256_matches(
            "output_engine.sha256", "file", declared.sha256, sha256, "this is not the engine that was built"
        ),
        compared(
            "output_engine.size",
            declared.size,
            size,
            f"{size} bytes, as declared",
            f"the file has {size} bytes, the manifest declares {declared.size}",
        ),
    ]


def plan_checks(header: PlanHeader, size: int) -> list[Check]:
    """Is it a plan at all, and does its size field match the file?"""
    expected_tags = [magic.value for magic in PlanMagic]
    if header.magic is None:
        return [
            failed(
                "plan.format", header.format_problem or "unknown format", expected_tags, header.first_bytes
            ),
            skipped("plan.size", "the file is not a TensorRT plan (see plan.format)"),
        ]
    checks = [
        failed("plan.format", header.format_problem, expected_tags, header.magic.value)
        if header.format_problem
        else passed("plan.format", header.description, expected_tags, header.magic.value)
    ]
    if header.size_problem:
        checks.append(failed("plan.size", header.size_problem, header.declared_size, size))
    else:
        checks.append(
            passed("plan.size", "the header's size field matches the file length", header.declared_size, size)
        )
    return checks


def plan_version_check(header: PlanHeader, manifest: EngineBuildManifest | None, unavailable: str) -> Check:
    """The TensorRT version in the plan header against ``toolchain.tensorrt_version``."""
    name = "toolchain.tensorrt_version"
    if manifest is None:
        return skipped(name, unavailable)
    declared_text = manifest.toolchain.tensorrt_version
    declared = parse_tensorrt_version(declared_text)
    if header.magic is None:
        return skipped(name, "the file is not a TensorRT plan (see plan.format)", declared_text)
    if header.magic is PlanMagic.PTRT:
        if declared[:2] >= _FTRT_SINCE:
            return failed(
                name,
                f"the manifest says TensorRT {declared_text}, whose plans start with 'ftrt', but this file "
                "has the bare 'ptrt' layout of TensorRT < 8.6 plans and timing caches",
                declared_text,
                f"ptrt (serialization {header.serialization_version})",
            )
        return skipped(
            name,
            "plans older than TensorRT 8.6 do not record the TensorRT version "
            f"(serialization number {header.serialization_version}, informational)",
            declared_text,
        )
    observed = header.version_tuple
    if observed is None:
        return failed(name, "the plan header's version bytes could not be read", declared_text, None)
    if observed[: len(declared)] == declared:
        return passed(
            name,
            f"the plan was written by TensorRT {header.tensorrt_version}",
            declared_text,
            header.tensorrt_version,
        )
    return failed(
        name,
        f"the plan was written by TensorRT {header.tensorrt_version}, the manifest says {declared_text}",
        declared_text,
        header.tensorrt_version,
    )
