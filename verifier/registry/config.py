"""Registry settings: CA bundles, plain HTTP for loopback registries, credentials, limits, timeouts, retries.

One YAML file (``--registry-config FILE`` of ``trtguard serve``, ``trtguard check --registry`` and the
registry commands) loaded into :class:`RegistryConfig`. The format is documented in ``README.md`` beside this
module. Relative paths in the file are relative to the file's folder.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verifier.base import InputError, decode, load_document, read_limited

#: Docker Hub's names for itself; image references use ``docker.io`` (see ``verifier.base._references``).
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

_MiB = 1024 * 1024

PositiveSeconds = Annotated[float, Field(gt=0, le=3600)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Timeouts(_Model):
    """Seconds. Every call also stops at the request's deadline, whichever comes first."""

    connect: PositiveSeconds = 3.0
    #: Longest silence between two pieces of a response.
    read: PositiveSeconds = 10.0
    #: Longest time one attempt (request, response and body) may take.
    request: PositiveSeconds = 30.0


class RetryPolicy(_Model):
    """Retries of 429, 5xx and connection failures, only while the deadline allows."""

    attempts: Annotated[int, Field(ge=1, le=10)] = 3
    #: First back-off in seconds; doubles on each retry (with jitter), up to ``max_backoff``.
    backoff: Annotated[float, Field(ge=0, le=60)] = 0.1
    max_backoff: Annotated[float, Field(ge=0, le=600)] = 2.0


class Limits(_Model):
    """Largest bodies accepted, in bytes; enforced while the body streams in."""

    manifest_bytes: Annotated[int, Field(ge=1024, le=64 * _MiB)] = 4 * _MiB
    #: Blobs read into memory: signature payloads, attestation envelopes, configs.
    blob_bytes: Annotated[int, Field(ge=1024, le=1024 * _MiB)] = 64 * _MiB


class RegistryDefaults(_Model):
    """Settings for every registry that has no section of its own."""

    timeouts: Timeouts = Timeouts()
    retry: RetryPolicy = RetryPolicy()
    limits: Limits = Limits()


class RegistryEntry(_Model):
    """Settings for one registry (``host[:port]``); each section given replaces the default one whole."""

    #: PEM file of the CA certificates that this registry's TLS certificate must chain to (instead of the
    #: system trust store).
    ca_bundle: Path | None = None
    #: Plain HTTP instead of TLS; allowed only for loopback registries (localhost, 127.0.0.0/8, ::1).
    plain_http: bool = False
    timeouts: Timeouts | None = None
    retry: RetryPolicy | None = None
    limits: Limits | None = None


class RegistrySettings(_Model):
    """The effective settings for one registry: its own section over the defaults."""

    host: str
    #: Host the API is served from (Docker Hub serves ``docker.io`` from ``registry-1.docker.io``).
    api_host: str
    plain_http: bool
    ca_bundle: Path | None
    timeouts: Timeouts
    retry: RetryPolicy
    limits: Limits

    @property
    def base_url(self) -> str:
        """``https://host`` (or ``http://`` for an allowed loopback registry)."""
        return f"{'http' if self.plain_http else 'https'}://{self.api_host}"


class RegistryConfig(_Model):
    """Everything the registry client needs to know, per registry and in general."""

    #: Credentials in the Kubernetes ``dockerconfigjson`` format (the ``.dockerconfigjson`` key of an image
    #: pull secret, or ``~/.docker/config.json``); re-read when it changes on disk.
    credentials_file: Path | None = None
    defaults: RegistryDefaults = RegistryDefaults()
    registries: dict[str, RegistryEntry] = {}
    #: Connections kept open to all registries together.
    max_connections: Annotated[int, Field(ge=1, le=1000)] = 64
    #: Size of the in-memory store of verified manifests and blobs (content-addressed, so never stale).
    content_cache_bytes: Annotated[int, Field(ge=0, le=4096 * _MiB)] = 32 * _MiB

    @field_validator("registries")
    @classmethod
    def _check_hosts(cls, registries: dict[str, RegistryEntry]) -> dict[str, RegistryEntry]:
        normalised: dict[str, RegistryEntry] = {}
        for host, entry in registries.items():
            key = normalise_host(host)
            if key in normalised:
                raise ValueError(f"registry {host!r} is listed twice")
            if entry.plain_http and not is_loopback(key):
                raise ValueError(
                    f"plain_http is allowed only for loopback registries (localhost, 127.0.0.0/8, ::1), "
                    f"not {host!r}"
                )
            normalised[key] = entry
        return normalised

    def settings_for(self, host: str) -> RegistrySettings:
        """The effective settings for the registry ``host`` (``host[:port]`` as in an image reference)."""
        key = normalise_host(host)
        entry = self.registries.get(key, RegistryEntry())
        return RegistrySettings(
            host=key,
            api_host=DOCKER_HUB_API if key == DOCKER_HUB else key,
            plain_http=entry.plain_http,
            ca_bundle=entry.ca_bundle,
            timeouts=entry.timeouts or self.defaults.timeouts,
            retry=entry.retry or self.defaults.retry,
            limits=entry.limits or self.defaults.limits,
        )

    def relative_to(self, folder: Path) -> RegistryConfig:
        """A copy whose relative file paths are taken relative to ``folder``."""

        def anchor(path: Path | None) -> Path | None:
            return None if path is None or path.is_absolute() else folder / path

        registries = {
            host: entry.model_copy(update={"ca_bundle": anchor(entry.ca_bundle) or entry.ca_bundle})
            for host, entry in self.registries.items()
        }
        return self.model_copy(
            update={
                "credentials_file": anchor(self.credentials_file) or self.credentials_file,
                "registries": registries,
            }
        )


def normalise_host(host: str) -> str:
    """Lower-case ``host[:port]``; Docker Hub's aliases fold into ``docker.io``; URL scheme and path go."""
    text = host.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0]
    if not text:
        raise ValueError(f"{host!r} names no registry host")
    return DOCKER_HUB if text in _DOCKER_HUB_ALIASES else text


def is_loopback(host: str) -> bool:
    """True when ``host[:port]`` names this machine: ``localhost``, ``127.0.0.0/8`` or ``[::1]``."""
    name = host
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name[1:]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def load_registry_config(path: Path) -> RegistryConfig:
    """Read and check a registry configuration file; raises :class:`InputError` naming the field."""
    text = decode(
        read_limited(
            path,
            "the registry configuration",
            hint="pass an existing YAML file to --registry-config",
        ),
        str(path),
    )
    try:
        loaded = load_document(text, str(path), what="the registry configuration")
    except InputError as error:
        error.hint = error.hint or "see verifier/registry/README.md for the format"
        raise
    document: Any = None if loaded is None else loaded.data
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise InputError(
            "the registry configuration must be a mapping",
            location=str(path),
            hint="see verifier/registry/README.md for the format",
        )
    try:
        config = RegistryConfig.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise InputError(
            f"{first['msg']}",
            location=f"{path}: {field}",
            hint="see verifier/registry/README.md for the format",
        ) from error
    return config.relative_to(path.parent)
