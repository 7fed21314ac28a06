"""Reading from OCI registries: tags resolved, manifests, blobs and referrers, every byte checked.

* Manifests are fetched by tag or digest and hashed while they stream in; a manifest asked for by digest
  must hash to that digest, and a ``Docker-Content-Digest`` header must agree with the bytes. Blobs must hash
  to their digest and have the size their descriptor declares. Size limits apply while the body arrives.
* Identical reads in flight at the same time are made once and shared; verified content is served from the
  transport's content-addressed store. Both are keyed by registry and repository besides the digest or tag.
* Every failure is an :class:`~verifier.base.EvidenceUnavailable` that names the registry and what went
  wrong, with ``transient`` true only for failures that may pass on retry (timeouts, resets, 429, 5xx).
  A registry that lies (wrong digest, wrong size) or a request it refuses is a definitive failure.

Timeouts, retries, authentication, redirects and limits are the transport's
(:mod:`verifier.registry._transport`); uploads are the release tooling's (``trtguard.release.publish``).
"""

from __future__ import annotations

import re
from typing import Literal, overload

from verifier.base import Deadline, EvidenceUnavailable, ImageReference, InputError, is_sha256_hex
from verifier.registry._oci import INDEXES, MANIFEST_TYPES, OCI_INDEX, Descriptor, InvalidDocument, Manifest
from verifier.registry._transport import (
    Expected,
    RegistryStats,
    RegistryTransport,
    repository_at,
    repository_scope,
)
from verifier.registry._wire import Call, ClosedOnExit
from verifier.registry.config import RegistryConfig, RegistrySettings, normalise_host

__all__ = ["RegistryClient"]

_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_ACCEPT_MANIFESTS = ", ".join(sorted(MANIFEST_TYPES))


class RegistryClient(ClosedOnExit):
    """OCI distribution API reads from the registries named in ``config`` (defaults for all others).

    Use it as an async context manager (or call :meth:`aclose`) so that connections are closed.
    """

    def __init__(self, config: RegistryConfig | None = None) -> None:
        self._transport = RegistryTransport(config)

    async def aclose(self) -> None:
        """Close every connection."""
        await self._transport.aclose()

    @property
    def transport(self) -> RegistryTransport:
        """The HTTP side: connections, tokens and the content store, shared with writers built on it."""
        return self._transport

    @property
    def stats(self) -> RegistryStats:
        """HTTP requests sent (by method), GETs shared with an identical one in flight, content-store hits."""
        return self._transport.stats

    def settings(self, registry: str) -> RegistrySettings:
        """The effective settings for ``registry``."""
        return self._transport.settings(registry)

    async def resolve(self, ref: ImageReference, deadline: Deadline) -> str:
        """The digest ``ref`` points at: its own digest when it has one, else the tag's current manifest's.

        The tag's manifest is fetched (not just HEAD-ed) so that the digest is computed from the bytes.
        """
        if ref.digest is not None:
            return ref.digest
        manifest = await self.get_manifest(ref, deadline)
        return manifest.digest

    @overload
    async def get_manifest(
        self,
        ref: ImageReference,
        deadline: Deadline,
        *,
        reference: str | None = None,
        missing_ok: Literal[False] = False,
    ) -> Manifest: ...

    @overload
    async def get_manifest(
        self,
        ref: ImageReference,
        deadline: Deadline,
        *,
        reference: str | None = None,
        missing_ok: Literal[True],
    ) -> Manifest | None: ...

    async def get_manifest(
        self,
        ref: ImageReference,
        deadline: Deadline,
        *,
        reference: str | None = None,
        missing_ok: bool = False,
    ) -> Manifest | None:
        """The manifest or index at ``reference`` (default: the digest of ``ref``, else its tag).

        Returns ``None`` for a manifest the registry does not have when ``missing_ok``; otherwise that is a
        definitive :class:`EvidenceUnavailable`.
        """
        target = reference or ref.digest or ref.tag or "latest"
        host, repository = normalise_host(ref.registry), ref.repository
        by_digest = target.startswith("sha256:")
        if by_digest:
            _require_sha256(target, f"manifest digest in {host}/{repository}")
        elif not _TAG.fullmatch(target):
            raise InputError(f"{target!r} is not a valid tag", location=f"image {host}/{repository}")
        if by_digest:
            stored = self._transport.content.get((host, repository, target))
            if isinstance(stored, Manifest):
                return stored
        manifest = await self._transport.flights.run(
            ("manifest", host, repository, target),
            deadline,
            f"manifest {repository}:{target}" if not by_digest else f"manifest {repository}@{target}",
            host,
            lambda shared: self._fetch_manifest(host, repository, target, shared),
        )
        if manifest is None and not missing_ok:
            raise EvidenceUnavailable(
                f"{host} has no manifest {repository_at(repository, target)}",
                transient=False,
                location=f"image {host}/{repository_at(repository, target)}",
                hint="check the image name, tag and digest, and that the image was pushed",
            )
        return manifest

    async def get_blob(
        self,
        ref: ImageReference,
        blob: Descriptor | str,
        deadline: Deadline,
        *,
        max_bytes: int | None = None,
    ) -> bytes:
        """The blob's bytes, checked against its digest (and its descriptor's size when one is given)."""
        host, repository = normalise_host(ref.registry), ref.repository
        digest = blob.digest if isinstance(blob, Descriptor) else blob
        size = blob.size if isinstance(blob, Descriptor) else None
        _require_sha256(digest, f"blob digest in {host}/{repository}")
        limit = min(max_bytes or self.settings(host).limits.blob_bytes, self.settings(host).limits.blob_bytes)
        if size is not None and size > limit:
            raise EvidenceUnavailable(
                f"blob {digest} of {host}/{repository} is {size} bytes, above the limit of {limit}",
                transient=False,
                location=f"image {host}/{repository}",
                hint="raise limits.blob_bytes in the registry configuration if this blob is expected",
            )
        stored = self._transport.content.get((host, repository, digest))
        if isinstance(stored, bytes) and (size is None or len(stored) == size):
            return stored
        data: bytes = await self._transport.flights.run(
            ("blob", host, repository, digest, str(size), str(limit)),
            deadline,
            f"blob {digest} of {repository}",
            host,
            lambda shared: self._fetch_blob(
                host, repository, digest, size=size, limit=limit, deadline=shared
            ),
        )
        return data

    async def referrers(
        self, ref: ImageReference, subject: str, deadline: Deadline, *, artifact_type: str | None = None
    ) -> tuple[Descriptor, ...] | None:
        """Manifests whose ``subject`` is ``subject``, from the OCI 1.1 referrers API.

        Returns ``None`` when the registry has no referrers API (it answers 404), so that the caller can
        read the ``sha256-<hex>`` fallback tag instead. The list is filtered by ``artifact_type`` here too,
        since a registry may ignore the filter.
        """
        host, repository = normalise_host(ref.registry), ref.repository
        _require_sha256(subject, f"subject digest in {host}/{repository}")
        found: tuple[Descriptor, ...] | None = await self._transport.flights.run(
            ("referrers", host, repository, subject, artifact_type or ""),
            deadline,
            f"referrers of {repository}@{subject}",
            host,
            lambda shared: self._fetch_referrers(host, repository, subject, artifact_type, shared),
        )
        if found is None or artifact_type is None:
            return found
        return tuple(d for d in found if d.artifact_type == artifact_type)

    # -- the requests ---------------------------------------------------------------------------------------

    async def _fetch_manifest(
        self, host: str, repository: str, target: str, deadline: Deadline
    ) -> Manifest | None:
        settings = self.settings(host)
        what = f"manifest {repository_at(repository, target)}"
        location = f"image {host}/{repository_at(repository, target)}"
        reply = await self._transport.fetch(
            Call(
                "GET",
                settings,
                f"{settings.base_url}/v2/{repository}/manifests/{target}",
                what,
                repository_scope(repository),
                headers={"Accept": _ACCEPT_MANIFESTS},
                limit=settings.limits.manifest_bytes,
            ),
            deadline,
            missing_ok=True,
            expected=Expected(target, "manifest", location) if target.startswith("sha256:") else None,
        )
        if reply is None:
            return None
        received = f"sha256:{reply.sha256}"
        claimed = reply.headers.get("docker-content-digest")
        if claimed and claimed.startswith("sha256:") and claimed != received:
            raise EvidenceUnavailable(
                f"{what} from {host}: the registry says {claimed} but the bytes hash to {received}",
                transient=False,
                location=location,
                hint="the registry (or something between it and trtguard) altered the manifest",
            )
        try:
            manifest = Manifest.parse(reply.body, content_type=reply.headers.get("content-type"), where=what)
        except InvalidDocument as error:
            raise EvidenceUnavailable(
                f"{what} from {host} is not a valid OCI manifest: {error}",
                transient=False,
                location=location,
                hint="trtguard reads OCI and Docker v2 manifests and indexes",
            ) from error
        self._transport.content.put((host, repository, manifest.digest), manifest)
        return manifest

    async def _fetch_blob(
        self, host: str, repository: str, digest: str, *, size: int | None, limit: int, deadline: Deadline
    ) -> bytes:
        settings = self.settings(host)
        what = f"blob {digest} of {repository}"
        location = f"image {host}/{repository}"
        reply = await self._transport.fetch(
            Call(
                "GET",
                settings,
                f"{settings.base_url}/v2/{repository}/blobs/{digest}",
                what,
                repository_scope(repository),
                limit=limit,
                expect_size=size,
                follow_redirects=True,
            ),
            deadline,
            missing_ok=True,
            expected=Expected(digest, "blob", location),
        )
        if reply is None:
            raise EvidenceUnavailable(
                f"{host} has no {what}",
                transient=False,
                location=location,
                hint="the manifest refers to a blob the registry does not hold; push it again",
            )
        self._transport.content.put((host, repository, digest), reply.body)
        return reply.body

    async def _fetch_referrers(
        self, host: str, repository: str, subject: str, artifact_type: str | None, deadline: Deadline
    ) -> tuple[Descriptor, ...] | None:
        settings = self.settings(host)
        what = f"referrers of {repository}@{subject}"
        reply = await self._transport.fetch(
            Call(
                "GET",
                settings,
                f"{settings.base_url}/v2/{repository}/referrers/{subject}",
                what,
                repository_scope(repository),
                headers={"Accept": OCI_INDEX},
                params={"artifactType": artifact_type} if artifact_type else None,
                limit=settings.limits.manifest_bytes,
            ),
            deadline,
            missing_ok=True,
        )
        if reply is None:
            return None
        try:
            index = Manifest.parse(reply.body, content_type=reply.headers.get("content-type"), where=what)
        except InvalidDocument as error:
            raise EvidenceUnavailable(
                f"{host} answered the referrers API with an invalid index: {error}",
                transient=False,
                location=f"image {host}/{repository}@{subject}",
                hint="the registry's referrers API is broken; report it to the registry operator",
            ) from error
        if index.media_type not in INDEXES:
            raise EvidenceUnavailable(
                f"{host} answered the referrers API with a {index.media_type}, not an index",
                transient=False,
                location=f"image {host}/{repository}@{subject}",
                hint="the registry's referrers API is broken; report it to the registry operator",
            )
        return index.manifests


def _require_sha256(digest: str, what: str) -> None:
    if not (digest.startswith("sha256:") and is_sha256_hex(digest[7:])):
        raise InputError(f"{what} {digest!r} is not a sha256 digest")
