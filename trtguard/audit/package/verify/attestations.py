"""One attestation in an evidence package: a DSSE in-toto statement of the kind it is filed as, about its
engine, with a valid predicate, signed by a key of the included TrustedKeys (DSSE, or OpenPGP over its bytes),
and, for a build manifest, valid by the rule admission applies (:func:`verifier.verification.manifest_of`).

And one model signature found beside an engine (OpenSSF Model Signing, about the files it was built from):
verified with the model-signing signers of the included TrustedKeys, and which input of the engine's build
manifests (ONNX model, calibration dataset) it covers, as ``onnxSignedBy`` and ``calibrationSignedBy`` count
them at admission. One that no included signer made is a note, not a failure: anyone who can push to the
repository can attach one, and admission counts it for nothing too."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from trtguard.audit.package.contents import (
    ATTESTATION_KINDS,
    AttestationFile,
    AttestationKind,
    EngineInfo,
    ModelSignatureFile,
)
from trtguard.audit.package.verify.findings import Findings, error_text, listed
from verifier.attestations import load_approval, load_verification
from verifier.base import InputError, TrtguardError, VerificationError
from verifier.crypto import Envelope, Statement, statement_from_envelope
from verifier.evidence import ArtifactSubjects, Attestation
from verifier.manifest import load_manifest
from verifier.verification import (
    StatementRefused,
    StatementTrust,
    manifest_of,
    verify_model_statement,
    verify_statement,
)

_PREDICATE_TYPES: Final = {kind: predicate_type for predicate_type, kind in ATTESTATION_KINDS.items()}


def check_attestation(
    members: Mapping[str, bytes],
    attestation: AttestationFile,
    *,
    name: str,
    entry: EngineInfo,
    trust: StatementTrust,
    findings: Findings,
) -> str | None:
    """Check one attestation file of the engine ``entry`` (``name`` in messages) with the included ``trust``;
    returns a build manifest's audit ID."""
    path, kind = attestation.path, attestation.kind
    data = members.get(path)
    if data is None:
        findings.fail("engines", f"{name}: {path} is not in the package")
        return None
    try:
        envelope = Envelope.from_json(data, location=path)
        statement = statement_from_envelope(envelope, location=path)
    except (InputError, VerificationError, RecursionError) as error:
        findings.fail("engines", f"{name}: {path} is not a DSSE in-toto attestation: {error_text(error)}")
        return None
    if statement.predicate_type != _PREDICATE_TYPES[kind]:
        findings.fail("engines", f"{name}: {path} is filed as a {kind} but is a {statement.predicate_type}")
        return None
    if not statement.subject_digests() & set(entry.subjects):
        about = ", ".join(sorted(statement.subject_digests())) or "no sha256 digest"
        findings.fail("engines", f"{name}: {path} is about {about}, not this engine")
        return None
    detail, audit_id = _describe(kind, statement, path)
    if detail is None:
        findings.fail("engines", f"{name}: {path} does not hold a valid {kind} predicate")
        return None
    if trust.empty:
        findings.fail(
            "engines", f"{name}: {path} cannot be checked: the included policies give no public key"
        )
        return audit_id
    copy = Attestation(
        envelope,
        statement.predicate_type,
        statement.subject_digests(),
        path,
        tuple(members[p] for p in attestation.openpgp_signatures if p in members),
    )
    try:
        verified = verify_statement([copy], trust)
    except StatementRefused:
        findings.fail("engines", f"{name}: {kind} {path} is not signed by a key of the included TrustedKeys")
        return audit_id
    if kind == "build-manifest":
        try:
            manifest = manifest_of(verified)
            # Admission's rule: the engine it describes is this artifact's engine (its engine layer).
            _artifact(entry).require_build_manifest(manifest.manifest, manifest.subjects)
        except VerificationError as error:
            findings.fail("engines", f"{name}: build manifest {path} would not be admitted: {error.message}")
            return audit_id
    findings.ok("engines", f"{name}: {kind} ({detail}) signed by {', '.join(verified.signers)}")
    return audit_id


def _artifact(entry: EngineInfo) -> ArtifactSubjects:
    """Which of the engine's subject digests is which: its artifact digest, and its engine layer's (the other
    one, when the export knew it), as admission reads them (:class:`~verifier.evidence.ArtifactSubjects`)."""
    engine_file = next((s for s in entry.subjects if s != entry.digest), None)
    return ArtifactSubjects(entry.digest, engine_file)


def _describe(kind: AttestationKind, statement: Statement, path: str) -> tuple[str | None, str | None]:
    """A few words about a valid predicate, and a build manifest's audit ID; ``(None, None)`` when invalid."""
    try:
        if kind == "build-manifest":
            manifest = load_manifest(statement, path)
            words = f"audit ID {manifest.audit_id}, TensorRT {manifest.toolchain.tensorrt_version}"
            return words, manifest.audit_id
        if kind == "change-approval":
            approval = load_approval(statement, path)
            changes = ", ".join(approval.changes)
            return f"by {approval.approver} for audit ID {approval.audit_id}: {changes}", None
        verification = load_verification(statement, path)
        return f"GPU check {verification.result} on {verification.gpu.gpu_name}", None
    except InputError:
        return None, None


def build_inputs(members: Mapping[str, bytes], entry: EngineInfo) -> dict[str, str]:
    """The inputs the engine's build manifests in the package record: SHA-256 hex → what it is ("the ONNX
    model resnet50.onnx"). Their signatures are the attestation check's; unreadable ones add nothing."""
    inputs: dict[str, str] = {}
    for attestation in entry.attestations:
        data = members.get(attestation.path)
        if attestation.kind != "build-manifest" or data is None:
            continue
        try:
            statement = statement_from_envelope(Envelope.from_json(data, location=attestation.path))
            manifest = load_manifest(statement, attestation.path)
        except (TrtguardError, RecursionError):
            continue
        inputs[manifest.onnx.sha256] = (
            f"the ONNX model {manifest.onnx.name or manifest.onnx.uri or ''}".strip()
        )
        dataset = manifest.calibration.dataset if manifest.calibration is not None else None
        if dataset is not None:
            inputs[dataset.sha256] = f"the calibration dataset {dataset.name or dataset.uri or ''}".strip()
    return inputs


def check_model_signature(
    members: Mapping[str, bytes],
    signature: ModelSignatureFile,
    *,
    name: str,
    inputs: Mapping[str, str],
    trust: StatementTrust,
    findings: Findings,
) -> None:
    """Check one model signature of the engine ``name`` with the included model-signing ``trust``."""
    path = signature.path
    data = members.get(path)
    if data is None:
        findings.fail("engines", f"{name}: {path} is not in the package")
        return
    if trust.empty:
        findings.note(
            "engines",
            f"{name}: model signature {path} cannot be checked: the included policies give no "
            "model-signing signer",
        )
        return
    try:
        envelope = Envelope.from_dict(_envelope(data, path), location=path)
        statement = statement_from_envelope(envelope, location=path)
        copy = Attestation(envelope, statement.predicate_type, statement.subject_digests(), path, bundle=data)
        verified = verify_model_statement([copy], trust)
    except (TrtguardError, RecursionError) as error:
        findings.note("engines", f"{name}: model signature {path} counts for nothing: {error_text(error)}")
        return
    covered = [
        f"{what} (signed as {', '.join(map(verified.described, files))})"
        for digest, what in inputs.items()
        if (files := verified.covers(digest))
    ]
    what = f"covering {listed(covered)}" if covered else "covering no input its build manifests record"
    findings.ok(
        "engines",
        f"{name}: model signature {path} (model {verified.model_name or '(unnamed)'}, "
        f"{len(verified.files)} files) signed by {', '.join(verified.signers)}, {what}",
    )


def _envelope(data: bytes, path: str) -> object:
    """The DSSE envelope of a Sigstore bundle, as JSON (its verification material is read when verified)."""
    try:
        document = json.loads(data)
    except ValueError:
        raise InputError("not JSON", location=path) from None
    if not isinstance(document, dict):
        raise InputError("not a Sigstore bundle", location=path)
    return document.get("dsseEnvelope")
