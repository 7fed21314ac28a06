"""verifier/registry/client.py against a real registry, directly and through the fault proxy.

Every fault must end in the right EvidenceUnavailable (transient or not, naming the registry and what
happened) within the deadline; none may hang.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import push_image, push_index, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from verifier.deadline import Deadline
from verifier.errors import EvidenceUnavailable, InputError
from verifier.references import ImageReference
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig
from verifier.registry.oci import DOCKER_MANIFEST, OCI_INDEX, Descriptor, encode_json

# Slack for a loaded two-core machine: a deadline must end a call within deadline + SLACK seconds.
SLACK = 1.0


def _ref(host: str, name: str) -> ImageReference:
    return ImageReference.parse(f"{host}/{name}")


async def test_push_resolve_and_fetch(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = _ref(registry.host, "client/app:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    assert digest == image.digest
    assert await client.resolve(ref, Deadline.after(10)) == digest
    manifest = await client.get_manifest(ref.with_digest(digest), Deadline.after(10))
    assert manifest is not None and manifest.data == image.manifest and not manifest.is_index
    config = await client.get_blob(ref, manifest.config, Deadline.after(10))
    assert config == image.blobs[0].data
    assert await client.get_blob(ref, manifest.layers[0].digest, Deadline.after(10)) == image.blobs[1].data


async def test_resolve_keeps_an_explicit_digest(client: RegistryClient, registry: LocalRegistry) -> None:
    digest = "sha256:" + "a" * 64
    ref = _ref(registry.host, f"client/pinned:v1@{digest}")
    assert await client.resolve(ref, Deadline.after(1)) == digest
    assert client.stats.total_requests == 0


async def test_multi_arch_index_digest_is_what_a_tag_resolves_to(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = _ref(registry.host, "client/multi:v1")
    images = [tiny_image(architecture="amd64"), tiny_image(architecture="arm64")]
    digest = await push_index(client, ref, images)
    assert await client.resolve(ref, Deadline.after(10)) == digest
    index = await client.get_manifest(ref, Deadline.after(10))
    assert index is not None and index.is_index and index.media_type == OCI_INDEX
    assert [m.digest for m in index.manifests] == [i.digest for i in images]
    assert index.manifests[1].platform == {"architecture": "arm64", "os": "linux"}


async def test_docker_media_types(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = _ref(registry.host, "client/docker:v2")
    image = tiny_image()
    config, layer = image.blobs
    deadline = Deadline.after(10)
    for blob in image.blobs:
        await client.push_blob(ref, blob.data, blob.media_type, deadline)
    document = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": Descriptor.for_bytes(
            "application/vnd.docker.container.image.v1+json", config.data
        ).to_json(),
        "layers": [
            Descriptor.for_bytes("application/vnd.docker.image.rootfs.diff.tar.gzip", layer.data).to_json()
        ],
    }
    data = json.dumps(document, indent=3).encode()  # any formatting: the digest is of these bytes
    await client.push_manifest(ref, data, DOCKER_MANIFEST, deadline, tag="v2")
    manifest = await client.get_manifest(ref, deadline)
    assert manifest is not None
    assert manifest.media_type == DOCKER_MANIFEST
    assert manifest.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert manifest.artifact_type is None


async def test_missing_things_are_definitive(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = _ref(registry.host, "client/absent:nope")
    with pytest.raises(EvidenceUnavailable) as raised:
        await client.resolve(ref, Deadline.after(10))
    assert raised.value.transient is False
    assert f"{registry.host} has no manifest client/absent:nope" in raised.value.message
    assert await client.get_manifest(ref, Deadline.after(10), missing_ok=True) is None
    with pytest.raises(EvidenceUnavailable, match="has no blob") as blob:
        await client.get_blob(ref, "sha256:" + "0" * 64, Deadline.after(10))
    assert blob.value.transient is False


async def test_referrers_api_absent_on_distribution_2_8(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = _ref(registry.host, "client/refs:v1")
    digest = await push_image(client, ref, tiny_image())
    assert await client.referrers(ref, digest, Deadline.after(10)) is None


async def test_verified_content_is_served_from_memory(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = _ref(registry.host, "client/memo:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    sent = client.stats.total_requests
    await client.get_manifest(ref.with_digest(digest), Deadline.after(10))
    manifest = await client.get_manifest(ref.with_digest(digest), Deadline.after(10))
    assert manifest is not None
    await client.get_blob(ref, manifest.layers[0], Deadline.after(10))
    await client.get_blob(ref, manifest.layers[0], Deadline.after(10))
    assert client.stats.total_requests - sent == 1  # only the first blob GET; the manifest was pushed


async def test_limits_apply_while_streaming(registry: LocalRegistry) -> None:
    config = RegistryConfig.model_validate(
        {
            "registries": {
                registry.host: {"plain_http": True, "limits": {"manifest_bytes": 1024, "blob_bytes": 1024}}
            }
        }
    )
    ref = _ref(registry.host, "client/big:v1")
    async with RegistryClient(config) as client:
        deadline = Deadline.after(10)
        big = b"x" * 5000
        descriptor = await client.push_blob(ref, big, "application/octet-stream", deadline)
        with pytest.raises(EvidenceUnavailable, match="above the limit") as declared:
            await client.get_blob(ref, descriptor, deadline)
        with pytest.raises(EvidenceUnavailable, match="larger than the limit of 1024") as streamed:
            await client.get_blob(ref, descriptor.digest, deadline)
        assert declared.value.transient is False and streamed.value.transient is False
        index = encode_json(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [], "annotations": {"pad": "p" * 2000}}
        )
        with pytest.raises(InputError, match="above the manifest limit"):
            await client.push_manifest(ref, index, OCI_INDEX, deadline, tag="big")


async def test_bad_digest_arguments_are_input_errors(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = _ref(registry.host, "client/x:v1")
    with pytest.raises(InputError):
        await client.get_blob(ref, "md5:abc", Deadline.after(1))
    with pytest.raises(InputError):
        await client.referrers(ref, "sha256:short", Deadline.after(1))


# -- through the fault proxy ---------------------------------------------------------------------------


@pytest.fixture
async def faulty(
    proxy: FaultProxy, registry: LocalRegistry
) -> AsyncIterator[tuple[RegistryClient, FaultProxy]]:
    async with RegistryClient(plain_config(proxy.host, registry.host)) as made:
        yield made, proxy


async def _pushed(client: RegistryClient, registry: LocalRegistry, name: str) -> tuple[str, str]:
    """Push a new image directly to the registry; returns (tag path, digest)."""
    ref = _ref(registry.host, f"faults/{name}:v1")
    digest = await push_image(client, ref, tiny_image())
    return f"faults/{name}:v1", digest


async def _timed(coroutine: Awaitable[object]) -> tuple[BaseException | object, float]:
    started = time.monotonic()
    try:
        result = await coroutine
    except Exception as error:
        return error, time.monotonic() - started
    return result, time.monotonic() - started


async def test_500_three_times_is_transient(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await _pushed(client, registry, "five-hundred")
    proxy.inject(Fault.answer(500), path="/manifests/")
    error, elapsed = await _timed(client.resolve(_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert f"{proxy.host} answered 500 three times in" in error.message
    assert "manifest faults/five-hundred:v1" in error.message
    assert proxy.count("GET", "/manifests/") == 3
    assert elapsed < 5


async def test_one_500_then_success_is_retried(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "flaky")
    proxy.inject(Fault.answer(503), path="/manifests/", times=1)
    assert await client.resolve(_ref(proxy.host, name), Deadline.after(5)) == digest
    assert proxy.count("GET", "/manifests/") == 2


async def test_429_retry_after_is_honoured(
    client: RegistryClient, proxy: FaultProxy, registry: LocalRegistry
) -> None:
    name, digest = await _pushed(client, registry, "rate-limited")
    proxy.inject(Fault.answer(429, retry_after="1"), path="/manifests/", times=1)
    async with RegistryClient(plain_config(proxy.host, max_backoff=2)) as patient:
        result, elapsed = await _timed(patient.resolve(_ref(proxy.host, name), Deadline.after(5)))
    assert result == digest
    assert elapsed >= 0.9


async def test_429_retry_after_an_http_date_is_read_as_gmt(
    client: RegistryClient, proxy: FaultProxy, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "-0000" parses to a naive datetime; taken as local time five hours west of GMT it lies hours ahead.
    monkeypatch.setenv("TZ", "XYZ+5")
    time.tzset()
    try:
        name, digest = await _pushed(client, registry, "rate-limited-date")
        when = email.utils.formatdate(time.time() + 1)  # "..., 12:00:01 -0000"
        assert when.endswith("-0000")
        proxy.inject(Fault.answer(429, retry_after=when), path="/manifests/", times=1)
        async with RegistryClient(plain_config(proxy.host, max_backoff=2)) as patient:
            assert await patient.resolve(_ref(proxy.host, name), Deadline.after(5)) == digest
    finally:
        monkeypatch.undo()
        time.tzset()


async def test_429_retry_after_beyond_the_longest_back_off_is_not_waited_for(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    # Without a deadline (the command line), a day-long Retry-After must not hang the call for a day.
    client, proxy = faulty
    name, _ = await _pushed(client, registry, "rate-limited-day")
    proxy.inject(Fault.answer(429, retry_after="86400"), path="/manifests/")
    error, elapsed = await _timed(client.resolve(_ref(proxy.host, name), Deadline.never()))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "asked to retry after 86400.0 s, longer than the longest back-off (0.2 s" in error.message
    assert elapsed < 1
    assert proxy.count("GET", "/manifests/") == 1


async def test_a_shared_request_outlives_the_deadline_of_the_caller_that_started_it(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "shared-deadline")
    proxy.inject(Fault("delay", seconds=1.0), path="/manifests/", times=1)
    hurried = asyncio.create_task(_timed(client.resolve(_ref(proxy.host, name), Deadline.after(0.3))))
    await asyncio.sleep(0.05)  # the hurried caller's request is in flight; this one joins it
    patient = asyncio.create_task(client.resolve(_ref(proxy.host, name), Deadline.after(5)))
    error, elapsed = await hurried
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert elapsed < 0.3 + SLACK
    # The shared request retries within the patient caller's deadline (its first attempt was cut at 0.3 s).
    assert await patient == digest


async def test_429_asking_for_more_time_than_is_left_fails_at_once(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await _pushed(client, registry, "rate-limited-long")
    proxy.inject(Fault.answer(429, retry_after="30"), path="/manifests/")
    error, elapsed = await _timed(client.resolve(_ref(proxy.host, name), Deadline.after(2)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "answered 429" in error.message and "asked to retry after 30.0 s" in error.message
    assert elapsed < 1
    assert proxy.count("GET", "/manifests/") == 1


async def test_connection_resets(faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "reset")
    proxy.inject(Fault("reset"), path="/manifests/", times=1)
    assert await client.resolve(_ref(proxy.host, name), Deadline.after(5)) == digest
    proxy.inject(Fault("reset"), path="/manifests/")
    client_fresh = RegistryClient(plain_config(proxy.host))
    async with client_fresh:
        error, elapsed = await _timed(client_fresh.resolve(_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert proxy.host in error.message and "three times" in error.message
    assert elapsed < 5


async def test_latency_beyond_the_deadline(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await _pushed(client, registry, "slow")
    proxy.inject(Fault("delay", seconds=30), path="/manifests/")
    error, elapsed = await _timed(client.resolve(_ref(proxy.host, name), Deadline.after(1.0)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert proxy.host in error.message and "deadline" in error.message
    assert elapsed < 1.0 + SLACK


async def test_truncated_body(faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry) -> None:
    client, proxy = faulty
    name, _ = await _pushed(client, registry, "truncated")
    proxy.inject(Fault("truncate"), path="/manifests/")
    error, elapsed = await _timed(client.resolve(_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "broke off the answer" in error.message and proxy.host in error.message
    assert elapsed < 5


async def test_manifest_by_digest_with_wrong_bytes(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "lying-manifest")
    proxy.inject(Fault("corrupt"), path="/manifests/")
    ref = _ref(proxy.host, name.replace(":v1", "")).with_digest(digest)
    error, _ = await _timed(client.get_manifest(ref, Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient is False
    assert (
        f"manifest faults/lying-manifest@{digest} from {proxy.host}: received bytes hash to sha256:"
        in error.message
    )


async def test_manifest_by_tag_contradicting_its_digest_header(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "lying-tag")
    proxy.inject(Fault("corrupt"), path="/manifests/")
    error, _ = await _timed(client.resolve(_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient is False
    assert f"the registry says {digest} but the bytes hash to sha256:" in error.message


async def test_blob_with_wrong_bytes(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "lying-blob")
    ref = _ref(proxy.host, name)
    manifest = await client.get_manifest(ref.with_digest(digest), Deadline.after(5))
    assert manifest is not None
    proxy.inject(Fault("corrupt"), path="/blobs/")
    error, _ = await _timed(client.get_blob(ref, manifest.layers[0], Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient is False
    layer = manifest.layers[0].digest
    assert (
        f"blob {layer} of faults/lying-blob from {proxy.host}: received bytes hash to sha256:"
        in error.message
    )


async def test_slow_drip_body_ends_at_the_deadline(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await _pushed(client, registry, "drip")
    proxy.inject(Fault("drip", seconds=0.2), path="/manifests/")  # each byte well inside the read timeout
    error, elapsed = await _timed(client.resolve(_ref(proxy.host, name), Deadline.after(1.5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "no complete answer" in error.message
    assert elapsed < 1.5 + SLACK


async def test_blob_redirects_are_followed_without_credentials(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "redirected")
    ref = _ref(proxy.host, name)
    manifest = await client.get_manifest(ref.with_digest(digest), Deadline.after(5))
    assert manifest is not None
    proxy.inject(Fault("redirect"), path="/blobs/")
    data = await client.get_blob(ref, manifest.layers[0], Deadline.after(5))
    assert hashlib.sha256(data).hexdigest() == manifest.layers[0].digest.removeprefix("sha256:")


async def test_credentials_are_not_sent_to_the_redirect_target(
    registry: LocalRegistry, proxy: FaultProxy, tmp_path: Path, client: RegistryClient
) -> None:
    name, digest = await _pushed(client, registry, "redirect-credentials")
    host, port = registry.host.split(":")
    async with FaultProxy(host, int(port)) as storage:
        credentials = tmp_path / "auth.json"
        credentials.write_text(json.dumps({"auths": {proxy.host: {"username": "u", "password": "p"}}}))
        config = plain_config(proxy.host, storage.host, credentials_file=str(credentials))
        async with RegistryClient(config) as authed:
            ref = _ref(proxy.host, name)
            proxy.inject(Fault("challenge"))
            manifest = await authed.get_manifest(ref.with_digest(digest), Deadline.after(5))
            assert manifest is not None
            proxy.clear()  # the first matching rule applies: the redirect goes before the challenge
            proxy.inject(Fault("redirect", target=storage.host), path="/blobs/", times=1)
            proxy.inject(Fault("challenge"))
            await authed.get_blob(ref, manifest.layers[0], Deadline.after(5))
        assert proxy.authorizations[-1] is not None and proxy.authorizations[-1].startswith("Basic ")
        assert storage.count("GET", "/blobs/") == 1
        assert storage.authorizations == [None]


async def test_redirect_to_plain_http_is_refused(registry: LocalRegistry, proxy: FaultProxy) -> None:
    # The proxy is allowed plain HTTP, its redirect target (the registry) is not.
    async with RegistryClient(plain_config(proxy.host)) as client:
        direct = RegistryClient(plain_config(registry.host))
        async with direct:
            name, digest = await _pushed(direct, registry, "redirect-http")
        manifest = await client.get_manifest(_ref(proxy.host, name).with_digest(digest), Deadline.after(5))
        assert manifest is not None
        proxy.inject(Fault("redirect"), path="/blobs/")
        with pytest.raises(EvidenceUnavailable, match=r"redirected .* to plain HTTP") as raised:
            await client.get_blob(_ref(proxy.host, name), manifest.layers[0], Deadline.after(5))
    assert raised.value.transient is False


async def test_unreachable_registry(registry: LocalRegistry) -> None:
    async with RegistryClient(plain_config("127.0.0.1:9")) as client:
        error, elapsed = await _timed(client.resolve(_ref("127.0.0.1:9", "none/app:v1"), Deadline.after(3)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "127.0.0.1:9 could not be connected to (connection refused) three times" in error.message
    assert elapsed < 3


async def test_deadline_already_spent(client: RegistryClient, registry: LocalRegistry) -> None:
    error, _ = await _timed(client.resolve(_ref(registry.host, "client/app:v1"), Deadline.after(0)))
    assert isinstance(error, EvidenceUnavailable) and error.transient


async def test_100_identical_lookups_make_one_set_of_requests(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await _pushed(client, registry, "burst")
    ref = _ref(proxy.host, name)
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
    name, digest = await _pushed(client, registry, "two-deadlines")
    ref = _ref(proxy.host, name)
    proxy.inject(Fault("delay", seconds=1.5), times=1)
    patient = asyncio.create_task(client.resolve(ref, Deadline.after(10)))
    await asyncio.sleep(0.05)
    error, elapsed = await _timed(client.resolve(ref, Deadline.after(0.5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert elapsed < 0.5 + SLACK
    assert await patient == digest
    assert proxy.count("GET", "/manifests/") == 1


async def test_no_retry_when_the_back_off_would_outlast_the_deadline(
    proxy: FaultProxy, registry: LocalRegistry, client: RegistryClient
) -> None:
    name, _ = await _pushed(client, registry, "back-off")
    config = RegistryConfig.model_validate(
        {
            "registries": {
                proxy.host: {"plain_http": True, "retry": {"attempts": 5, "backoff": 10, "max_backoff": 10}}
            }
        }
    )
    proxy.inject(Fault.answer(502), path="/manifests/")
    async with RegistryClient(config) as patient:
        error, elapsed = await _timed(patient.resolve(_ref(proxy.host, name), Deadline.after(2)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "answered 502" in error.message and "too little for another attempt" in error.message
    assert proxy.count("GET", "/manifests/") == 1
    assert elapsed < 1
