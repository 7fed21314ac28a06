"""Writing cosign's signature and attestation layouts to a registry: what ``sign`` and ``attach`` push.

The layouts themselves (tags, annotations, the referrers fallback index) are described with the reading side,
:mod:`verifier.registry._cosign_layout`. Adding a signature or attestation to a ``.sig``/``.att`` tag is a
read-modify-write that keeps the existing layers; a referrer is pushed by digest, and added to the
``sha256-<hex>`` fallback index where the registry does not index its subject itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

from trtguard.release.publish import PushedManifest, RegistryWriter
from verifier.base import Deadline, ImageReference, parse_sha256
from verifier.registry import (
    EMPTY_DESCRIPTOR,
    EMPTY_JSON,
    OCI_CONFIG,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    fallback_referrers,
    image_index,
    image_manifest,
    list_referrers,
    read_referrer,
    read_tag_manifest,
    referrers_tag,
)

__all__ = ["CREATED_ANNOTATION", "append_layer", "cosign_config", "push_referrer", "simple_signing_payload"]

#: The creation time trtguard writes on referrer manifests (OCI image-spec annotation).
CREATED_ANNOTATION: Final = "org.opencontainers.image.created"


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
    writer: RegistryWriter,
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
    existing = await read_tag_manifest(writer.client, ref, tag, deadline)
    new = Descriptor.for_bytes(media_type, blob, annotations=annotations)
    layers: list[Descriptor] = []
    if existing is not None:
        layers = list(existing.layers)
        if any(_same_layer(old, new) for old in layers):
            return PushedManifest(existing.digest, len(existing.data), subject_indexed=False)
    await writer.push_blob(ref, blob, media_type, deadline)
    layers.append(new)
    config = await writer.push_blob(ref, cosign_config(layers), OCI_CONFIG, deadline)
    manifest = image_manifest(config=config, layers=layers)
    return await writer.push_manifest(ref, manifest, OCI_MANIFEST, deadline, tag=tag)


def _same_layer(old: Descriptor, new: Descriptor) -> bool:
    return (
        old.media_type == new.media_type
        and old.digest == new.digest
        and dict(old.annotations) == dict(new.annotations)
    )


async def push_referrer(
    writer: RegistryWriter,
    ref: ImageReference,
    subject: Descriptor,
    *,
    artifact_type: str,
    blob: bytes,
    blob_media_type: str,
    layer_annotations: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    extra_layers: Sequence[tuple[bytes, str]] = (),
    deadline: Deadline,
) -> PushedManifest:
    """Push ``blob`` as an OCI 1.1 referrer of ``subject`` (by digest, no tag); returns the referrer.

    ``extra_layers`` (blob, media type) follow the first layer (the OpenPGP statement layout: the detached
    signatures). A referrer of the same artifact type holding the same blobs is not pushed again. When the
    registry does not index the subject itself (no ``OCI-Subject`` header in its answer), the referrer is
    added to the ``sha256-<hex>`` fallback index too, as the distribution spec asks of clients.
    """
    layer = Descriptor.for_bytes(blob_media_type, blob, annotations=layer_annotations)
    extras = [Descriptor.for_bytes(media_type, data) for data, media_type in extra_layers]
    for existing in await list_referrers(
        writer.client, ref, subject.digest, deadline, artifact_types=[artifact_type]
    ):
        found = await read_referrer(
            writer.client, ref, existing, subject.digest, deadline, all_layers=bool(extras)
        )
        if (
            found is not None
            and found.layer.digest == layer.digest
            and found.rest == tuple(d for d, _ in extra_layers)
        ):
            return PushedManifest(found.manifest.digest, len(found.manifest.data), subject_indexed=False)
    await writer.push_blob(ref, EMPTY_JSON, EMPTY_DESCRIPTOR.media_type, deadline)
    await writer.push_blob(ref, blob, blob_media_type, deadline)
    for data, media_type in extra_layers:
        await writer.push_blob(ref, data, media_type, deadline)
    manifest_annotations = {CREATED_ANNOTATION: _now()} | dict(annotations or {})
    data = image_manifest(
        config=EMPTY_DESCRIPTOR,
        layers=[layer, *extras],
        artifact_type=artifact_type,
        subject=subject,
        annotations=manifest_annotations,
    )
    pushed = await writer.push_manifest(ref, data, OCI_MANIFEST, deadline)
    if not pushed.subject_indexed:
        entry = Descriptor(
            OCI_MANIFEST,
            pushed.digest,
            pushed.size,
            artifact_type=artifact_type,
            annotations=manifest_annotations,
        )
        await _add_to_fallback_index(writer, ref, subject.digest, entry, deadline)
    return pushed


async def _add_to_fallback_index(
    writer: RegistryWriter, ref: ImageReference, subject: str, entry: Descriptor, deadline: Deadline
) -> None:
    entries = await fallback_referrers(
        writer.client,
        ref,
        subject,
        deadline,
        hint="remove the tag; it is rebuilt from the referrers pushed afterwards",
    )
    if any(old.digest == entry.digest for old in entries):
        return
    await writer.push_manifest(
        ref, image_index([*entries, entry]), OCI_INDEX, deadline, tag=referrers_tag(subject)
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
