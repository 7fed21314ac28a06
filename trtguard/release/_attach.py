"""Attaching a signed attestation to an image or engine artifact in its registry.

The envelope is written twice, so that every reader finds it: as a layer of cosign's ``sha256-<digest>.att``
tag (cosign ≤ 2, policy-controller, Kyverno) and as an OCI 1.1 referrer of the artifact (cosign v3, oras;
with the ``sha256-<digest>`` fallback index where the registry has no referrers API).

Before anything is written the statement must be about the artifact
(:class:`~verifier.evidence.ArtifactSubjects`): its subject must be the artifact digest D or, for an engine
artifact, its engine layer L. trtguard's own predicates must also describe that engine: a build manifest's
``output_engine.sha256``, a GPU verification's ``engine.sha256`` and a change approval's ``engine_digest``
must be L (or, where the artifact has no engine layer, the statement must name D), and a build manifest
must record the artifact's ONNX and calibration-cache files as its inputs. Refusing here keeps a manifest
from being parked on an artifact whose engine it does not describe; the evaluator applies the same rule
(the same :class:`~verifier.evidence.ArtifactSubjects` methods) when it reads attestations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from trtguard.release.cosign_layout import append_layer, push_referrer
from trtguard.release.publish import RegistryWriter
from verifier.attestations import (
    CHANGE_APPROVAL_PREDICATE_TYPE,
    ENGINE_VERIFICATION_PREDICATE_TYPE,
    load_approval,
    load_verification,
)
from verifier.base import Deadline, ImageReference, InputError, VerificationError
from verifier.crypto import Statement
from verifier.evidence import ArtifactSubjects
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, load_manifest
from verifier.registry import (
    BUNDLE_CONTENT_ANNOTATION,
    BUNDLE_PREDICATE_ANNOTATION,
    DSSE_ENVELOPE,
    IN_TOTO_JSON,
    OPENPGP_STATEMENT,
    PGP_SIGNATURE,
    PREDICATE_TYPE_ANNOTATION,
    SIGSTORE_BUNDLE,
    attestation_tag,
)
from verifier.registry.evidence import RegistryEvidence

#: Annotation on trtguard's attestation referrer manifests (the name BuildKit uses for in-toto layers).
PREDICATE_TYPE_REFERRER_ANNOTATION = "in-toto.io/predicate-type"


@dataclass(frozen=True, slots=True)
class Attached:
    """Where an attestation went: the artifact's digest and the referrer manifest's digest."""

    digest: str
    referrer: str


async def attach_attestation(
    writer: RegistryWriter,
    target: ImageReference,
    envelope: bytes,
    statement: Statement,
    deadline: Deadline,
    *,
    location: str | None = None,
) -> Attached:
    """Attach ``envelope`` (whose payload is ``statement``) to ``target``; it must be about the artifact.

    The subject may be the artifact's digest or, for an engine artifact, its engine file (the engine layer's
    sha256); trtguard's predicates must describe that engine file. Raises :class:`InputError` when the
    statement is about something else, or is a trtguard predicate that does not validate.
    """
    digest, pinned = await _pinned_about(writer, target, statement, deadline, location)
    await append_layer(
        writer,
        pinned,
        attestation_tag(digest),
        envelope,
        media_type=DSSE_ENVELOPE,
        annotations={PREDICATE_TYPE_ANNOTATION: statement.predicate_type},
        deadline=deadline,
    )
    manifest = await writer.client.get_manifest(pinned, deadline)
    pushed = await push_referrer(
        writer,
        pinned,
        manifest.descriptor,
        artifact_type=DSSE_ENVELOPE,
        blob=envelope,
        blob_media_type=DSSE_ENVELOPE,
        layer_annotations={PREDICATE_TYPE_ANNOTATION: statement.predicate_type},
        annotations={PREDICATE_TYPE_REFERRER_ANNOTATION: statement.predicate_type},
        deadline=deadline,
    )
    return Attached(digest=digest, referrer=pushed.digest)


async def attach_openpgp_statement(
    writer: RegistryWriter,
    target: ImageReference,
    statement_bytes: bytes,
    statement: Statement,
    signatures: list[bytes],
    deadline: Deadline,
    *,
    location: str | None = None,
) -> Attached:
    """Attach a statement signed with OpenPGP (its exact bytes and detached signatures) to ``target`` as a
    referrer of type ``application/vnd.trtguard.statement.openpgp.v1``; the same rules as
    :func:`attach_attestation` about what the statement must describe. Signatures are not verified here."""
    digest, pinned = await _pinned_about(writer, target, statement, deadline, location)
    manifest = await writer.client.get_manifest(pinned, deadline)
    pushed = await push_referrer(
        writer,
        pinned,
        manifest.descriptor,
        artifact_type=OPENPGP_STATEMENT,
        blob=statement_bytes,
        blob_media_type=IN_TOTO_JSON,
        annotations={PREDICATE_TYPE_REFERRER_ANNOTATION: statement.predicate_type},
        extra_layers=[(signature, PGP_SIGNATURE) for signature in signatures],
        deadline=deadline,
    )
    return Attached(digest=digest, referrer=pushed.digest)


async def attach_model_signature(
    writer: RegistryWriter,
    target: ImageReference,
    bundle: bytes,
    deadline: Deadline,
    *,
    location: str | None = None,
) -> Attached:
    """Attach an OpenSSF Model Signing signature (``model_signing sign …``: a Sigstore bundle) to the engine
    artifact ``target`` as cosign v3 attaches a bundle: a referrer of artifact type
    ``application/vnd.dev.sigstore.bundle.v0.3+json`` with the ``dev.sigstore.bundle.*`` annotations.

    The signature is about the model the engine was built from, not about the artifact, so its subject is
    not compared with the artifact's: it counts only where a signed build manifest records the digest of one
    of its files (``onnxSignedBy``, ``calibrationSignedBy``). It must be a model signature trtguard reads
    (:class:`InputError` otherwise); who signed it is not decided here.
    """
    from verifier.model_signing import PREDICATE_TYPE, read_signature  # noqa: PLC0415 - its users only

    read_signature(bundle, location or "the model signature")
    digest = await writer.client.resolve(target, deadline)
    pinned = target.with_digest(digest)
    manifest = await writer.client.get_manifest(pinned, deadline)
    pushed = await push_referrer(
        writer,
        pinned,
        manifest.descriptor,
        artifact_type=SIGSTORE_BUNDLE,
        blob=bundle,
        blob_media_type=SIGSTORE_BUNDLE,
        annotations={BUNDLE_CONTENT_ANNOTATION: "dsse-envelope", BUNDLE_PREDICATE_ANNOTATION: PREDICATE_TYPE},
        deadline=deadline,
    )
    return Attached(digest=digest, referrer=pushed.digest)


async def _pinned_about(
    writer: RegistryWriter,
    target: ImageReference,
    statement: Statement,
    deadline: Deadline,
    location: str | None,
) -> tuple[str, ImageReference]:
    """``target``'s digest and ``target`` pinned to it, once ``statement`` is found to be about it."""
    digest = await writer.client.resolve(target, deadline)
    pinned = target.with_digest(digest)
    subjects = await RegistryEvidence(writer.client).subjects(pinned, deadline)
    _require_about(subjects, statement, f"{pinned.name}@{digest}", location)
    return digest, pinned


def _require_about(
    subjects: ArtifactSubjects, statement: Statement, artifact: str, location: str | None
) -> None:
    named = statement.subject_digests()
    if not named & subjects.digests:
        about = ", ".join(sorted(named)) or "no sha256 digest"
        engine = f" or its engine file {subjects.engine_file}" if subjects.engine_file else ""
        raise InputError(
            f"the attestation is about {about}, not about {artifact}{engine}",
            location=location,
            hint="attach it to the artifact its statement's subject names (an engine artifact's ONNX and "
            "calibration-cache layers are not subjects)",
        )
    source = location or "the attestation"
    try:
        if statement.predicate_type == ENGINE_BUILD_PREDICATE_TYPE:
            subjects.require_build_manifest(load_manifest(statement, source), named)
        elif statement.predicate_type == ENGINE_VERIFICATION_PREDICATE_TYPE:
            verification = load_verification(statement, source)
            subjects.require_describes(verification.engine.sha256, named, "the GPU verification")
        elif statement.predicate_type == CHANGE_APPROVAL_PREDICATE_TYPE:
            approval = load_approval(statement, source)
            subjects.require_describes(approval.engine_digest, named, "the change approval")
    except VerificationError as error:
        raise InputError(
            f"not attached to {artifact}: {error.message}", location=location, hint=error.hint
        ) from error


async def attach_notation_signature(
    writer: RegistryWriter,
    target: ImageReference,
    envelope: bytes,
    media_type: str,
    deadline: Deadline,
    *,
    location: str | None = None,
) -> Attached:
    """Push an existing Notary Project envelope (made by ``notation sign`` or ``trtguard sign --format
    notation``) as a referrer of ``target``, as Notation stores it: artifact type
    ``application/vnd.cncf.notary.signature``, one layer of the envelope's media type, and the chain's
    ``io.cncf.notary.x509chain.thumbprint#S256`` annotation.

    Before anything is written the envelope must be intact (its signature verifies with its own leaf; no
    trust is decided here) and its payload must name the artifact's manifest descriptor exactly (media type,
    digest and size, as the registry serves it): :class:`InputError` otherwise.
    """
    from verifier.signatures.notation import ARTIFACT_TYPE, THUMBPRINT_ANNOTATION, read_signer  # noqa: PLC0415

    try:
        signer = read_signer(envelope, media_type)
    except VerificationError as error:
        raise InputError(
            f"not an intact Notary Project envelope: {error.message}", location=location
        ) from None
    digest = await writer.client.resolve(target, deadline)
    pinned = target.with_digest(digest)
    manifest = await writer.client.get_manifest(pinned, deadline)
    served = manifest.descriptor
    signed = signer.target
    if (signed.media_type, signed.digest, signed.size) != (served.media_type, served.digest, served.size):
        raise InputError(
            f"the envelope signs {signed.media_type} {signed.digest} ({signed.size} bytes), not "
            f"{pinned.name}@{digest} ({served.media_type}, {served.size} bytes)",
            location=location,
            hint="attach it to the artifact it was made for",
        )
    pushed = await push_referrer(
        writer,
        pinned,
        served,
        artifact_type=ARTIFACT_TYPE,
        blob=envelope,
        blob_media_type=media_type,
        annotations={THUMBPRINT_ANNOTATION: json.dumps(signer.thumbprints, separators=(",", ":"))},
        deadline=deadline,
    )
    return Attached(digest=digest, referrer=pushed.digest)
