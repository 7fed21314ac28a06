"""The engine-verification attestation: what the GPU verifier observed, signed as a DSSE in-toto Statement.

The predicate model is :class:`verifier.attestations.EngineVerification`. Every check of the report goes
into it, a skipped check as ``not_checked`` with its reason, so that a policy can require the checks it
needs to have *passed* rather than merely not failed.
"""

from __future__ import annotations

import importlib.metadata
from datetime import UTC, datetime
from typing import Literal

from pydantic import ValidationError

from verifier.attestations import (
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    EngineVerification,
    FieldCheck,
    IoTensor,
    ObservedEngine,
    Runtime,
    VerifierInfo,
)
from verifier.base import VerificationError
from verifier.crypto import Envelope, PrivateKey, ResourceDescriptor, Statement, sign_statement
from verifier.engine._report import CheckStatus, EngineReport
from verifier.manifest import OptimizationProfile, ShapeRange
from verifier.predicates import Gpu

_STATUS: dict[CheckStatus, Literal["pass", "fail", "not_checked"]] = {
    CheckStatus.PASS: "pass",
    CheckStatus.FAIL: "fail",
    CheckStatus.SKIPPED: "not_checked",
}
# The child names the module it imported; the attestation names the runtime flavour.
_MODULES: dict[str, Literal["tensorrt", "tensorrt_lean"]] = {
    "tensorrt": "tensorrt",
    "tensorrt_lean": "tensorrt_lean",
    "tensorrt_lean_bindings": "tensorrt_lean",
}


def _version() -> str:
    try:
        return importlib.metadata.version("trtguard")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def verification_predicate(
    report: EngineReport, *, verified_at: datetime | None = None
) -> EngineVerification:
    """The engine-verification predicate for ``report``.

    Raises :class:`VerificationError` when the report has no GPU observation to attest (the GPU check was
    not run, found no GPU, or the child never got as far as creating a TensorRT runtime), or when the child
    did not report a fact the attestation states (GPU name, compute capability, driver, runtime flavour).
    """
    run = report.gpu
    child = run.report if run is not None else None
    probe = child.gpu if child is not None else None
    runtime = child.runtime if child is not None else None
    if run is None or child is None or probe is None or not probe.available or runtime is None:
        why = run.message if run is not None else "the GPU check did not run"
        raise VerificationError(
            f"nothing to attest: no TensorRT runtime observed the engine ({why})",
            location=str(report.engine),
            hint="an engine-verification attestation records a GPU observation: run with --gpu on a GPU host",
        )
    # Every fact attested is one the child observed: an unknown one is refused, never filled in.
    unknown = [
        name
        for name, value in (
            ("GPU name", probe.name),
            ("compute capability", probe.compute_capability),
            ("driver version", probe.driver_version),
        )
        if not value
    ]
    module = _MODULES.get(runtime.module)
    if module is None:
        unknown.append(f"TensorRT runtime flavour (module {runtime.module!r})")
    if unknown:
        raise VerificationError(
            f"cannot attest: the GPU child did not report the {', '.join(unknown)}",
            location=str(report.engine),
            hint="run the check again on a GPU host whose driver reports the device, with tensorrt or "
            "tensorrt_lean installed",
        )
    try:
        gpu = Gpu(
            gpu_name=probe.name,
            compute_capability=probe.compute_capability,
            driver_version=probe.driver_version,
        )
    except ValidationError as error:
        raise VerificationError(
            f"cannot attest: the GPU child reported GPU facts that are not valid: {error.errors()[0]['msg']}",
            location=str(report.engine),
        ) from error
    engine = child.engine
    io_tensors = [
        IoTensor(
            name=tensor.name,
            mode="input" if tensor.mode == "INPUT" else "output",
            dtype=tensor.canonical_dtype,
            shape=tensor.shape,
            format=tensor.format,
        )
        for tensor in (engine.io_tensors if engine else [])
    ]
    dynamic = {t.name for t in (engine.io_tensors if engine else []) if t.mode == "INPUT" and -1 in t.shape}
    profiles = []
    for profile in engine.optimization_profiles if engine else []:
        ranges = {
            name: ShapeRange(min=r.min, opt=r.opt, max=r.max)
            for name, r in profile.inputs.items()
            if name in dynamic
        }
        if ranges:
            profiles.append(OptimizationProfile(inputs=ranges))
    layers = report.layer_precisions
    return EngineVerification(
        verified_at=verified_at or datetime.now(UTC),
        verifier=VerifierInfo(version=_version()),
        engine=ObservedEngine(name=report.engine.name, sha256=report.sha256, size=report.size),
        manifest_digest=report.manifest.digest if report.manifest else None,
        runtime=Runtime(
            module=module,
            tensorrt_version=runtime.version,
            plan_tensorrt_version=report.header.tensorrt_version,
        ),
        gpu=gpu,
        io_tensors=io_tensors,
        optimization_profiles=profiles,
        layer_precisions=dict(layers.per_precision) if layers is not None and layers.detailed else None,
        checks=[
            FieldCheck(
                field=check.name,
                status=_STATUS[check.status],
                declared=check.expected,
                observed=check.observed,
                detail=check.message,
            )
            for check in report.checks
        ],
        result="pass" if report.ok else "fail",
    )


def sign_verification(
    report: EngineReport, key: PrivateKey, *, verified_at: datetime | None = None
) -> Envelope:
    """A DSSE envelope carrying the in-toto Statement (subject: the engine file) of the verification."""
    predicate = verification_predicate(report, verified_at=verified_at)
    statement = Statement(
        subject=[ResourceDescriptor(name=report.engine.name, digest={"sha256": report.sha256})],
        predicate_type=ENGINE_VERIFICATION_PREDICATE_TYPE,
        predicate=predicate.model_dump(mode="json"),
    )
    return sign_statement(statement, key)
