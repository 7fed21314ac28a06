"""Tiny OCI images built in Python and pushed with the project's own registry writer."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import uuid
from dataclasses import dataclass

from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._references import ImageReference
from verifier.registry._oci import (
    OCI_CONFIG,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    image_index,
    image_manifest,
)
from verifier.registry.client import RegistryClient

LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass(frozen=True)
class Blob:
    media_type: str
    data: bytes

    @property
    def descriptor(self) -> Descriptor:
        return Descriptor.for_bytes(self.media_type, self.data)


@dataclass(frozen=True)
class TinyImage:
    """A one-layer image: its blobs and manifest bytes; ``digest`` is what cosign would sign."""

    blobs: tuple[Blob, ...]
    manifest: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.manifest).hexdigest()

    @property
    def descriptor(self) -> Descriptor:
        return Descriptor.for_bytes(OCI_MANIFEST, self.manifest)


def _layer(text: str) -> tuple[bytes, str]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        data = text.encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        info.mtime = 0
        archive.addfile(info, io.BytesIO(data))
    tar = raw.getvalue()
    return gzip.compress(tar, mtime=0), "sha256:" + hashlib.sha256(tar).hexdigest()


def tiny_image(text: str | None = None, *, architecture: str = "amd64") -> TinyImage:
    """A new image (unique content unless ``text`` is given)."""
    layer, diff_id = _layer(text if text is not None else f"hello {uuid.uuid4()}\n")
    config = json.dumps(
        {
            "architecture": architecture,
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        },
        separators=(",", ":"),
    ).encode()
    config_blob = Blob(OCI_CONFIG, config)
    layer_blob = Blob(LAYER_GZIP, layer)
    manifest = image_manifest(config=config_blob.descriptor, layers=[layer_blob.descriptor])
    return TinyImage((config_blob, layer_blob), manifest)


async def push_image(client: RegistryClient, ref: ImageReference, image: TinyImage) -> str:
    """Push the blobs and the manifest under ``ref``'s tag (or by digest); returns the manifest digest."""
    deadline, writer = Deadline.after(30), RegistryWriter(client)
    for blob in image.blobs:
        await writer.push_blob(ref, blob.data, blob.media_type, deadline)
    pushed = await writer.push_manifest(ref, image.manifest, OCI_MANIFEST, deadline, tag=ref.tag)
    return pushed.digest


async def push_index(client: RegistryClient, ref: ImageReference, images: list[TinyImage]) -> str:
    """Push the platform images by digest and an index over them under ``ref``'s tag; returns its digest."""
    deadline, writer = Deadline.after(30), RegistryWriter(client)
    entries = []
    for image, arch in zip(images, ("amd64", "arm64", "ppc64le"), strict=False):
        for blob in image.blobs:
            await writer.push_blob(ref, blob.data, blob.media_type, deadline)
        await writer.push_manifest(ref, image.manifest, OCI_MANIFEST, deadline)
        entries.append(
            Descriptor(
                OCI_MANIFEST,
                image.digest,
                len(image.manifest),
                platform={"architecture": arch, "os": "linux"},
            )
        )
    pushed = await writer.push_manifest(ref, image_index(entries), OCI_INDEX, deadline, tag=ref.tag)
    return pushed.digest
