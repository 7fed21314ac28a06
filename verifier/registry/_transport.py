"""The HTTP side of the OCI distribution client: a registry request sent, authenticated, retried and judged.

* :meth:`RegistryTransport.fetch` is the one place an answer is judged: a 404 (absent, where the caller
  allows it), a refusal (403, 405, …), a body that does not hash to its digest or has the wrong size.
* Every attempt has a timeout derived from the caller's :class:`~verifier.base.Deadline` and the
  registry's settings; 429 (honouring ``Retry-After`` up to the longest back-off, else giving up), 5xx and
  connection failures are retried with back-off only while the deadline leaves time for it.
* 401 challenges are answered through :class:`~verifier.registry._auth.Authenticator` (Basic, or Bearer
  tokens fetched with this transport, so with the same timeouts, retries and TLS settings).
* The transport holds what reads share (:mod:`verifier.registry._sharing`): identical GETs in flight made
  once, and a small content-addressed store of verified content, both keyed by registry and repository.

Sending one request (connections, redirects, the bounded body) is :mod:`verifier.registry._wire`'s; what a
failure says is :mod:`verifier.registry._failures`'. The operations built on the transport: reading in
:mod:`verifier.registry.client`; writing (uploads) in the release tooling, ``trtguard.release.publish``.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

import httpx

from verifier.base import Deadline, EvidenceUnavailable
from verifier.registry._auth import Authenticator, CredentialStore, TokenRequest, parse_challenges
from verifier.registry._failures import (
    backoff,
    error_detail,
    gave_up,
    os_reason,
    plain_http_answer,
    refusal,
    retry_after,
    short,
    timeout_kind,
    tls_failure,
    unauthorised,
)
from verifier.registry._sharing import ContentStore, SharedFlights
from verifier.registry._wire import Call, ClosedOnExit, Connections, Reply
from verifier.registry.config import RegistryConfig, RegistrySettings, normalise_host

__all__ = ["Expected", "RegistryStats", "RegistryTransport", "repository_at", "repository_scope"]

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_TOKEN_BODY_LIMIT = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RegistryStats:
    """Counters since the transport was made."""

    requests: Mapping[str, int]
    coalesced: int
    content_hits: int

    @property
    def total_requests(self) -> int:
        """All HTTP requests sent, token requests included."""
        return sum(self.requests.values())


@dataclass(frozen=True, slots=True)
class Expected:
    """What the body of a successful answer must be: bytes hashing to ``digest`` (and the call's size)."""

    digest: str
    #: What a mismatch means the registry altered, for the hint.
    kind: Literal["manifest", "blob"]
    #: Where a mismatch is reported: ``image host/repository[@digest]``.
    location: str


class _Retryable(Exception):
    """An attempt failed in a way another attempt may not (reset, timeout, truncated body)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RegistryTransport(ClosedOnExit):
    """HTTP to the registries named in ``config`` (defaults for all others): connections, auth, retries.

    Use it as an async context manager (or call :meth:`aclose`) so that connections are closed.
    """

    def __init__(self, config: RegistryConfig | None = None) -> None:
        self._config = config or RegistryConfig()
        self._auth = Authenticator(CredentialStore(self._config.credentials_file))
        #: Identical reads in flight, made once (keyed by registry, repository and what is asked).
        self.flights = SharedFlights()
        #: Verified content by (registry, repository, digest).
        self.content = ContentStore(self._config.content_cache_bytes)
        limits = httpx.Limits(
            max_connections=self._config.max_connections,
            max_keepalive_connections=self._config.max_connections,
        )
        self._wire = Connections(limits, self.settings)

    async def aclose(self) -> None:
        """Close every connection."""
        await self._wire.aclose()

    @property
    def stats(self) -> RegistryStats:
        """HTTP requests sent (by method), GETs shared with an identical one in flight, content-store hits."""
        return RegistryStats(dict(self._wire.requests), self.flights.coalesced, self.content.hits)

    def settings(self, registry: str) -> RegistrySettings:
        """The effective settings for ``registry``."""
        return self._config.settings_for(registry)

    @overload
    async def fetch(
        self,
        call: Call,
        deadline: Deadline,
        *,
        ok: Collection[int] = (200,),
        missing_ok: Literal[False] = False,
        expected: Expected | None = None,
        named: str | None = None,
    ) -> Reply: ...

    @overload
    async def fetch(
        self,
        call: Call,
        deadline: Deadline,
        *,
        ok: Collection[int] = (200,),
        missing_ok: Literal[True],
        expected: Expected | None = None,
        named: str | None = None,
    ) -> Reply | None: ...

    async def fetch(
        self,
        call: Call,
        deadline: Deadline,
        *,
        ok: Collection[int] = (200,),
        missing_ok: bool = False,
        expected: Expected | None = None,
        named: str | None = None,
    ) -> Reply | None:
        """Send ``call`` and judge the answer; every operation's request goes through here.

        Returns None for a 404 when ``missing_ok`` (the caller says what absence means). Any other status
        not in ``ok`` is a definitive refusal naming the registry and what was asked. A body that does not
        hash to ``expected.digest``, or whose size is not the call's ``expect_size``, is definitive too:
        the registry (or something between it and trtguard) altered it. ``named`` names the request in a
        refusal where the call's ``what`` does not (a token request is named by its realm).
        """
        reply = await self._exchange(call, deadline)
        if reply.status == 404 and missing_ok:
            return None
        if reply.status not in ok:
            raise refusal(reply.status, reply.body, call.settings.host, named or call.what)
        if expected is not None:
            _check_content(call, reply, expected)
        return reply

    # -- one request -----------------------------------------------------------------------------------

    async def _exchange(self, call: Call, deadline: Deadline) -> Reply:
        """Send ``call`` with auth, retrying 429/5xx/connection failures while ``deadline`` allows."""
        policy = call.settings.retry
        attempts = policy.attempts if call.retry else 1
        started = time.monotonic()
        failures: list[str] = []
        host, what = call.settings.host, call.what
        for attempt in range(1, attempts + 1):
            if deadline.remaining() <= 0:
                raise gave_up(host, what, failures, started, "no time was left for another attempt")
            wait: float | None = None
            try:
                reply = await self._attempt(call, deadline)
            except _Retryable as failure:
                failures.append(failure.reason)
            else:
                if reply.status not in _RETRY_STATUSES:
                    return reply
                failures.append(f"answered {reply.status}")
                wait = retry_after(reply.headers.get("retry-after"))
            if attempt == attempts:
                break
            if wait is not None and wait > policy.max_backoff:
                # A registry asking for a long wait (429 with "Retry-After: 86400") is not waited for:
                # that would hang a caller without a deadline for as long as the registry likes.
                raise gave_up(
                    host,
                    what,
                    failures,
                    started,
                    f"asked to retry after {wait:.1f} s, longer than the longest back-off"
                    f" ({policy.max_backoff:g} s, retry.max_backoff)",
                )
            delay = wait if wait is not None else backoff(policy.backoff, policy.max_backoff, attempt)
            left = deadline.remaining()
            if delay >= left:
                reason = (
                    f"asked to retry after {delay:.1f} s with only {left:.1f} s left"
                    if wait is not None
                    else f"only {left:.1f} s left, too little for another attempt"
                )
                raise gave_up(host, what, failures, started, reason)
            await asyncio.sleep(delay)
        raise gave_up(host, what, failures, started, None)

    async def _attempt(self, call: Call, deadline: Deadline) -> Reply:
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
            raise _Retryable(f"timed out ({timeout_kind(error)})") from None
        except httpx.RemoteProtocolError as error:
            raise _Retryable(f"broke off the answer ({short(error)})") from None
        except (httpx.ReadError, httpx.WriteError) as error:
            raise _Retryable(f"dropped the connection ({os_reason(error)})") from None
        except httpx.ConnectError as error:
            if plain_http_answer(error):
                host = call.settings.host
                raise EvidenceUnavailable(
                    f"{host} answered the TLS handshake in plain HTTP: it is a plain-HTTP registry, and "
                    f"trtguard asked it over TLS (for {call.what})",
                    transient=False,
                    location=f"registry {host}",
                    hint=f"for a loopback registry, set plain_http: true for {host} in the registry "
                    "configuration (--registry-config); any other registry needs TLS",
                ) from None
            if tls_failure(error):
                raise EvidenceUnavailable(
                    f"{call.settings.host}: TLS certificate not trusted ({short(error)})",
                    transient=False,
                    location=f"registry {call.settings.host}",
                    hint="set ca_bundle for this registry in the registry configuration",
                ) from None
            raise _Retryable(f"could not be connected to ({os_reason(error)})") from None
        except httpx.TransportError as error:
            raise _Retryable(f"failed ({type(error).__name__}: {short(error)})") from None

    async def _authorised(self, call: Call, deadline: Deadline) -> Reply:
        host = call.settings.host
        header = call.extra_auth or (self._auth.header(host, call.scope) if call.scope else None)
        reply = await self._wire.send(call, header, deadline)
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
        reply = await self._wire.send(call, header, deadline)
        if reply.status == 401:
            raise unauthorised(host, call.what, configured=self._auth.has_credentials(host))
        return reply

    async def _fetch_token(
        self, request: TokenRequest, registry: RegistrySettings, deadline: Deadline
    ) -> Mapping[str, Any]:
        realm = httpx.URL(request.url)
        port = f":{realm.port}" if realm.port else ""
        realm_host = f"{realm.host}{port}"
        settings = registry if normalise_host(realm_host) == registry.host else self.settings(realm_host)
        call = Call(
            "GET",
            settings,
            request.url,
            f"token for {request.params.get('scope', 'the registry')}",
            None,
            params=dict(request.params),
            limit=_TOKEN_BODY_LIMIT,
            extra_auth=request.credentials.basic() if request.credentials else None,
        )
        reply = await self.fetch(call, deadline, ok=(200, 401, 403), named=f"token request to {realm.host}")
        if reply.status in (401, 403):
            raise EvidenceUnavailable(
                f"the token service of {registry.host} ({realm.host}) refused "
                f"{'the credentials' if request.credentials else 'anonymous access'} "
                f"({reply.status}{error_detail(reply.body)})",
                transient=False,
                location=f"registry {registry.host}",
                hint="check the registry's entry in the credentials file (dockerconfigjson)",
            )
        try:
            body = json.loads(reply.body)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            body = None
        if not isinstance(body, dict):
            raise EvidenceUnavailable(
                f"the token service of {registry.host} ({realm.host}) did not answer with JSON",
                transient=False,
                location=f"registry {registry.host}",
            )
        return body


def repository_scope(repository: str, *, push: bool = False) -> str:
    """The token scope of a call on ``repository``: ``repository:team/app:pull`` (``pull,push`` to write)."""
    return f"repository:{repository}:{'pull,push' if push else 'pull'}"


def repository_at(repository: str, target: str) -> str:
    """``team/app@sha256:…`` or ``team/app:tag``, for messages."""
    return f"{repository}@{target}" if target.startswith("sha256:") else f"{repository}:{target}"


def _check_content(call: Call, reply: Reply, expected: Expected) -> None:
    host = call.settings.host
    received = f"sha256:{reply.sha256}"
    if received != expected.digest:
        raise EvidenceUnavailable(
            f"{call.what} from {host}: received bytes hash to {received}",
            transient=False,
            location=expected.location,
            hint=f"the registry (or something between it and trtguard) altered the {expected.kind}",
        )
    if call.expect_size is not None and len(reply.body) != call.expect_size:
        raise EvidenceUnavailable(
            f"{call.what} from {host}: received {len(reply.body)} bytes, "
            f"the descriptor says {call.expect_size}",
            transient=False,
            location=expected.location,
            hint="the manifest's descriptor does not match the blob",  # only blobs are fetched by descriptor
        )


def _seconds(value: float) -> float | None:
    """``asyncio.timeout`` takes None for "no limit" (a deadline of ``Deadline.never()``)."""
    return None if math.isinf(value) else value
