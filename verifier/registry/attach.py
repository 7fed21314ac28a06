"""Attaching a signed attestation to an image or engine artifact in its registry.

The envelope is written twice, so that every reader finds it: as a layer of cosign's ``sha256-<digest>.att``
tag (cosign ≤ 2, policy-controller, Kyverno) and as an OCI 1.1 referrer of the artifact (cosign v3, oras;
with the ``sha256-<digest>`` fallback index where the registry has no referrers API).
"""

from __future__ import annotations

from dataclasses import dataclass

from verifier.deadline import Deadline
from verifier.errors import InputError
from verifier.intoto import Statement
from verifier.references import ImageReference
from verifier.registry.client import RegistryClient
from verifier.registry.cosign_layout import (
    DSSE_ENVELOPE,
    PREDICATE_TYPE_ANNOTATION,
    append_layer,
    attestation_tag,
    push_referrer,
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
    client: RegistryClient,
    target: ImageReference,
    envelope: bytes,
    statement: Statement,
    deadline: Deadline,
    *,
    location: str | None = None,
) -> Attached:
    """Attach ``envelope`` (whose payload is ``statement``) to ``target``; its subject must be the artifact.

    The subject may be the artifact's digest or, for an engine artifact, one of its files (the engine's
    sha256). Raises :class:`InputError` when the statement is about something else.
    """
    digest = await client.resolve(target, deadline)
    pinned = target.with_digest(digest)
    subjects = await RegistryEvidence(client).subject_digests(pinned, deadline)
    if not statement.subject_digests() & subjects:
        named = ", ".join(sorted(statement.subject_digests())) or "no sha256 digest"
        raise InputError(
            f"the attestation is about {named}, not about {pinned.name}@{digest} or its files",
            location=location,
            hint="attach it to the artifact its statement's subject names",
        )
    await append_layer(
        client,
        pinned,
        attestation_tag(digest),
        envelope,
        media_type=DSSE_ENVELOPE,
        annotations={PREDICATE_TYPE_ANNOTATION: statement.predicate_type},
        deadline=deadline,
    )
    manifest = await client.get_manifest(pinned, deadline)
    pushed = await push_referrer(
        client,
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
