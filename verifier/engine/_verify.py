"""``verify-engine`` as a function: static checks first, then (when asked) the GPU.

Order matters and is fixed: the manifest's signature is checked when it is loaded
(:func:`load_signed_manifest`), before anything in it is used; the engine is hashed next; the static checks
follow; the engine is deserialized on a GPU only once the hash has matched a manifest whose signature
verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verifier.base import InputError, ProgressCallback, VerificationError, hash_file, read_limited
from verifier.crypto import Envelope, PublicKey
from verifier.engine._calibration import CalibrationCacheFile, InvalidCalibrationCache, read_calibration_cache
from verifier.engine._header import read_plan_header
from verifier.engine._inspector import InvalidInspectorOutput, LayerPrecisions, parse_engine_information
from verifier.engine._model_signature import ModelSignatureRequest, model_signature_checks
from verifier.engine._onnx_model import InvalidOnnxModel, OnnxModelInfo, read_onnx_model
from verifier.engine._report import Check, CheckStatus, EngineReport, ManifestSummary, failed, passed, skipped
from verifier.engine._runtime import LEAN_MODULES, GpuOptions, GpuOutcome, GpuRun, inspect_on_gpu
from verifier.engine.checks.calibration import calibration_checks
from verifier.engine.checks.gpu import gpu_checks
from verifier.engine.checks.onnx import onnx_checks
from verifier.engine.checks.plan import engine_file_checks, plan_checks, plan_version_check
from verifier.manifest import EngineBuildManifest, manifest_digest
from verifier.verification import StatementRefused, StatementTrust, manifest_of, signers_of, verify_statement


@dataclass(frozen=True, slots=True)
class SignedManifest:
    """A build manifest envelope after its signature check.

    ``manifest`` is set only when a trusted key's signature verified *and* the predicate is valid;
    otherwise ``signature_problem`` or ``manifest_problem`` says what went wrong.
    """

    path: Path
    #: :func:`~verifier.manifest.manifest_digest`: ``sha256:<hex>`` of the DSSE payload (the statement).
    digest: str
    signers: tuple[str, ...]
    signature_problem: str | None
    manifest: EngineBuildManifest | None
    manifest_problem: str | None

    @property
    def unusable(self) -> str:
        """Why the manifest's claims cannot be used (empty when they can)."""
        if self.signature_problem is not None:
            return "the manifest's signature did not verify, so its claims are not used"
        if self.manifest_problem is not None:
            return "the signed manifest is not a valid engine build manifest (see manifest.format)"
        return ""


def load_signed_manifest(path: Path, keys: Mapping[str, PublicKey], *, threshold: int = 1) -> SignedManifest:
    """Read the DSSE envelope at ``path`` and check its signature with ``keys`` before reading its payload.

    Raises :class:`InputError` when the file cannot be read or is not a DSSE envelope (a usage problem);
    a signature that does not verify or an invalid predicate is recorded, not raised, so that the report
    can show it as a failed check.
    """
    data = read_limited(
        path,
        "the manifest envelope",
        hint="give the DSSE envelope of the engine build manifest",
    )
    # Loaded here: verifier.evidence brings the signature result types, which the command module does not need
    # to load (a slim GPU environment runs verify-engine).
    from verifier.evidence import Attestation  # noqa: PLC0415

    envelope = Envelope.from_json(data, location=str(path))
    digest = manifest_digest(envelope)
    trust = StatementTrust.with_keys(keys, threshold)  # InputError: a threshold the keys cannot meet
    if not envelope.signatures:
        return SignedManifest(path, digest, (), "the envelope carries no signature", None, None)
    # Signatures first, the payload only once they verified (verify_statement reads it after them).
    try:
        found = Attestation(envelope, "", frozenset(), str(path))
        verified = verify_statement([found], trust)
    except StatementRefused as error:
        return SignedManifest(path, digest, (), error.message, None, None)
    except (InputError, VerificationError) as error:  # signed, but the payload is no in-toto statement
        signers = tuple(dict.fromkeys(s.name for s in signers_of([found], trust)))
        return SignedManifest(path, digest, signers, None, None, error.diagnostics())
    try:
        manifest = manifest_of(verified).manifest
    except StatementRefused as error:
        return SignedManifest(path, digest, verified.signers, None, None, error.diagnostics())
    return SignedManifest(path, digest, verified.signers, None, manifest, None)


@dataclass(frozen=True, slots=True)
class VerifyRequest:
    """What to verify. ``gpu`` set means: deserialize on the GPU once the static gate has passed."""

    engine: Path
    manifest: SignedManifest | None = None
    calibration_cache: Path | None = None
    onnx: Path | None = None
    gpu: GpuOptions | None = None
    model_signature: ModelSignatureRequest | None = None


def _manifest_checks(signed: SignedManifest | None) -> list[Check]:
    if signed is None:
        return [
            skipped("manifest.signature", "no --manifest given: there is nothing to compare the engine with")
        ]
    if signed.signature_problem is not None:
        return [
            failed("manifest.signature", signed.signature_problem, "a signature by a trusted key", None),
            skipped("manifest.format", "the signature did not verify, so the payload was not read"),
        ]
    checks = [
        passed("manifest.signature", f"signed by {', '.join(signed.signers)}", None, list(signed.signers))
    ]
    if signed.manifest_problem is not None:
        checks.append(failed("manifest.format", signed.manifest_problem, "an engine build manifest", None))
    else:
        checks.append(
            passed("manifest.format", "a valid engine build manifest whose subject is output_engine")
        )
    return checks


def _calibration(path: Path | None) -> tuple[CalibrationCacheFile | None, str | None]:
    if path is None:
        return None, None
    try:
        return read_calibration_cache(path), None
    except InvalidCalibrationCache as error:
        return None, str(error) + (f" ({error.hint})" if error.hint else "")


def _onnx(path: Path | None) -> tuple[OnnxModelInfo | None, str | None]:
    if path is None:
        return None, None
    try:
        return read_onnx_model(path), None
    except InvalidOnnxModel as error:
        return None, str(error)


def _layers(run: GpuRun) -> tuple[LayerPrecisions | None, str | None]:
    inspector = run.report.inspector if run.report else None
    if inspector is None:
        return None, "no engine was loaded"
    if not inspector.available or inspector.information is None:
        return None, inspector.reason
    try:
        return parse_engine_information(inspector.information), None
    except InvalidInspectorOutput as error:
        return None, error.message


def _hash_gate(report_checks: list[Check]) -> str | None:
    """Why the engine must not be deserialized even though the manifest verified, or ``None``."""
    hash_check = next(check for check in report_checks if check.name == "output_engine.sha256")
    if hash_check.status is not CheckStatus.PASS:
        return "the engine's hash did not match the signed manifest (see output_engine.sha256)"
    return None


def _version_note(run: GpuRun, plan_version: str | None) -> str | None:
    runtime = run.report.runtime if run.report else None
    if run.outcome is not GpuOutcome.DESERIALIZE_FAILED or runtime is None or plan_version is None:
        return None
    if runtime.module in LEAN_MODULES:
        return (
            f"the lean runtime ({runtime.module} {runtime.version}) loads only version-compatible plans; "
            f"this plan was written by TensorRT {plan_version}: if it was not built with "
            "BuilderFlag.VERSION_COMPATIBLE, verify it with the full tensorrt runtime of that version"
        )
    if not runtime.version.startswith(".".join(plan_version.split(".")[:2])):
        return (
            f"the runtime is TensorRT {runtime.version} and the plan was written by TensorRT {plan_version}: "
            "a plan that is not version-compatible loads only in the TensorRT version that built it"
        )
    return None


def verify_engine(request: VerifyRequest, *, progress: ProgressCallback | None = None) -> EngineReport:
    """Run every check ``request`` asks for and return the report.

    Raises :class:`InputError` only for files that cannot be read at all; everything about their
    content is reported as checks. Blocking (it hashes files and waits for the GPU child): async callers
    run it in a thread (``asyncio.to_thread``).
    """
    engine = request.engine
    try:
        digest = hash_file(engine, progress=progress)
    except OSError as error:
        raise InputError(
            f"cannot read the engine file: {error.strerror}", location=str(engine), hint="check the path"
        ) from error
    header = read_plan_header(engine)
    signed = request.manifest
    manifest = signed.manifest if signed else None
    unavailable = (signed.unusable if signed else "") or "no --manifest given"
    checks = _manifest_checks(signed)
    checks += engine_file_checks(digest.sha256, digest.size, manifest, unavailable)
    checks += plan_checks(header, digest.size)
    checks.append(plan_version_check(header, manifest, unavailable))
    cache, cache_problem = _calibration(request.calibration_cache)
    checks += calibration_checks(cache, cache_problem, manifest, unavailable)
    model, model_problem = _onnx(request.onnx)
    checks += onnx_checks(model, model_problem, manifest, unavailable)
    checks += model_signature_checks(digest.sha256, request.model_signature)

    run: GpuRun | None = None
    layers: LayerPrecisions | None = None
    notes: list[str] = []
    if request.gpu is None:
        checks.append(skipped("gpu.deserialize", "not requested (--gpu)"))
    elif manifest is None:
        checks.append(
            failed(
                "gpu.deserialize",
                "an engine is deserialized only after its hash matched a manifest signed by a trusted key "
                f"({unavailable})",
                "a verified manifest",
                None,
            )
        )
    else:
        gate = _hash_gate(checks)
        if gate is not None:
            checks.append(skipped("gpu.deserialize", f"not attempted: {gate}"))
        else:
            run = inspect_on_gpu(engine, digest.sha256, request.gpu)
            layers, layers_unavailable = _layers(run)
            checks += gpu_checks(run, manifest, model, layers, layers_unavailable)
            note = _version_note(run, header.tensorrt_version)
            if note:
                notes.append(note)
    summary = (
        ManifestSummary(
            path=signed.path,
            digest=signed.digest,
            signers=signed.signers,
            audit_id=manifest.audit_id if manifest else None,
        )
        if signed
        else None
    )
    return EngineReport(
        engine=engine,
        sha256=digest.sha256,
        size=digest.size,
        header=header,
        checks=tuple(checks),
        manifest=summary,
        calibration_cache=cache,
        onnx=model,
        gpu=run,
        layer_precisions=layers,
        notes=tuple(notes),
    )
