"""Where cosign keeps signatures and attestations in a registry, read and written the same way.

Classic layout (cosign ``specs/SIGNATURE_SPEC.md``): the signatures of the image ``repo@sha256:abc…`` are the
layers of an OCI manifest tagged ``sha256-abc….sig`` in the same repository; attestations use ``.att``. A
signature layer is the simple-signing payload blob, with the base64 signature in the layer annotation
``dev.cosignproject.cosign/signature`` (and certificate, chain, Rekor bundle and RFC 3161 timestamp in
``dev.sigstore.cosign/*`` annotations); an attestation layer is a whole DSSE envelope. Adding a signature is a
read-modify-write of the tag that keeps the existing layers.

OCI 1.1 referrers (cosign v3 bundles, and trtguard's attestations): a manifest whose ``subject`` is the
image, found with ``GET /v2/<repo>/referrers/<digest>``; where a registry has no referrers API the client
keeps an OCI index of the referrers under the tag ``sha256-abc…`` (the "referrers tag schema").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, TypeVar

from verifier.deadline import Deadline
from verifier.digests import parse_sha256
from verifier.errors import EvidenceUnavailable
from verifier.references import ImageReference
from verifier.registry._tasks import task_group
from verifier.registry.client import PushedManifest, RegistryClient
from verifier.registry.oci import (
    EMPTY_DESCRIPTOR,
    EMPTY_JSON,
    OCI_CONFIG,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    Manifest,
    image_index,
    image_manifest,
)
from verifier.signatures import (
    BUNDLE_MEDIA_TYPE,
    CERTIFICATE_ANNOTATION,
    CHAIN_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING_MEDIA_TYPE,
)

__all__ = [
    "BUNDLE_CONTENT_ANNOTATION",
    "BUNDLE_PREDICATE_ANNOTATION",
    "CERTIFICATE_ANNOTATION",
    "CHAIN_ANNOTATION",
    "DSSE_ENVELOPE",
    "PREDICATE_TYPE_ANNOTATION",
    "SIGNATURE_ANNOTATION",
    "SIGSTORE_BUNDLE",
    "SIMPLE_SIGNING",
    "ReferrerArtifact",
    "SignatureLayer",
    "append_layer",
    "attestation_tag",
    "cosign_config",
    "list_referrers",
    "push_referrer",
    "read_attestations",
    "read_referrer",
    "read_signatures",
    "referrers_tag",
    "signature_tag",
    "simple_signing_payload",
]

_log = logging.getLogger(__name__)
T = TypeVar("T")

SIMPLE_SIGNING: Final = SIMPLE_SIGNING_MEDIA_TYPE
DSSE_ENVELOPE: Final = "application/vnd.dsse.envelope.v1+json"
SIGSTORE_BUNDLE: Final = BUNDLE_MEDIA_TYPE
#: cosign's annotation on ``.att`` layers.
PREDICATE_TYPE_ANNOTATION: Final = "predicateType"
#: cosign v3's annotations on bundle referrer manifests.
BUNDLE_CONTENT_ANNOTATION: Final = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION: Final = "dev.sigstore.bundle.predicateType"
CREATED_ANNOTATION: Final = "org.opencontainers.image.created"


def signature_tag(digest: str) -> str:
    """``sha256-<hex>.sig``: the tag of the classic signatures of ``digest``."""
    return f"sha256-{parse_sha256(digest)}.sig"


def attestation_tag(digest: str) -> str:
    """``sha256-<hex>.att``: the tag of the classic attestations of ``digest``."""
    return f"sha256-{parse_sha256(digest)}.att"


def referrers_tag(digest: str) -> str:
    """``sha256-<hex>``: the referrers tag schema's index of manifests whose subject is ``digest``."""
    return f"sha256-{parse_sha256(digest)}"


@dataclass(frozen=True, slots=True)
class SignatureLayer:
    """One layer of a ``.sig`` or ``.att`` manifest with its blob, fetched and digest-checked, unverified."""

    media_type: str
    #: The blob: a simple-signing payload (``.sig``) or a DSSE envelope (``.att``), exactly as stored.
    payload: bytes
    digest: str
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReferrerArtifact:
    """A referrer manifest and the blob of its first layer (a bundle or an envelope), digest-checked."""

    manifest: Manifest
    layer: Descriptor
    blob: bytes


async def read_signatures(
    client: RegistryClient,
    ref: ImageReference,
    digest: str,
    deadline: Deadline,
    *,
    max_bytes: int | None = None,
) -> tuple[SignatureLayer, ...]:
    """The simple-signing layers under ``sha256-<hex>.sig`` (empty when the tag does not exist).

    A layer whose blob cannot be had for good (missing, corrupt, above ``max_bytes``) is left out and
    logged, so that one bad layer does not hide the others; a transient failure is raised.
    """
    return await _read_tag_layers(client, ref, signature_tag(digest), SIMPLE_SIGNING, deadline, max_bytes)


async def read_attestations(
    client: RegistryClient,
    ref: ImageReference,
    digest: str,
    deadline: Deadline,
    *,
    max_bytes: int | None = None,
) -> tuple[SignatureLayer, ...]:
    """The DSSE envelope layers under ``sha256-<hex>.att`` (empty when the tag does not exist).

    Bad layers are left out as in :func:`read_signatures`.
    """
    return await _read_tag_layers(client, ref, attestation_tag(digest), DSSE_ENVELOPE, deadline, max_bytes)


async def _read_tag_layers(
    client: RegistryClient,
    ref: ImageReference,
    tag: str,
    media_type: str,
    deadline: Deadline,
    max_bytes: int | None,
) -> tuple[SignatureLayer, ...]:
    manifest = await client.get_manifest(ref, deadline, reference=tag, missing_ok=True)
    if manifest is None:
        return ()
    if manifest.is_index:
        raise EvidenceUnavailable(
            f"{ref.registry}/{ref.repository}:{tag} is an index, not a cosign signature manifest",
            transient=False,
            location=f"image {ref.registry}/{ref.repository}:{tag}",
            hint="something other than cosign wrote this tag; remove it and sign again",
        )
    # Layers of other media types (other attachments) are not signatures and are left out.
    wanted = [layer for layer in manifest.layers if layer.media_type == media_type]
    unique = {layer.digest: layer for layer in wanted}
    where = f"{ref.name}:{tag}"
    async with task_group() as group:
        fetches = {
            digest: group.create_task(
                _unless_definitive(
                    client.get_blob(ref, layer, deadline, max_bytes=max_bytes), f"layer {digest} of {where}"
                )
            )
            for digest, layer in unique.items()
        }
    found = []
    for layer in wanted:
        blob = fetches[layer.digest].result()
        if blob is not None:
            found.append(SignatureLayer(layer.media_type, blob, layer.digest, dict(layer.annotations)))
    return tuple(found)


async def _unless_definitive(fetch: Awaitable[T], what: str) -> T | None:
    """``await fetch``, or None (logged) when it failed for good: one bad attachment hides no other.

    Leaving evidence out can only lead to a violation, never to an allow; a transient failure still
    raises, since the attachment may well be good.
    """
    try:
        return await fetch
    except EvidenceUnavailable as error:
        if error.transient:
            raise
        _log.warning("skipping %s: %s", what, error.message)
        return None


async def list_referrers(
    client: RegistryClient,
    ref: ImageReference,
    digest: str,
    deadline: Deadline,
    *,
    artifact_types: Sequence[str] | None = None,
) -> tuple[Descriptor, ...]:
    """Referrers of ``digest``: from the referrers API, or the ``sha256-<hex>`` index where it is absent.

    ``artifact_types`` keeps only those types (the filter is applied here whatever the registry does).
    """
    found = await client.referrers(ref, digest, deadline)
    if found is None:
        index = await client.get_manifest(ref, deadline, reference=referrers_tag(digest), missing_ok=True)
        if index is None:
            return ()
        if not index.is_index:
            raise EvidenceUnavailable(
                f"the referrers tag {referrers_tag(digest)} of {ref.name} is not an index",
                transient=False,
                location=f"image {ref.name}",
                hint="something other than an OCI client wrote this tag; remove it and push referrers again",
            )
        found = index.manifests
    if artifact_types is None:
        return found
    return tuple(d for d in found if d.artifact_type in artifact_types)


async def read_referrer(
    client: RegistryClient,
    ref: ImageReference,
    descriptor: Descriptor,
    subject: str,
    deadline: Deadline,
    *,
    max_bytes: int | None = None,
) -> ReferrerArtifact | None:
    """Fetch a referrer manifest and its first layer's blob; None when it does not refer to ``subject``.

    A fallback index is a mutable tag anyone with push access can edit, so the manifest's own ``subject``
    is checked: an entry pointing at a manifest about another artifact is ignored. So is a referrer that
    cannot be had for good (manifest or blob missing or corrupt, blob above ``max_bytes``), logged: anyone
    who may push a referrer could otherwise hide every other one. A transient failure is raised.
    """
    what = f"referrer {ref.name}@{descriptor.digest}"
    manifest = await _unless_definitive(client.get_manifest(ref, deadline, reference=descriptor.digest), what)
    if manifest is None or manifest.is_index or not manifest.layers:
        return None
    subject_descriptor = manifest.subject
    if subject_descriptor is None or subject_descriptor.digest != subject:
        return None
    layer = manifest.layers[0]
    blob = await _unless_definitive(client.get_blob(ref, layer, deadline, max_bytes=max_bytes), what)
    return ReferrerArtifact(manifest, layer, blob) if blob is not None else None


def simple_signing_payload(
    reference: ImageReference, digest: str, annotations: Mapping[str, str] | None = None
) -> bytes:
    """The simple-signing payload cosign writes for ``digest`` of ``reference`` (repository, no tag).

    Key order and compact separators follow cosign's output (Go's ``encoding/json`` sorts map keys).
    """
    parse_sha256(digest, what="image digest")
    document = {
        "critical": {
            "identity": {"docker-reference": reference.name},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": dict(sorted(annotations.items())) if annotations else None,
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def cosign_config(layers: Sequence[Descriptor]) -> bytes:
    """The image config cosign writes for a ``.sig``/``.att`` manifest with ``layers``.

    Byte for byte what cosign (go-containerregistry) produces: the three public ``.sig`` manifests in the
    connaisseur fixtures name config digests that these bytes reproduce.
    """
    history = ",".join('{"created":"0001-01-01T00:00:00Z"}' for _ in layers)
    diff_ids = ",".join(json.dumps(layer.digest) for layer in layers)
    return (
        '{"architecture":"","created":"0001-01-01T00:00:00Z","history":['
        + history
        + '],"os":"","rootfs":{"type":"layers","diff_ids":['
        + diff_ids
        + ']},"config":{}}'
    ).encode()


async def append_layer(
    client: RegistryClient,
    ref: ImageReference,
    tag: str,
    blob: bytes,
    *,
    media_type: str,
    annotations: Mapping[str, str],
    deadline: Deadline,
) -> PushedManifest:
    """Add one signature or attestation layer to the manifest at ``tag``, keeping the layers already there.

    A layer identical to an existing one (media type, blob and annotations) is not added twice. Two
    writers racing on the same tag can lose one layer (the classic layout has no compare-and-swap); the
    referrers layout has no such race.
    """
    existing = await client.get_manifest(ref, deadline, reference=tag, missing_ok=True)
    new = Descriptor.for_bytes(media_type, blob, annotations=annotations)
    layers: list[Descriptor] = []
    if existing is not None:
        if existing.is_index:
            raise EvidenceUnavailable(
                f"{ref.registry}/{ref.repository}:{tag} is an index, not a cosign manifest",
                transient=False,
                location=f"image {ref.registry}/{ref.repository}:{tag}",
                hint="something other than cosign wrote this tag; remove it and sign again",
            )
        layers = list(existing.layers)
        if any(_same_layer(old, new) for old in layers):
            return PushedManifest(existing.digest, len(existing.data), subject_indexed=False)
    await client.push_blob(ref, blob, media_type, deadline)
    layers.append(new)
    config = await client.push_blob(ref, cosign_config(layers), OCI_CONFIG, deadline)
    manifest = image_manifest(config=config, layers=layers)
    return await client.push_manifest(ref, manifest, OCI_MANIFEST, deadline, tag=tag)


def _same_layer(old: Descriptor, new: Descriptor) -> bool:
    return (
        old.media_type == new.media_type
        and old.digest == new.digest
        and dict(old.annotations) == dict(new.annotations)
    )


async def push_referrer(
    client: RegistryClient,
    ref: ImageReference,
    subject: Descriptor,
    *,
    artifact_type: str,
    blob: bytes,
    blob_media_type: str,
    layer_annotations: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    deadline: Deadline,
) -> PushedManifest:
    """Push ``blob`` as an OCI 1.1 referrer of ``subject`` (by digest, no tag); returns the referrer.

    A referrer of the same artifact type holding the same blob is not pushed again. When the registry does
    not index the subject itself (no ``OCI-Subject`` header in its answer), the referrer is added to the
    ``sha256-<hex>`` fallback index too, as the distribution spec asks of clients.
    """
    layer = Descriptor.for_bytes(blob_media_type, blob, annotations=layer_annotations)
    for existing in await list_referrers(
        client, ref, subject.digest, deadline, artifact_types=[artifact_type]
    ):
        found = await read_referrer(client, ref, existing, subject.digest, deadline)
        if found is not None and found.layer.digest == layer.digest:
            return PushedManifest(found.manifest.digest, len(found.manifest.data), subject_indexed=False)
    await client.push_blob(ref, EMPTY_JSON, EMPTY_DESCRIPTOR.media_type, deadline)
    await client.push_blob(ref, blob, blob_media_type, deadline)
    manifest_annotations = {CREATED_ANNOTATION: _now()} | dict(annotations or {})
    data = image_manifest(
        config=EMPTY_DESCRIPTOR,
        layers=[layer],
        artifact_type=artifact_type,
        subject=subject,
        annotations=manifest_annotations,
    )
    pushed = await client.push_manifest(ref, data, OCI_MANIFEST, deadline)
    if not pushed.subject_indexed:
        entry = Descriptor(
            OCI_MANIFEST,
            pushed.digest,
            pushed.size,
            artifact_type=artifact_type,
            annotations=manifest_annotations,
        )
        await _add_to_fallback_index(client, ref, subject.digest, entry, deadline)
    return pushed


async def _add_to_fallback_index(
    client: RegistryClient, ref: ImageReference, subject: str, entry: Descriptor, deadline: Deadline
) -> None:
    tag = referrers_tag(subject)
    existing = await client.get_manifest(ref, deadline, reference=tag, missing_ok=True)
    entries: list[Descriptor] = []
    if existing is not None:
        if not existing.is_index:
            raise EvidenceUnavailable(
                f"the referrers tag {tag} of {ref.registry}/{ref.repository} is not an index",
                transient=False,
                location=f"image {ref.registry}/{ref.repository}",
                hint="remove the tag; it is rebuilt from the referrers pushed afterwards",
            )
        entries = list(existing.manifests)
    if any(old.digest == entry.digest for old in entries):
        return
    entries.append(entry)
    await client.push_manifest(ref, image_index(entries), OCI_INDEX, deadline, tag=tag)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
