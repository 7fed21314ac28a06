"""Helpers for the registry tests that go through the fault proxy (the ``faulty`` fixture)."""

from __future__ import annotations

import time
from collections.abc import Awaitable

from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry
from verifier.base._errors import EvidenceUnavailable
from verifier.base._references import ImageReference
from verifier.registry.client import RegistryClient

# Slack for a loaded two-core machine: a deadline must end a call within deadline + SLACK seconds.
SLACK = 1.0
#: The OCI error body the fault proxy answers with, as a refusal quotes it.
INJECTED = ": INJECTED injected by the fault proxy"
ALTERED = "the registry (or something between it and trtguard) altered the "
REFUSED = "the registry refused the request; check that it supports the OCI distribution API"
DENIED = "the credentials in use lack permission for this repository"


def image_ref(host: str, name: str) -> ImageReference:
    """``host/name`` parsed."""
    return ImageReference.parse(f"{host}/{name}")


async def pushed_image(client: RegistryClient, registry: LocalRegistry, name: str) -> tuple[str, str]:
    """Push a new image directly to the registry; returns (tag path, digest)."""
    ref = image_ref(registry.host, f"faults/{name}:v1")
    digest = await push_image(client, ref, tiny_image())
    return f"faults/{name}:v1", digest


async def timed(coroutine: Awaitable[object]) -> tuple[BaseException | object, float]:
    """What ``coroutine`` returned or raised, and the seconds it took."""
    started = time.monotonic()
    try:
        result = await coroutine
    except Exception as error:
        return error, time.monotonic() - started
    return result, time.monotonic() - started


def assert_definitive(
    error: BaseException | object, message: str, location: str, hint: str, *, prefix: bool = False
) -> None:
    """``error`` is a definitive EvidenceUnavailable with this message (or prefix), location and hint."""
    assert isinstance(error, EvidenceUnavailable), error
    assert error.transient is False
    assert error.message.startswith(message) if prefix else error.message == message
    assert (error.location, error.hint) == (location, hint)
