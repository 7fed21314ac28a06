"""Registry authentication: ``dockerconfigjson`` credentials, Basic auth and Bearer token challenges.

A registry answers 401 with ``WWW-Authenticate: Bearer realm=…,service=…,scope=…`` (token auth, as Docker Hub,
GHCR, Harbor and distribution's token mode do) or ``Basic realm=…`` (htpasswd). :class:`Authenticator` keeps
the resulting ``Authorization`` values per registry and scope and asks the token realm again when a token
expires. The HTTP call to the realm is the transport's, so that it has the same timeouts, retries and TLS
settings as any other call.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from verifier.base import EvidenceUnavailable, InputError, SingleFlight, read_limited
from verifier.registry.config import is_loopback, normalise_host

#: Tokens are renewed this many seconds before the realm says they expire (clock skew, long requests).
_EXPIRY_MARGIN = 10.0
#: Token lifetime when the realm does not say (the distribution token spec's default).
_DEFAULT_TOKEN_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user name and password (or registry token) for one registry."""

    username: str
    password: str = field(repr=False)

    def basic(self) -> str:
        """The ``Authorization`` header value for Basic auth."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


def parse_docker_config(data: bytes, *, source: str) -> dict[str, Credentials]:
    """Credentials by registry host from a ``dockerconfigjson`` (or legacy ``dockercfg``) document.

    Accepts the ``auths`` map of ``~/.docker/config.json`` / ``kubernetes.io/dockerconfigjson`` secrets
    and the bare map of the older ``kubernetes.io/dockercfg``; each entry has ``auth`` (base64
    ``user:password``) or ``username`` + ``password``. Keys may be URLs (``https://index.docker.io/v1/``).
    """
    try:
        document: Any = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise InputError(
            f"credentials file is not JSON: {error}",
            location=source,
            hint="give the .dockerconfigjson content of an image pull secret",
        ) from error
    if not isinstance(document, dict):
        raise InputError("credentials file is not a JSON object", location=source)
    entries = document.get("auths", document)
    if not isinstance(entries, dict):
        raise InputError("'auths' is not an object", location=source)
    found: dict[str, Credentials] = {}
    for key, entry in entries.items():
        if not isinstance(key, str) or key in {
            "credsStore",
            "credHelpers",
            "HttpHeaders",
            "psFormat",
            "currentContext",
        }:
            continue
        where = f"{source}: auths[{key!r}]"
        if not isinstance(entry, dict):
            raise InputError("entry is not an object", location=where)
        credentials = _entry_credentials(entry, where)
        if credentials is None:
            continue
        try:
            host = normalise_host(key)
        except ValueError as error:
            raise InputError(str(error), location=where) from error
        found[host] = credentials
    return found


def _entry_credentials(entry: Mapping[str, Any], where: str) -> Credentials | None:
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            decoded = base64.b64decode(auth, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as error:
            raise InputError(
                "'auth' is not base64 of 'user:password'", location=where, hint="re-create the secret"
            ) from error
        user, sep, password = decoded.partition(":")
        if not sep:
            raise InputError("'auth' does not decode to 'user:password'", location=where)
        return Credentials(user, password)
    username, secret = entry.get("username"), entry.get("password")
    if isinstance(username, str) and isinstance(secret, str):
        return Credentials(username, secret)
    if entry.get("identitytoken") or entry.get("registrytoken"):
        raise InputError(
            "identity tokens (OAuth refresh tokens) are not supported",
            location=where,
            hint="store a user name and password (or an access token as the password) for this registry",
        )
    return None


class CredentialStore:
    """Credentials from a ``dockerconfigjson`` file, re-read whenever the file changes on disk.

    A mounted Kubernetes Secret is replaced atomically when it is rotated; checking the file's modification
    time and size on use picks that up without a restart.
    """

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._stamp: tuple[int, int] | None = None
        self._credentials: dict[str, Credentials] = {}
        if path is not None:
            self._reload(path)

    def lookup(self, host: str) -> Credentials | None:
        """Credentials for ``host[:port]`` (Docker Hub's aliases fold together), or ``None``."""
        if self._path is not None and _stamp(self._path) != self._stamp:
            self._reload(self._path)
        return self._credentials.get(normalise_host(host))

    def _reload(self, path: Path) -> None:
        data = read_limited(
            path, "the credentials file", hint="check credentials_file in the registry configuration"
        )
        self._credentials = parse_docker_config(data, source=str(path))
        self._stamp = _stamp(path)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)


@dataclass(frozen=True, slots=True)
class Challenge:
    """One ``WWW-Authenticate`` challenge: the scheme (lower case) and its parameters."""

    scheme: str
    params: Mapping[str, str]


def parse_challenges(values: Iterable[str]) -> list[Challenge]:
    """Parse ``WWW-Authenticate`` header values (RFC 7235 auth-params, quoted strings with commas)."""
    challenges: list[Challenge] = []
    for value in values:
        scheme, _, rest = value.strip().partition(" ")
        if not scheme:
            continue
        params: dict[str, str] = {}
        for item in urllib.request.parse_http_list(rest):
            name, sep, raw = item.partition("=")
            if not sep:
                continue
            raw = raw.strip()
            if len(raw) >= 2 and raw[0] == raw[-1] == '"':
                raw = raw[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            params[name.strip().lower()] = raw
        challenges.append(Challenge(scheme.lower(), params))
    return challenges


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """What the transport must fetch from a token realm: a GET of ``url`` with optional Basic auth."""

    url: str
    params: Mapping[str, str]
    credentials: Credentials | None


#: The transport's GET for token realms: returns the JSON body, raises EvidenceUnavailable on failure.
TokenFetcher = Callable[[TokenRequest], Awaitable[Mapping[str, Any]]]


@dataclass(slots=True)
class _Grant:
    header: str
    expires_at: float


class Authenticator:
    """``Authorization`` values per (registry, scope), obtained by answering 401 challenges."""

    def __init__(self, credentials: CredentialStore, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._credentials = credentials
        self._clock = clock
        self._grants: dict[tuple[str, str], _Grant] = {}
        self._flights: SingleFlight[tuple[str, str], str] = SingleFlight()

    def has_credentials(self, host: str) -> bool:
        """True when credentials are configured for ``host``."""
        return self._credentials.lookup(host) is not None

    def header(self, host: str, scope: str) -> str | None:
        """A still valid ``Authorization`` value for ``scope`` on ``host``, if one is known."""
        for key in ((host, scope), (host, "")):
            grant = self._grants.get(key)
            if grant is not None and self._clock() < grant.expires_at:
                return grant.header
        return None

    def forget(self, host: str, scope: str) -> None:
        """Drop a value the registry refused, so that the next challenge is answered afresh."""
        self._grants.pop((host, scope), None)
        self._grants.pop((host, ""), None)

    async def answer(
        self,
        host: str,
        scope: str,
        challenges: Iterable[Challenge],
        fetch: TokenFetcher,
        *,
        allow_plain_http_realm: bool,
    ) -> str:
        """Answer the challenges of a 401 for ``scope`` on ``host``; returns the ``Authorization`` value.

        Concurrent callers for the same registry and scope share one token request.
        """
        listed = list(challenges)
        bearer = next((c for c in listed if c.scheme == "bearer"), None)
        if bearer is not None:
            return await self._flights.run(
                (host, scope), lambda: self._bearer(host, scope, bearer, fetch, allow_plain_http_realm)
            )
        if any(c.scheme == "basic" for c in listed):
            credentials = self._credentials.lookup(host)
            if credentials is None:
                raise EvidenceUnavailable(
                    f"{host} requires a user name and password, and none is configured for it",
                    transient=False,
                    location=host,
                    hint="add the registry to the credentials_file (dockerconfigjson) of the registry "
                    "configuration",
                )
            header = credentials.basic()
            self._grants[(host, "")] = _Grant(header, float("inf"))
            return header
        schemes = ", ".join(sorted({c.scheme for c in listed})) or "none"
        raise EvidenceUnavailable(
            f"{host} asked for authentication with a scheme trtguard does not speak ({schemes})",
            transient=False,
            location=host,
            hint="trtguard supports Bearer token and Basic authentication",
        )

    async def _bearer(
        self, host: str, scope: str, challenge: Challenge, fetch: TokenFetcher, allow_plain_http_realm: bool
    ) -> str:
        realm = challenge.params.get("realm", "")
        parts = urlsplit(realm)
        plain_ok = allow_plain_http_realm and parts.scheme == "http" and is_loopback(parts.netloc)
        if parts.scheme != "https" and not plain_ok:
            raise EvidenceUnavailable(
                f"{host} sent its token realm {realm!r}, which is not an https URL",
                transient=False,
                location=host,
                hint="credentials are only sent to token realms over TLS",
            )
        params: dict[str, str] = {}
        if "service" in challenge.params:
            params["service"] = challenge.params["service"]
        params["scope"] = challenge.params.get("scope", scope)
        started = self._clock()
        body = await fetch(TokenRequest(realm, params, self._credentials.lookup(host)))
        token = body.get("token") or body.get("access_token")
        if not isinstance(token, str) or not token:
            raise EvidenceUnavailable(
                f"the token realm of {host} answered without a token",
                transient=False,
                location=realm,
            )
        lifetime = body.get("expires_in")
        seconds = (
            float(lifetime)
            if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) and lifetime > 0
            else _DEFAULT_TOKEN_SECONDS
        )
        header = f"Bearer {token}"
        self._grants[(host, scope)] = _Grant(header, started + max(0.0, seconds - _EXPIRY_MARGIN))
        return header
