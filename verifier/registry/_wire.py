"""One registry request on the wire: connections, credentials, redirects and a bounded, hashed body.

* One connection pool per CA bundle (a registry's ``ca_bundle``, else certifi's), shared by all registries
  that trust the same CAs.
* Timeouts for connecting and reading are the registry's, cut to what is left of the caller's deadline.
* The ``Authorization`` header goes only to the origin asked, never to another one a registry redirects to;
  redirects are followed only where a call allows it (blobs), to TLS endpoints or to loopback plain HTTP
  where that host allows it.
* The body is hashed while it streams in and cut off as soon as it passes its limit; a successful body
  above its limit, or announcing another size than its descriptor, is refused before it is read whole.

Retries, authentication and judging the answer are :mod:`verifier.registry._transport`'s.
"""

from __future__ import annotations

import hashlib
import math
import ssl
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from verifier.base import Deadline, EvidenceUnavailable, InputError
from verifier.registry._failures import too_large
from verifier.registry.config import RegistrySettings, is_loopback

__all__ = ["Call", "ClosedOnExit", "Connections", "Reply"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 5
#: Bytes of an error answer read for the message; the rest is dropped.
_ERROR_BODY_LIMIT = 16 * 1024
_USER_AGENT = "trtguard"


class ClosedOnExit(ABC):
    """An owner of registry connections, usable as an async context manager that calls :meth:`aclose`."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @abstractmethod
    async def aclose(self) -> None:
        """Close every connection."""


@dataclass(slots=True)
class Call:
    """One logical registry request, retried and authenticated as one."""

    method: str
    settings: RegistrySettings
    url: str
    #: What was asked for, for messages: "manifest team/app:1.0", "blob sha256:… of team/app".
    what: str
    #: Token scope (:func:`~verifier.registry._transport.repository_scope`); None for calls that carry no
    #: registry auth (token realms).
    scope: str | None
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] | None = None
    content: bytes | Callable[[], AsyncIterator[bytes]] | None = None
    #: Largest body read into memory.
    limit: int = _ERROR_BODY_LIMIT
    #: Exact body size expected (a descriptor's).
    expect_size: int | None = None
    follow_redirects: bool = False
    retry: bool = True
    #: Whether the settings' per-attempt ``request`` cap applies (not for large uploads).
    capped: bool = True
    extra_auth: str | None = None


@dataclass(slots=True)
class Reply:
    """An answer: its status, headers, body (bounded) and the body's sha256 (hex)."""

    status: int
    headers: httpx.Headers
    body: bytes
    sha256: str
    url: str


class Connections:
    """HTTP connections to registries, one pool per CA bundle, and a count of the requests sent."""

    def __init__(self, limits: httpx.Limits, settings_for: Callable[[str], RegistrySettings]) -> None:
        self._limits = limits
        self._settings_for = settings_for
        self._http: dict[Path | None, httpx.AsyncClient] = {}
        #: Requests sent, by method.
        self.requests: Counter[str] = Counter()

    async def aclose(self) -> None:
        """Close every connection."""
        clients, self._http = list(self._http.values()), {}
        for client in clients:
            await client.aclose()

    async def send(self, call: Call, authorization: str | None, deadline: Deadline) -> Reply:
        """Send ``call`` once (following redirects where it allows) and read the answer, bounded."""
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
            self.requests[call.method] += 1
            response = await self._client(settings).send(request, stream=True)
            try:
                if call.follow_redirects and response.status_code in _REDIRECTS:
                    target = response.headers.get("location")
                    if not target:
                        return await self._read(response, call, _ERROR_BODY_LIMIT)
                    url = url.join(target)
                    settings = self._redirect_settings(call, url)
                    continue
                success = 200 <= response.status_code < 300
                return await self._read(response, call, call.limit if success else _ERROR_BODY_LIMIT)
            finally:
                await response.aclose()
        raise EvidenceUnavailable(
            f"{call.settings.host} redirected {call.what} more than {_MAX_REDIRECTS} times",
            transient=False,
            location=f"registry {call.settings.host}",
        )

    def _redirect_settings(self, call: Call, url: httpx.URL) -> RegistrySettings:
        """Settings for a redirect target (blob storage): its own TLS entry; plain HTTP only where allowed."""
        port = f":{url.port}" if url.port else ""
        settings = self._settings_for(f"{url.host}{port}")
        if url.scheme == "http" and not (settings.plain_http and is_loopback(settings.host)):
            raise EvidenceUnavailable(
                f"{call.settings.host} redirected {call.what} to plain HTTP ({url.host})",
                transient=False,
                location=f"registry {call.settings.host}",
                hint="trtguard follows redirects only to TLS endpoints",
            )
        return settings

    async def _read(self, response: httpx.Response, call: Call, limit: int) -> Reply:
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
                raise too_large(call.what, host, limit, call.expect_size)
        hasher = hashlib.sha256()
        parts: list[bytes] = []
        received = 0
        if call.method != "HEAD":
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received > limit:
                    if success:
                        raise too_large(call.what, host, limit, call.expect_size)
                    break
                hasher.update(chunk)
                parts.append(chunk)
        return Reply(
            response.status_code, response.headers, b"".join(parts), hasher.hexdigest(), str(response.url)
        )

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


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)


def _seconds_or_none(value: float) -> float | None:
    return None if math.isinf(value) else max(value, 0.001)


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
