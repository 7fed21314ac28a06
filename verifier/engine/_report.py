"""The verifier's report: one :class:`Check` per claim, and the facts read from the engine.

A check either passed, failed, or was skipped; a skipped check always says why. A skip is never a pass:
:attr:`EngineReport.ok` only says that nothing *failed*, and whoever needs a claim verified (a policy, an
auditor) must look for that check's ``pass``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from verifier.engine._calibration import CalibrationCacheFile
from verifier.engine._header import PlanHeader
from verifier.engine._inspector import LayerPrecisions
from verifier.engine._onnx_model import OnnxModelInfo
from verifier.engine._runtime import GpuRun


class CheckStatus(StrEnum):
    """The outcome of one check."""

    PASS = "pass"  # noqa: S105 (a check status, not a password)
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Check:
    """One claim checked against one observation.

    ``name`` is the manifest field the check verifies where there is one ("output_engine.sha256",
    "builder_config.optimization_profiles"), otherwise a name in the ``plan.``, ``manifest.``,
    ``calibration_cache.``, ``onnx.`` or ``gpu.`` namespace.
    """

    name: str
    status: CheckStatus
    message: str
    expected: Any = None
    observed: Any = None

    def to_json(self) -> dict[str, Any]:
        """``{name, status, expected, observed, message}``."""
        return {
            "name": self.name,
            "status": self.status.value,
            "expected": self.expected,
            "observed": self.observed,
            "message": self.message,
        }


def passed(name: str, message: str, expected: Any = None, observed: Any = None) -> Check:
    """A check that passed."""
    return Check(name, CheckStatus.PASS, message, expected, observed)


def failed(name: str, message: str, expected: Any = None, observed: Any = None) -> Check:
    """A check that failed."""
    return Check(name, CheckStatus.FAIL, message, expected, observed)


def verdict(name: str, ok: bool, good: str, bad: str, expected: Any, observed: Any) -> Check:
    """A check that passed with message ``good`` when ``ok``, else failed with message ``bad``."""
    return passed(name, good, expected, observed) if ok else failed(name, bad, expected, observed)


def skipped(name: str, why: str, expected: Any = None) -> Check:
    """A check that was not made; ``why`` says why (never empty)."""
    return Check(name, CheckStatus.SKIPPED, why, expected, None)


def compared(
    name: str, expected: Any, observed: Any, good: str, bad: str, *, unrecorded: str | None = None
) -> Check:
    """:func:`verdict` on whether ``observed`` is the manifest's ``expected``; with ``unrecorded``, a manifest
    that records no value (``expected`` None) skips the check for that reason."""
    if unrecorded is not None and expected is None:
        return skipped(name, unrecorded)
    return verdict(name, expected == observed, good, bad, expected, observed)


def sha256_matches(name: str, thing: str, expected: str, observed: str, otherwise: str) -> Check:
    """Whether the ``thing``'s SHA-256 is the manifest's; ``otherwise`` says what a different one means."""
    return compared(
        name,
        expected,
        observed,
        f"the {thing}'s SHA-256 matches",
        f"the {thing}'s SHA-256 differs from the manifest's: {otherwise}",
    )


@dataclass(frozen=True, slots=True)
class ManifestSummary:
    """The signed manifest the engine was checked against."""

    path: Path
    #: :func:`~verifier.manifest.manifest_digest`: ``sha256:<hex>`` of the DSSE payload (the statement).
    digest: str
    #: Names of the trusted keys whose signatures verified (empty when none did).
    signers: tuple[str, ...]
    audit_id: str | None

    def to_json(self) -> dict[str, Any]:
        """The ``manifest`` object of the JSON report."""
        return {
            "path": str(self.path),
            "digest": self.digest,
            "signers": list(self.signers),
            "audit_id": self.audit_id,
        }


@dataclass(frozen=True, slots=True)
class EngineReport:
    """Everything ``verify-engine`` found out about one engine file."""

    engine: Path
    sha256: str
    size: int
    header: PlanHeader
    checks: tuple[Check, ...]
    manifest: ManifestSummary | None = None
    calibration_cache: CalibrationCacheFile | None = None
    onnx: OnnxModelInfo | None = None
    gpu: GpuRun | None = None
    layer_precisions: LayerPrecisions | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when no check failed. Skipped checks do not fail the report, and are not passes either."""
        return not any(check.status is CheckStatus.FAIL for check in self.checks)

    def check(self, name: str) -> Check | None:
        """The check called ``name``, if it was made."""
        return next((check for check in self.checks if check.name == name), None)

    def counts(self) -> dict[str, int]:
        """Number of checks per status."""
        counter = Counter(check.status.value for check in self.checks)
        return {status.value: counter.get(status.value, 0) for status in CheckStatus}

    def to_json(self) -> dict[str, Any]:
        """The document ``verify-engine --format json`` prints."""
        return {
            "engine": str(self.engine),
            "sha256": self.sha256,
            "size": self.size,
            "header": self.header.to_json(),
            "manifest": self.manifest.to_json() if self.manifest else None,
            "calibration_cache": self.calibration_cache.to_json() if self.calibration_cache else None,
            "onnx": self.onnx.to_json() if self.onnx else None,
            "gpu": self.gpu.to_json() if self.gpu else None,
            "layer_precisions": (
                {
                    "layers": self.layer_precisions.layers,
                    "detailed": self.layer_precisions.detailed,
                    "per_precision": self.layer_precisions.per_precision,
                }
                if self.layer_precisions
                else None
            ),
            "checks": [check.to_json() for check in self.checks],
            "result": "pass" if self.ok else "fail",
            "summary": self.counts(),
            "notes": list(self.notes),
        }

    def to_json_text(self) -> str:
        """:meth:`to_json` as indented JSON text."""
        return json.dumps(self.to_json(), indent=2)

    def render_text(self) -> str:
        """The human-readable report."""
        header = self.header
        version = f", TensorRT {header.tensorrt_version}" if header.tensorrt_version else ""
        serial = (
            f", serialization {header.serialization_version} (informational)"
            if header.serialization_version is not None
            else ""
        )
        lines = [
            f"engine   {self.engine}",
            f"sha256   {self.sha256}",
            f"size     {self.size} bytes",
            f"header   {header.magic.value if header.magic else '?'}: {header.description}{version}{serial}",
        ]
        if self.manifest is not None:
            signers = ", ".join(self.manifest.signers) or "no trusted signature"
            lines.append(f"manifest {self.manifest.path} ({self.manifest.digest}; signed by {signers})")
        gpu = self.gpu
        if gpu is not None and gpu.report is not None and gpu.report.gpu is not None and gpu.report.gpu.name:
            probe = gpu.report.gpu
            runtime = gpu.report.runtime
            used = f", {runtime.module} {runtime.version}" if runtime else ""
            lines.append(f"gpu      {probe.name} (compute capability {probe.compute_capability}){used}")
        lines.append("")
        width = max((len(check.name) for check in self.checks), default=0)
        for check in self.checks:
            label = check.status.value.upper()
            lines.append(f"{label:<8} {check.name:<{width}}  {check.message}")
        if gpu is not None and gpu.errors:
            lines.append("")
            lines.append("TensorRT said:")
            lines.extend(f"  {message}" for message in gpu.errors)
        lines.extend(f"note: {note}" for note in self.notes)
        counts = self.counts()
        verdict = "PASSED" if self.ok else "FAILED"
        lines.append("")
        lines.append(
            f"result: {verdict} ({counts['fail']} failed, {counts['pass']} passed, "
            f"{counts['skipped']} skipped)"
        )
        return "\n".join(lines)


def not_read(problem: str | None, check: str, expected: str, not_given: Check | None) -> list[Check]:
    """The checks of a file given on the command line that was not read: ``not_given`` (when there is one)
    where it was not given (``problem`` None), else the failed ``check`` saying why it did not parse."""
    if problem is None:
        return [] if not_given is None else [not_given]
    return [failed(check, problem, expected, None)]
