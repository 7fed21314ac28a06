"""verifier/registry/_sharing.py: identical reads made once, verified content kept."""

from __future__ import annotations

import asyncio

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry
from tests.verifier.registry.faults import SLACK, image_ref, pushed_image, timed
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable
from verifier.registry.client import RegistryClient


async def test_verified_content_is_served_from_memory(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = image_ref(registry.host, "client/memo:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    sent = client.stats.total_requests
    await client.get_manifest(ref.with_digest(digest), Deadline.after(10))
    manifest = await client.get_manifest(ref.with_digest(digest), Deadline.after(10))
    assert manifest is not None
    await client.get_blob(ref, manifest.layers[0], Deadline.after(10))
    await client.get_blob(ref, manifest.layers[0], Deadline.after(10))
    assert client.stats.total_requests - sent == 1  # only the first blob GET; the manifest was pushed


async def test_a_shared_request_outlives_the_deadline_of_the_caller_that_started_it(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "shared-deadline")
    proxy.inject(Fault("delay", seconds=1.0), path="/manifests/", times=1)
    hurried = asyncio.create_task(timed(client.resolve(image_ref(proxy.host, name), Deadline.after(0.3))))
    await asyncio.sleep(0.05)  # the hurried caller's request is in flight; this one joins it
    patient = asyncio.create_task(client.resolve(image_ref(proxy.host, name), Deadline.after(5)))
    error, elapsed = await hurried
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert elapsed < 0.3 + SLACK
    # The shared request retries within the patient caller's deadline (its first attempt was cut at 0.3 s).
    assert await patient == digest


async def test_100_identical_lookups_make_one_set_of_requests(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "burst")
    ref = image_ref(proxy.host, name)
    # Slow the registry a little so that all 100 look-ups overlap, as in an admission burst.
    proxy.inject(Fault("delay", seconds=0.3))

    async def lookup() -> bytes:
        resolved = await client.resolve(ref, Deadline.after(10))
        manifest = await client.get_manifest(ref.with_digest(resolved), Deadline.after(10))
        assert manifest is not None
        return await client.get_blob(ref, manifest.layers[0], Deadline.after(10))

    results = await asyncio.gather(*(lookup() for _ in range(100)))
    assert len(set(results)) == 1
    assert proxy.count("GET", "/manifests/") == 1
    assert proxy.count("GET", "/blobs/") == 1
    assert len(proxy.requests) == 2
    assert client.stats.coalesced >= 99
    assert digest


async def test_a_waiter_with_a_shorter_deadline_leaves_on_time(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "two-deadlines")
    ref = image_ref(proxy.host, name)
    proxy.inject(Fault("delay", seconds=1.5), times=1)
    patient = asyncio.create_task(client.resolve(ref, Deadline.after(10)))
    await asyncio.sleep(0.05)
    error, elapsed = await timed(client.resolve(ref, Deadline.after(0.5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert elapsed < 0.5 + SLACK
    assert await patient == digest
    assert proxy.count("GET", "/manifests/") == 1
