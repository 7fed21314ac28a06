"""An async OCI distribution client that checks every byte it receives.

* Manifests are fetched by tag or digest and hashed while they stream in; a manifest asked for by digest
  must hash to that digest, and a ``Docker-Content-Digest`` header must agree with the bytes. Blobs must hash
  to their digest and have the size their descriptor declares. Size limits apply while the body arrives.
* Every call has a timeout derived from the caller's :class:`~verifier.deadline.Deadline` and the registry's
  settings; 429 (honouring ``Retry-After`` up to the longest back-off, else giving up), 5xx and connection
  failures are retried with back-off only while the deadline leaves time for it.
* Identical GETs in flight at the same time are made once and shared; verified content is kept in a
  small content-addressed store, which can never go stale.
* Every failure is an :class:`~verifier.errors.EvidenceUnavailable` that names the registry and what went
  wrong, with ``transient`` true only for failures that may pass on retry (timeouts, resets, 429, 5xx).
  A registry that lies (wrong digest, wrong size) or a request it refuses is a definitive failure.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import math
import os
import random
import re
import ssl
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, overload

import httpx

from verifier.cache import SingleFlight
from verifier.deadline import Deadline
from verifier.digests import hash_file, is_sha256_hex
from verifier.errors import EvidenceUnavailable, InputError
from verifier.references import ImageReference
from verifier.registry.auth import Authenticator, CredentialStore, TokenRequest, parse_challenges
from verifier.registry.config import RegistryConfig, RegistrySettings, is_loopback, normalise_host
from verifier.registry.oci import INDEXES, MANIFEST_TYPES, OCI_INDEX, Descriptor, InvalidDocument, Manifest

__all__ = ["PushedManifest", "RegistryClient", "RegistryStats"]

T = TypeVar("T")

_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 5
_ACCEPT_MANIFESTS = ", ".join(sorted(MANIFEST_TYPES))
#: Bytes of an error answer read for the message; the rest is dropped.
_ERROR_BODY_LIMIT = 16 * 1024
_TOKEN_BODY_LIMIT = 1024 * 1024
_UPLOAD_CHUNK = 1024 * 1024
_USER_AGENT = "trtguard"


@dataclass(frozen=True, slots=True)
class PushedManifest:
    """The result of a manifest upload."""

    digest: str
    size: int
    #: The registry processed the manifest's ``subject`` (it answered with ``OCI-Subject``), so it indexes
    #: the referrer itself and the fallback tag index need not be written.
    subject_indexed: bool


@dataclass(frozen=True, slots=True)
class RegistryStats:
    """Counters since the client was made."""

    requests: Mapping[str, int]
    coalesced: int
    content_hits: int

    @property
    def total_requests(self) -> int:
        """All HTTP requests sent, token requests included."""
        return sum(self.requests.values())


@dataclass(slots=True)
class _Call:
    """One logical registry request, retried and authenticated as one."""

    method: str
    settings: RegistrySettings
    url: str
    #: What was asked for, for messages: "manifest team/app:1.0", "blob sha256:… of team/app".
    what: str
    #: Token scope ("repository:team/app:pull"); None for calls that carry no registry auth (token realms).
    scope: str | None
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] | None = None
    content: bytes | Callable[[], AsyncIterator[bytes]] | None = None
    #: Largest body read into memory.
    limit: int = _ERROR_BODY_LIMIT
    #: Exact body size expected (a descriptor's size).
    expect_size: int | None = None
    follow_redirects: bool = False
    retry: bool = True
    #: Whether the settings' per-attempt ``request`` cap applies (not for large uploads).
    capped: bool = True
    extra_auth: str | None = None


@dataclass(slots=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes
    sha256: str
    url: str


class _SharedDeadline(Deadline):
    """The deadline of a request several callers wait for: the latest of theirs, moved on as callers join.

    Every other :class:`Deadline` is fixed; only the client's single-flight moves this one.
    """

    __slots__ = ()

    def extend_to(self, other: Deadline) -> None:
        """Move the deadline to ``other``'s when that is later."""
        if other.expires_at > self.expires_at:
            object.__setattr__(self, "expires_at", other.expires_at)  # frozen for everyone else


class _Retryable(Exception):
    """An attempt failed in a way another attempt may not (reset, timeout, truncated body)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _ContentStore:
    """Verified manifests and blobs by (registry, repository, digest), least recently used out first."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._used = 0
        self._items: OrderedDict[tuple[str, str, str], bytes | Manifest] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple[str, str, str]) -> bytes | Manifest | None:
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
            self.hits += 1
        return item

    def put(self, key: tuple[str, str, str], item: bytes | Manifest) -> None:
        size = len(item.data) if isinstance(item, Manifest) else len(item)
        if size > self._budget // 8 or key in self._items:
            return
        self._items[key] = item
        self._used += size
        while self._used > self._budget:
            _, old = self._items.popitem(last=False)
            self._used -= len(old.data) if isinstance(old, Manifest) else len(old)


class RegistryClient:
    """OCI distribution API client for the registries named in ``config`` (defaults for all others).

    Use it as an async context manager (or call :meth:`aclose`) so that connections are closed.
    """

    def __init__(self, config: RegistryConfig | None = None) -> None:
        self._config = config or RegistryConfig()
        self._auth = Authenticator(CredentialStore(self._config.credentials_file))
        self._http: dict[Path | None, httpx.AsyncClient] = {}
        self._flights: SingleFlight[tuple[str, ...], Any] = SingleFlight()
        self._flight_deadlines: dict[tuple[str, ...], _SharedDeadline] = {}
        self._content = _ContentStore(self._config.content_cache_bytes)
        self._requests: Counter[str] = Counter()
        self._limits = httpx.Limits(
            max_connections=self._config.max_connections,
            max_keepalive_connections=self._config.max_connections,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection."""
        clients, self._http = list(self._http.values()), {}
        for client in clients:
            await client.aclose()

    @property
    def stats(self) -> RegistryStats:
        """HTTP requests sent (by method), GETs shared with an identical one in flight, content-store hits."""
        return RegistryStats(dict(self._requests), self._flights.coalesced, self._content.hits)

    def settings(self, registry: str) -> RegistrySettings:
        """The effective settings for ``registry``."""
        return self._config.settings_for(registry)

    # -- reading ------------------------------------------------------------------------------------------

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
            stored = self._content.get((host, repository, target))
            if isinstance(stored, Manifest):
                return stored
        manifest = await self._shared(
            ("manifest", host, repository, target),
            deadline,
            f"manifest {repository}:{target}" if not by_digest else f"manifest {repository}@{target}",
            host,
            lambda shared: self._fetch_manifest(host, repository, target, shared),
        )
        if manifest is None and not missing_ok:
            raise EvidenceUnavailable(
                f"{host} has no manifest {_at(repository, target)}",
                transient=False,
                location=f"image {host}/{_at(repository, target)}",
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
        stored = self._content.get((host, repository, digest))
        if isinstance(stored, bytes) and (size is None or len(stored) == size):
            return stored
        data: bytes = await self._shared(
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
        found: tuple[Descriptor, ...] | None = await self._shared(
            ("referrers", host, repository, subject, artifact_type or ""),
            deadline,
            f"referrers of {repository}@{subject}",
            host,
            lambda shared: self._fetch_referrers(host, repository, subject, artifact_type, shared),
        )
        if found is None or artifact_type is None:
            return found
        return tuple(d for d in found if d.artifact_type == artifact_type)

    # -- writing ------------------------------------------------------------------------------------------

    async def blob_exists(self, ref: ImageReference, digest: str, deadline: Deadline) -> bool:
        """True when the repository already holds the blob."""
        host, repository = normalise_host(ref.registry), ref.repository
        settings = self.settings(host)
        reply = await self._exchange(
            _Call(
                "HEAD",
                settings,
                f"{settings.base_url}/v2/{repository}/blobs/{digest}",
                f"blob {digest} of {repository}",
                _scope(repository, push=True),
                follow_redirects=True,
            ),
            deadline,
        )
        if reply.status == 200:
            return True
        if reply.status == 404:
            return False
        raise self._refusal(reply, settings, f"blob {digest} of {repository}")

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
        settings = self.settings(host)
        digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
        target = tag or digest
        what = f"manifest {_at(repository, target)}"
        if len(data) > settings.limits.manifest_bytes:
            raise InputError(
                f"{what} is {len(data)} bytes, above the manifest limit of {settings.limits.manifest_bytes}",
                hint="registries commonly refuse manifests above 4 MiB",
            )
        reply = await self._exchange(
            _Call(
                "PUT",
                settings,
                f"{settings.base_url}/v2/{repository}/manifests/{target}",
                what,
                _scope(repository, push=True),
                headers={"Content-Type": media_type},
                content=data,
            ),
            deadline,
        )
        if reply.status not in (200, 201):
            raise self._refusal(reply, settings, what)
        stored = reply.headers.get("docker-content-digest")
        if stored and stored != digest:
            raise EvidenceUnavailable(
                f"{host} stored {what} as {stored}, but its bytes hash to {digest}",
                transient=False,
                location=f"image {host}/{repository}",
                hint="the registry altered the manifest; do not use it for signed artifacts",
            )
        self._content.put(
            (host, repository, digest), Manifest.parse(data, content_type=media_type, where=what)
        )
        return PushedManifest(digest, len(data), subject_indexed=bool(reply.headers.get("oci-subject")))

    # -- fetch implementations -----------------------------------------------------------------------------

    async def _fetch_manifest(
        self, host: str, repository: str, target: str, deadline: Deadline
    ) -> Manifest | None:
        settings = self.settings(host)
        what = f"manifest {_at(repository, target)}"
        reply = await self._exchange(
            _Call(
                "GET",
                settings,
                f"{settings.base_url}/v2/{repository}/manifests/{target}",
                what,
                _scope(repository),
                headers={"Accept": _ACCEPT_MANIFESTS},
                limit=settings.limits.manifest_bytes,
            ),
            deadline,
        )
        if reply.status == 404:
            return None
        if reply.status != 200:
            raise self._refusal(reply, settings, what)
        received = f"sha256:{reply.sha256}"
        location = f"image {host}/{_at(repository, target)}"
        if target.startswith("sha256:") and received != target:
            raise EvidenceUnavailable(
                f"{what} from {host}: received bytes hash to {received}",
                transient=False,
                location=location,
                hint="the registry (or something between it and trtguard) altered the manifest",
            )
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
        self._content.put((host, repository, manifest.digest), manifest)
        return manifest

    async def _fetch_blob(
        self, host: str, repository: str, digest: str, *, size: int | None, limit: int, deadline: Deadline
    ) -> bytes:
        settings = self.settings(host)
        what = f"blob {digest} of {repository}"
        reply = await self._exchange(
            _Call(
                "GET",
                settings,
                f"{settings.base_url}/v2/{repository}/blobs/{digest}",
                what,
                _scope(repository),
                limit=limit,
                expect_size=size,
                follow_redirects=True,
            ),
            deadline,
        )
        location = f"image {host}/{repository}"
        if reply.status == 404:
            raise EvidenceUnavailable(
                f"{host} has no {what}",
                transient=False,
                location=location,
                hint="the manifest refers to a blob the registry does not hold; push it again",
            )
        if reply.status != 200:
            raise self._refusal(reply, settings, what)
        received = f"sha256:{reply.sha256}"
        if received != digest:
            raise EvidenceUnavailable(
                f"{what} from {host}: received bytes hash to {received}",
                transient=False,
                location=location,
                hint="the registry (or something between it and trtguard) altered the blob",
            )
        if size is not None and len(reply.body) != size:
            raise EvidenceUnavailable(
                f"{what} from {host}: received {len(reply.body)} bytes, the descriptor says {size}",
                transient=False,
                location=location,
                hint="the manifest's descriptor does not match the blob",
            )
        self._content.put((host, repository, digest), reply.body)
        return reply.body

    async def _fetch_referrers(
        self, host: str, repository: str, subject: str, artifact_type: str | None, deadline: Deadline
    ) -> tuple[Descriptor, ...] | None:
        settings = self.settings(host)
        what = f"referrers of {repository}@{subject}"
        reply = await self._exchange(
            _Call(
                "GET",
                settings,
                f"{settings.base_url}/v2/{repository}/referrers/{subject}",
                what,
                _scope(repository),
                headers={"Accept": OCI_INDEX},
                params={"artifactType": artifact_type} if artifact_type else None,
                limit=settings.limits.manifest_bytes,
            ),
            deadline,
        )
        if reply.status == 404:
            return None
        if reply.status != 200:
            raise self._refusal(reply, settings, what)
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

    async def _upload(
        self,
        ref: ImageReference,
        descriptor: Descriptor,
        content: bytes | Callable[[], AsyncIterator[bytes]],
        deadline: Deadline,
    ) -> None:
        host, repository = normalise_host(ref.registry), ref.repository
        settings = self.settings(host)
        what = f"upload of blob {descriptor.digest} to {repository}"
        started = await self._exchange(
            _Call(
                "POST",
                settings,
                f"{settings.base_url}/v2/{repository}/blobs/uploads/",
                what,
                _scope(repository, push=True),
                content=b"",
            ),
            deadline,
        )
        location = started.headers.get("location")
        if started.status != 202 or not location:
            raise self._refusal(started, settings, what)
        url = httpx.URL(started.url).join(location)
        if url.host != httpx.URL(settings.base_url).host:
            raise EvidenceUnavailable(
                f"{host} sent the upload to another host ({url.host})",
                transient=False,
                location=f"image {host}/{repository}",
                hint="trtguard uploads only to the registry itself",
            )
        finished = await self._exchange(
            _Call(
                "PUT",
                settings,
                str(url.copy_merge_params({"digest": descriptor.digest})),
                what,
                _scope(repository, push=True),
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(descriptor.size)},
                content=content,
                # An upload session cannot be replayed after a failure; the whole push is retried instead.
                retry=False,
                capped=False,
            ),
            deadline,
        )
        if finished.status != 201:
            raise self._refusal(finished, settings, what)

    # -- the HTTP core ---------------------------------------------------------------------------------------

    async def _shared(
        self,
        key: tuple[str, ...],
        deadline: Deadline,
        what: str,
        host: str,
        compute: Callable[[Deadline], Awaitable[T]],
    ) -> T:
        """Run ``compute`` once for identical concurrent callers; each waits no longer than its deadline.

        The shared computation runs under the latest deadline of the callers that joined it (moved on as
        they join), not the first caller's: a caller with little time left must not cut short the answer
        that callers with more time are waiting for.
        """
        shared = self._flight_deadlines.get(key)
        if shared is None:
            shared = _SharedDeadline(deadline.expires_at)
            # Kept exactly as long as the flight runs: no await between here and the flight's start, and the
            # entry goes in the flight's own last step.
            self._flight_deadlines[key] = shared
        else:
            shared.extend_to(deadline)

        async def run_shared() -> T:
            try:
                return await compute(shared)
            finally:
                self._flight_deadlines.pop(key, None)

        started = time.monotonic()
        try:
            async with asyncio.timeout(_seconds(deadline.remaining())):
                result: T = await self._flights.run(key, run_shared)
                return result
        except TimeoutError:
            raise EvidenceUnavailable(
                f"{what}: {host} gave no complete answer within the "
                f"{time.monotonic() - started:.1f} s left of the deadline",
                transient=True,
                location=f"registry {host}",
                hint="the registry is slow or unreachable; the policy's onError decides what happens",
            ) from None

    def _client(self, settings: RegistrySettings) -> httpx.AsyncClient:
        key = settings.ca_bundle
        client = self._http.get(key)
        if client is None:
            client = httpx.AsyncClient(
                verify=_ssl_context(settings.ca_bundle),
                limits=self._limits,
                headers={"User-Agent": _USER_AGENT},
                follow_redirects=False,
            )
            self._http[key] = client
        return client

    async def _exchange(self, call: _Call, deadline: Deadline) -> _Reply:
        """Send ``call`` with auth, retrying 429/5xx/connection failures while ``deadline`` allows."""
        policy = call.settings.retry
        attempts = policy.attempts if call.retry else 1
        started = time.monotonic()
        failures: list[str] = []
        for attempt in range(1, attempts + 1):
            if deadline.remaining() <= 0:
                raise self._gave_up(call, failures, started, "no time was left for another attempt")
            retry_after: float | None = None
            try:
                reply = await self._attempt(call, deadline)
            except _Retryable as failure:
                failures.append(failure.reason)
            else:
                if reply.status not in _RETRY_STATUSES:
                    return reply
                failures.append(f"answered {reply.status}")
                retry_after = _retry_after(reply.headers.get("retry-after"))
            if attempt == attempts:
                break
            if retry_after is not None and retry_after > policy.max_backoff:
                # A registry asking for a long wait (429 with "Retry-After: 86400") is not waited for:
                # that would hang a caller without a deadline for as long as the registry likes.
                raise self._gave_up(
                    call,
                    failures,
                    started,
                    f"asked to retry after {retry_after:.1f} s, longer than the longest back-off"
                    f" ({policy.max_backoff:g} s, retry.max_backoff)",
                )
            delay = (
                retry_after
                if retry_after is not None
                else _backoff(policy.backoff, policy.max_backoff, attempt)
            )
            left = deadline.remaining()
            if delay >= left:
                reason = (
                    f"asked to retry after {delay:.1f} s with only {left:.1f} s left"
                    if retry_after is not None
                    else f"only {left:.1f} s left, too little for another attempt"
                )
                raise self._gave_up(call, failures, started, reason)
            await asyncio.sleep(delay)
        raise self._gave_up(call, failures, started, None)

    async def _attempt(self, call: _Call, deadline: Deadline) -> _Reply:
        """One attempt: the request, the 401 challenge if any, redirects, and the body (bounded)."""
        timeouts = call.settings.timeouts
        left = deadline.remaining()
        cap = min(timeouts.request, left) if call.capped else left
        try:
            async with asyncio.timeout(_seconds(cap)):
                return await self._authorised(call, deadline)
        except TimeoutError:
            limit = "the deadline" if cap >= left else f"the {timeouts.request:g} s per-request limit"
            raise _Retryable(f"gave no complete answer within {cap:.1f} s ({limit})") from None
        except httpx.TimeoutException as error:
            raise _Retryable(f"timed out ({_timeout_kind(error)})") from None
        except httpx.RemoteProtocolError as error:
            raise _Retryable(f"broke off the answer ({_short(error)})") from None
        except (httpx.ReadError, httpx.WriteError) as error:
            raise _Retryable(f"dropped the connection ({_os_reason(error)})") from None
        except httpx.ConnectError as error:
            if _tls_failure(error):
                raise EvidenceUnavailable(
                    f"{call.settings.host}: TLS certificate not trusted ({_short(error)})",
                    transient=False,
                    location=f"registry {call.settings.host}",
                    hint="set ca_bundle for this registry in the registry configuration",
                ) from None
            raise _Retryable(f"could not be connected to ({_os_reason(error)})") from None
        except httpx.TransportError as error:
            raise _Retryable(f"failed ({type(error).__name__}: {_short(error)})") from None

    async def _authorised(self, call: _Call, deadline: Deadline) -> _Reply:
        host = call.settings.host
        header = call.extra_auth or (self._auth.header(host, call.scope) if call.scope else None)
        reply = await self._send(call, header, deadline)
        if reply.status != 401 or call.scope is None:
            return reply
        challenges = parse_challenges(reply.headers.get_list("www-authenticate"))
        if header is not None:
            self._auth.forget(host, call.scope)
        header = await self._auth.answer(
            host,
            call.scope,
            challenges,
            lambda request: self._fetch_token(request, call.settings, deadline),
            allow_plain_http_realm=call.settings.plain_http,
        )
        reply = await self._send(call, header, deadline)
        if reply.status == 401:
            if self._auth.has_credentials(host):
                message = f"{host} refused the credentials for {call.what}"
                hint = "check the registry's entry in the credentials file (dockerconfigjson)"
            else:
                message = f"{host} requires credentials for {call.what}, and none are configured for it"
                hint = "add the registry to the credentials_file of the registry configuration"
            raise EvidenceUnavailable(message, transient=False, location=f"registry {host}", hint=hint)
        return reply

    async def _send(self, call: _Call, authorization: str | None, deadline: Deadline) -> _Reply:
        url = httpx.URL(call.url, params=call.params) if call.params else httpx.URL(call.url)
        settings = call.settings
        for _ in range(_MAX_REDIRECTS + 1):
            headers = dict(call.headers)
            # Credentials go only to the origin asked, never to another one a registry redirects to.
            if authorization and _origin(url) == _origin(httpx.URL(call.url)):
                headers["Authorization"] = authorization
            left = deadline.remaining()
            t = settings.timeouts
            timeout = httpx.Timeout(
                connect=_seconds_or_none(min(t.connect, left)),
                read=_seconds_or_none(min(t.read, left)),
                write=_seconds_or_none(min(t.read, left)),
                pool=_seconds_or_none(min(t.connect, left)),
            )
            content = call.content() if callable(call.content) else call.content
            request = self._client(settings).build_request(
                call.method, url, headers=headers, content=content, timeout=timeout
            )
            self._requests[call.method] += 1
            response = await self._client(settings).send(request, stream=True)
            try:
                if call.follow_redirects and response.status_code in _REDIRECTS:
                    target = response.headers.get("location")
                    if not target:
                        return await self._read(response, call, _ERROR_BODY_LIMIT)
                    url = url.join(target)
                    settings = self._redirect_settings(call, url)
                    continue
                ok = 200 <= response.status_code < 300
                return await self._read(response, call, call.limit if ok else _ERROR_BODY_LIMIT)
            finally:
                await response.aclose()
        raise EvidenceUnavailable(
            f"{call.settings.host} redirected {call.what} more than {_MAX_REDIRECTS} times",
            transient=False,
            location=f"registry {call.settings.host}",
        )

    def _redirect_settings(self, call: _Call, url: httpx.URL) -> RegistrySettings:
        """Settings for a redirect target (blob storage): its own TLS entry; plain HTTP only where allowed."""
        port = f":{url.port}" if url.port else ""
        settings = self.settings(f"{url.host}{port}")
        if url.scheme == "http" and not (settings.plain_http and is_loopback(settings.host)):
            raise EvidenceUnavailable(
                f"{call.settings.host} redirected {call.what} to plain HTTP ({url.host})",
                transient=False,
                location=f"registry {call.settings.host}",
                hint="trtguard follows redirects only to TLS endpoints",
            )
        return settings

    async def _read(self, response: httpx.Response, call: _Call, limit: int) -> _Reply:
        """Read the body into memory, hashing as it arrives and stopping as soon as it exceeds ``limit``.

        Of an error answer only the first ``limit`` bytes are kept (for the message); a successful answer
        above the limit, or of another size than its descriptor says, is refused.
        """
        host = call.settings.host
        success = 200 <= response.status_code < 300
        declared = response.headers.get("content-length")
        announced = int(declared) if declared is not None and declared.isdigit() else None
        if success and call.method != "HEAD":
            if call.expect_size is not None:
                if announced is not None and announced != call.expect_size:
                    raise EvidenceUnavailable(
                        f"{call.what} from {host}: the registry announces {announced} bytes, "
                        f"the descriptor says {call.expect_size}",
                        transient=False,
                        location=f"registry {host}",
                        hint="the registry (or something between it and trtguard) altered the content",
                    )
                limit = min(limit, call.expect_size)
            if announced is not None and announced > limit:
                raise _too_large(call, host, limit)
        hasher = hashlib.sha256()
        parts: list[bytes] = []
        received = 0
        if call.method != "HEAD":
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received > limit:
                    if success:
                        raise _too_large(call, host, limit)
                    break
                hasher.update(chunk)
                parts.append(chunk)
        return _Reply(
            response.status_code, response.headers, b"".join(parts), hasher.hexdigest(), str(response.url)
        )

    async def _fetch_token(
        self, request: TokenRequest, registry: RegistrySettings, deadline: Deadline
    ) -> Mapping[str, Any]:
        realm = httpx.URL(request.url)
        port = f":{realm.port}" if realm.port else ""
        realm_host = f"{realm.host}{port}"
        settings = registry if normalise_host(realm_host) == registry.host else self.settings(realm_host)
        reply = await self._exchange(
            _Call(
                "GET",
                settings,
                request.url,
                f"token for {request.params.get('scope', 'the registry')}",
                None,
                params=dict(request.params),
                limit=_TOKEN_BODY_LIMIT,
                extra_auth=request.credentials.basic() if request.credentials else None,
            ),
            deadline,
        )
        if reply.status in (401, 403):
            raise EvidenceUnavailable(
                f"the token service of {registry.host} ({realm.host}) refused "
                f"{'the credentials' if request.credentials else 'anonymous access'} "
                f"({reply.status}{_error_detail(reply.body)})",
                transient=False,
                location=f"registry {registry.host}",
                hint="check the registry's entry in the credentials file (dockerconfigjson)",
            )
        if reply.status != 200:
            raise self._refusal(reply, settings, f"token request to {realm.host}")
        try:
            body = json.loads(reply.body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        if not isinstance(body, dict):
            raise EvidenceUnavailable(
                f"the token service of {registry.host} ({realm.host}) did not answer with JSON",
                transient=False,
                location=f"registry {registry.host}",
            )
        return body

    # -- messages ---------------------------------------------------------------------------------------

    def _refusal(self, reply: _Reply, settings: RegistrySettings, what: str) -> EvidenceUnavailable:
        """A definitive error for an unexpected status (403, 400, 405, …)."""
        host = settings.host
        detail = _error_detail(reply.body)
        if reply.status == 403:
            message = f"{host} denied access to {what}{detail}"
            hint = "the credentials in use lack permission for this repository"
        elif reply.status == 401:
            message = f"{host} requires authentication for {what}{detail}"
            hint = "add the registry to the credentials file (dockerconfigjson)"
        else:
            message = f"{host} answered {reply.status} to {what}{detail}"
            hint = "the registry refused the request; check that it supports the OCI distribution API"
        return EvidenceUnavailable(message, transient=False, location=f"registry {host}", hint=hint)

    def _gave_up(
        self, call: _Call, failures: list[str], started: float, reason: str | None
    ) -> EvidenceUnavailable:
        host = call.settings.host
        elapsed = time.monotonic() - started
        if not failures:
            message = f"{host} could not be asked for {call.what}"
        elif len(failures) == 1:
            message = f"{host} {failures[0]} for {call.what} ({elapsed:.1f} s)"
        elif len(set(failures)) == 1:
            message = f"{host} {failures[0]} {_times(len(failures))} in {elapsed:.1f} s for {call.what}"
        else:
            message = (
                f"{host} failed {_times(len(failures))} in {elapsed:.1f} s for {call.what} "
                f"({'; '.join(failures)})"
            )
        if reason:
            message += f"; {reason}"
        return EvidenceUnavailable(
            message,
            transient=True,
            location=f"registry {host}",
            hint="the registry is down, slow or rate-limiting; the policy's onError decides what happens",
        )


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)


def _scope(repository: str, *, push: bool = False) -> str:
    return f"repository:{repository}:{'pull,push' if push else 'pull'}"


def _at(repository: str, target: str) -> str:
    return f"{repository}@{target}" if target.startswith("sha256:") else f"{repository}:{target}"


def _require_sha256(digest: str, what: str) -> None:
    if not (digest.startswith("sha256:") and is_sha256_hex(digest[7:])):
        raise InputError(f"{what} {digest!r} is not a sha256 digest")


def _seconds(value: float) -> float | None:
    """``asyncio.timeout`` takes None for "no limit" (a deadline of ``Deadline.never()``)."""
    return None if math.isinf(value) else value


def _seconds_or_none(value: float) -> float | None:
    return None if math.isinf(value) else max(value, 0.001)


def _backoff(base: float, ceiling: float, attempt: int) -> float:
    # Equal jitter: at least half of the exponential delay, so that retries of a burst spread out.
    delay: float = min(ceiling, base * 2 ** (attempt - 1))
    return delay / 2 + random.uniform(0, delay / 2)  # noqa: S311 - jitter, not a secret


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        # RFC 9110 dates are in GMT; "-0000" parses naive, which .timestamp() would take as local time.
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - time.time())


def _times(count: int) -> str:
    words = {1: "once", 2: "twice", 3: "three times", 4: "four times", 5: "five times"}
    return words.get(count, f"{count} times")


def _short(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _os_reason(error: BaseException) -> str:
    """The innermost operating-system reason ("connection refused") behind a connection error."""
    seen: BaseException | None = error
    reason = _short(error)
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            reason = os.strerror(seen.errno).lower()
        seen = seen.__cause__ or seen.__context__
    return reason


def _timeout_kind(error: httpx.TimeoutException) -> str:
    if isinstance(error, httpx.ConnectTimeout):
        return "connecting"
    if isinstance(error, httpx.ReadTimeout):
        return "waiting for data"
    if isinstance(error, httpx.WriteTimeout):
        return "sending data"
    return "waiting for a free connection"


def _tls_failure(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(error)


def _too_large(call: _Call, host: str, limit: int) -> EvidenceUnavailable:
    if call.expect_size is not None and limit == call.expect_size:
        message = f"{call.what} from {host}: the registry sends more than the {limit} bytes of its descriptor"
        hint = "the registry (or something between it and trtguard) altered the content"
    else:
        message = f"{call.what} from {host} is larger than the limit of {limit} bytes"
        hint = "raise limits in the registry configuration if content this large is expected"
    return EvidenceUnavailable(message, transient=False, location=f"registry {host}", hint=hint)


def _error_detail(body: bytes) -> str:
    """``": MANIFEST_UNKNOWN manifest unknown"`` from an OCI error body, or nothing."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return ""
    errors = document.get("errors") if isinstance(document, dict) else None
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return ""
    code, message = errors[0].get("code"), errors[0].get("message")
    text = " ".join(str(part) for part in (code, message) if part)
    return f": {text}" if text else ""


def _ssl_context(ca_bundle: Path | None) -> ssl.SSLContext | bool:
    if ca_bundle is None:
        return True  # httpx's default: certifi's CA bundle
    try:
        return ssl.create_default_context(cafile=str(ca_bundle))
    except (OSError, ssl.SSLError) as error:
        raise InputError(
            f"cannot load the CA bundle: {error}",
            location=str(ca_bundle),
            hint="ca_bundle must be a PEM file of CA certificates",
        ) from error
