"""Writing to OCI registries: blobs (from memory or streamed from a file) and manifests.

:class:`RegistryWriter` is built on a :class:`~verifier.registry.client.RegistryClient`: it sends through the
client's transport (the same connections, tokens, retries, deadlines and refusals) and reads through the
client, so that a read-modify-write (a signature tag, a fallback index) sees what it just wrote. A manifest
it pushes goes into the transport's content store, since its bytes are known.

The upload protocol is the distribution spec's monolithic one: ``HEAD`` the blob (skip it when the
repository has it), ``POST`` an upload session, ``PUT`` the bytes with the digest. An upload session cannot
be replayed after a failure, so its ``PUT`` is sent once; the whole push is what a caller retries.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from verifier.base import Deadline, EvidenceUnavailable, ImageReference, InputError, hash_file
from verifier.registry import Call, Descriptor, Manifest, refusal, repository_at, repository_scope
from verifier.registry.client import RegistryClient
from verifier.registry.config import normalise_host

__all__ = ["PushedManifest", "RegistryWriter"]

_UPLOAD_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PushedManifest:
    """The result of a manifest upload."""

    digest: str
    size: int
    #: The registry processed the manifest's ``subject`` (it answered with ``OCI-Subject``), so it indexes
    #: the referrer itself and the fallback tag index need not be written.
    subject_indexed: bool


class RegistryWriter:
    """Uploads to registries through ``client``'s transport; ``client`` reads back what is there."""

    def __init__(self, client: RegistryClient) -> None:
        #: The read side, for read-modify-write (signature tags, fallback indexes, existing referrers).
        self.client = client
        self._transport = client.transport

    async def blob_exists(self, ref: ImageReference, digest: str, deadline: Deadline) -> bool:
        """True when the repository already holds the blob (asked with push rights, as the upload will be)."""
        host, repository = normalise_host(ref.registry), ref.repository
        settings = self._transport.settings(host)
        reply = await self._transport.fetch(
            Call(
                "HEAD",
                settings,
                f"{settings.base_url}/v2/{repository}/blobs/{digest}",
                f"blob {digest} of {repository}",
                repository_scope(repository, push=True),
                follow_redirects=True,
            ),
            deadline,
            missing_ok=True,
        )
        return reply is not None

    async def push_blob(
        self, ref: ImageReference, data: bytes, media_type: str, deadline: Deadline
    ) -> Descriptor:
        """Upload ``data`` (unless the repository has it already); returns its descriptor."""
        descriptor = Descriptor.for_bytes(media_type, data)
        if not await self.blob_exists(ref, descriptor.digest, deadline):
            await self._upload(ref, descriptor, data, deadline)
        return descriptor

    async def push_blob_file(
        self,
        ref: ImageReference,
        path: Path,
        media_type: str,
        deadline: Deadline,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> Descriptor:
        """Upload a file as a blob, streamed from disk (hashed first, in a thread); returns its descriptor."""
        digest = await asyncio.to_thread(hash_file, path)
        descriptor = Descriptor(media_type, digest.digest, digest.size, annotations=dict(annotations or {}))
        if not await self.blob_exists(ref, descriptor.digest, deadline):

            async def chunks() -> AsyncIterator[bytes]:
                with path.open("rb") as stream:
                    while chunk := await asyncio.to_thread(stream.read, _UPLOAD_CHUNK):
                        yield chunk

            await self._upload(ref, descriptor, chunks, deadline)
        return descriptor

    async def push_manifest(
        self,
        ref: ImageReference,
        data: bytes,
        media_type: str,
        deadline: Deadline,
        *,
        tag: str | None = None,
    ) -> PushedManifest:
        """Upload a manifest under ``tag``, or by its digest when no tag is given."""
        host, repository = normalise_host(ref.registry), ref.repository
        settings = self._transport.settings(host)
        digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
        target = tag or digest
        what = f"manifest {repository_at(repository, target)}"
        if len(data) > settings.limits.manifest_bytes:
            raise InputError(
                f"{what} is {len(data)} bytes, above the manifest limit of {settings.limits.manifest_bytes}",
                hint="registries commonly refuse manifests above 4 MiB",
            )
        reply = await self._transport.fetch(
            Call(
                "PUT",
                settings,
                f"{settings.base_url}/v2/{repository}/manifests/{target}",
                what,
                repository_scope(repository, push=True),
                headers={"Content-Type": media_type},
                content=data,
            ),
            deadline,
            ok=(200, 201),
        )
        stored = reply.headers.get("docker-content-digest")
        if stored and stored != digest:
            raise EvidenceUnavailable(
                f"{host} stored {what} as {stored}, but its bytes hash to {digest}",
                transient=False,
                location=f"image {host}/{repository}",
                hint="the registry altered the manifest; do not use it for signed artifacts",
            )
        self._transport.content.put(
            (host, repository, digest), Manifest.parse(data, content_type=media_type, where=what)
        )
        return PushedManifest(digest, len(data), subject_indexed=bool(reply.headers.get("oci-subject")))

    async def _upload(
        self,
        ref: ImageReference,
        descriptor: Descriptor,
        content: bytes | Callable[[], AsyncIterator[bytes]],
        deadline: Deadline,
    ) -> None:
        host, repository = normalise_host(ref.registry), ref.repository
        settings = self._transport.settings(host)
        what = f"upload of blob {descriptor.digest} to {repository}"
        started = await self._transport.fetch(
            Call(
                "POST",
                settings,
                f"{settings.base_url}/v2/{repository}/blobs/uploads/",
                what,
                repository_scope(repository, push=True),
                content=b"",
            ),
            deadline,
            ok=(202,),
        )
        location = started.headers.get("location")
        if not location:
            raise refusal(started.status, started.body, settings.host, what)
        url = httpx.URL(started.url).join(location)
        if url.host != httpx.URL(settings.base_url).host:
            raise EvidenceUnavailable(
                f"{host} sent the upload to another host ({url.host})",
                transient=False,
                location=f"image {host}/{repository}",
                hint="trtguard uploads only to the registry itself",
            )
        await self._transport.fetch(
            Call(
                "PUT",
                settings,
                str(url.copy_merge_params({"digest": descriptor.digest})),
                what,
                repository_scope(repository, push=True),
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(descriptor.size)},
                content=content,
                # An upload session cannot be replayed after a failure; the whole push is retried instead.
                retry=False,
                capped=False,
            ),
            deadline,
            ok=(201,),
        )
