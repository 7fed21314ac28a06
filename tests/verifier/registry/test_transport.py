"""verifier/registry/_transport.py through the fault proxy: retries, deadlines, digest checks.

Every fault must end in the right EvidenceUnavailable (transient or not, naming the registry and what
happened) within the deadline; none may hang. What :meth:`RegistryTransport.fetch` says of a refusal or a
body that does not hash to its digest is pinned word for word (message, location, hint): the checks were
thirteen copies in the client before they became that one helper.
"""

from __future__ import annotations

import email.utils
import time

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from tests.verifier.registry.faults import (
    ALTERED,
    DENIED,
    INJECTED,
    REFUSED,
    SLACK,
    assert_definitive,
    image_ref,
    pushed_image,
    timed,
)
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable
from verifier.registry._transport import Expected, RegistryTransport, repository_scope
from verifier.registry._wire import Call
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig


async def test_500_three_times_is_transient(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await pushed_image(client, registry, "five-hundred")
    proxy.inject(Fault.answer(500), path="/manifests/")
    error, elapsed = await timed(client.resolve(image_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert f"{proxy.host} answered 500 three times in" in error.message
    assert "manifest faults/five-hundred:v1" in error.message
    assert proxy.count("GET", "/manifests/") == 3
    assert elapsed < 5


async def test_one_500_then_success_is_retried(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "flaky")
    proxy.inject(Fault.answer(503), path="/manifests/", times=1)
    assert await client.resolve(image_ref(proxy.host, name), Deadline.after(5)) == digest
    assert proxy.count("GET", "/manifests/") == 2


async def test_429_retry_after_is_honoured(
    client: RegistryClient, proxy: FaultProxy, registry: LocalRegistry
) -> None:
    name, digest = await pushed_image(client, registry, "rate-limited")
    proxy.inject(Fault.answer(429, retry_after="1"), path="/manifests/", times=1)
    async with RegistryClient(plain_config(proxy.host, max_backoff=2)) as patient:
        result, elapsed = await timed(patient.resolve(image_ref(proxy.host, name), Deadline.after(5)))
    assert result == digest
    assert elapsed >= 0.9


async def test_429_retry_after_an_http_date_is_read_as_gmt(
    client: RegistryClient, proxy: FaultProxy, registry: LocalRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "-0000" parses to a naive datetime; taken as local time five hours west of GMT it lies hours ahead.
    monkeypatch.setenv("TZ", "XYZ+5")
    time.tzset()
    try:
        name, digest = await pushed_image(client, registry, "rate-limited-date")
        when = email.utils.formatdate(time.time() + 1)  # "..., 12:00:01 -0000"
        assert when.endswith("-0000")
        proxy.inject(Fault.answer(429, retry_after=when), path="/manifests/", times=1)
        async with RegistryClient(plain_config(proxy.host, max_backoff=2)) as patient:
            assert await patient.resolve(image_ref(proxy.host, name), Deadline.after(5)) == digest
    finally:
        monkeypatch.undo()
        time.tzset()


async def test_429_retry_after_beyond_the_longest_back_off_is_not_waited_for(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    # Without a deadline (the command line), a day-long Retry-After must not hang the call for a day.
    client, proxy = faulty
    name, _ = await pushed_image(client, registry, "rate-limited-day")
    proxy.inject(Fault.answer(429, retry_after="86400"), path="/manifests/")
    error, elapsed = await timed(client.resolve(image_ref(proxy.host, name), Deadline.never()))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "asked to retry after 86400.0 s, longer than the longest back-off (0.2 s" in error.message
    assert elapsed < 1
    assert proxy.count("GET", "/manifests/") == 1


async def test_429_asking_for_more_time_than_is_left_fails_at_once(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await pushed_image(client, registry, "rate-limited-long")
    proxy.inject(Fault.answer(429, retry_after="30"), path="/manifests/")
    error, elapsed = await timed(client.resolve(image_ref(proxy.host, name), Deadline.after(2)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "answered 429" in error.message and "asked to retry after 30.0 s" in error.message
    assert elapsed < 1
    assert proxy.count("GET", "/manifests/") == 1


async def test_no_retry_when_the_back_off_would_outlast_the_deadline(
    proxy: FaultProxy, registry: LocalRegistry, client: RegistryClient
) -> None:
    name, _ = await pushed_image(client, registry, "back-off")
    config = RegistryConfig.model_validate(
        {
            "registries": {
                proxy.host: {"plain_http": True, "retry": {"attempts": 5, "backoff": 10, "max_backoff": 10}}
            }
        }
    )
    proxy.inject(Fault.answer(502), path="/manifests/")
    async with RegistryClient(config) as patient:
        error, elapsed = await timed(patient.resolve(image_ref(proxy.host, name), Deadline.after(2)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "answered 502" in error.message and "too little for another attempt" in error.message
    assert proxy.count("GET", "/manifests/") == 1
    assert elapsed < 1


async def test_connection_resets(faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "reset")
    proxy.inject(Fault("reset"), path="/manifests/", times=1)
    assert await client.resolve(image_ref(proxy.host, name), Deadline.after(5)) == digest
    proxy.inject(Fault("reset"), path="/manifests/")
    client_fresh = RegistryClient(plain_config(proxy.host))
    async with client_fresh:
        error, elapsed = await timed(client_fresh.resolve(image_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert proxy.host in error.message and "three times" in error.message
    assert elapsed < 5


async def test_latency_beyond_the_deadline(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await pushed_image(client, registry, "slow")
    proxy.inject(Fault("delay", seconds=30), path="/manifests/")
    error, elapsed = await timed(client.resolve(image_ref(proxy.host, name), Deadline.after(1.0)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert proxy.host in error.message and "deadline" in error.message
    assert elapsed < 1.0 + SLACK


async def test_unreachable_registry(registry: LocalRegistry) -> None:
    async with RegistryClient(plain_config("127.0.0.1:9")) as client:
        error, elapsed = await timed(
            client.resolve(image_ref("127.0.0.1:9", "none/app:v1"), Deadline.after(3))
        )
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "127.0.0.1:9 could not be connected to (connection refused) three times" in error.message
    assert elapsed < 3


async def test_deadline_already_spent(client: RegistryClient, registry: LocalRegistry) -> None:
    error, _ = await timed(client.resolve(image_ref(registry.host, "client/app:v1"), Deadline.after(0)))
    assert isinstance(error, EvidenceUnavailable) and error.transient


async def test_manifest_by_digest_with_wrong_bytes(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "lying-manifest")
    proxy.inject(Fault("corrupt"), path="/manifests/")
    ref = image_ref(proxy.host, name.replace(":v1", "")).with_digest(digest)
    error, _ = await timed(client.get_manifest(ref, Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient is False
    assert_definitive(
        error,
        f"manifest faults/lying-manifest@{digest} from {proxy.host}: received bytes hash to sha256:",
        f"image {proxy.host}/faults/lying-manifest@{digest}",
        ALTERED + "manifest",
        prefix=True,
    )


async def test_blob_with_wrong_bytes(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "lying-blob")
    ref = image_ref(proxy.host, name)
    manifest = await client.get_manifest(ref.with_digest(digest), Deadline.after(5))
    assert manifest is not None
    proxy.inject(Fault("corrupt"), path="/blobs/")
    error, _ = await timed(client.get_blob(ref, manifest.layers[0], Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient is False
    layer = manifest.layers[0].digest
    assert_definitive(
        error,
        f"blob {layer} of faults/lying-blob from {proxy.host}: received bytes hash to sha256:",
        f"image {proxy.host}/faults/lying-blob",
        ALTERED + "blob",
        prefix=True,
    )


@pytest.mark.parametrize(
    ("status", "words", "hint"),
    [(403, "denied access to", DENIED), (400, "answered 400 to", REFUSED), (405, "answered 405 to", REFUSED)],
)
async def test_refused_reads(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry, status: int, words: str, hint: str
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, f"refused-{status}")
    repository = name.removesuffix(":v1")
    ref = image_ref(proxy.host, repository).with_digest(digest)
    layer = (await client.get_manifest(ref, Deadline.after(5))).layers[0]
    proxy.inject(Fault.answer(status))
    deadline, where = Deadline.after(5), f"registry {proxy.host}"
    error, _ = await timed(client.get_manifest(image_ref(proxy.host, name), deadline))
    assert_definitive(error, f"{proxy.host} {words} manifest {name}{INJECTED}", where, hint)
    error, _ = await timed(client.get_blob(ref, layer, deadline))
    assert_definitive(
        error, f"{proxy.host} {words} blob {layer.digest} of {repository}{INJECTED}", where, hint
    )
    error, _ = await timed(client.referrers(ref, layer.digest, deadline))
    message = f"{proxy.host} {words} referrers of {repository}@{layer.digest}{INJECTED}"
    assert_definitive(error, message, where, hint)


async def test_refused_token_requests(registry: LocalRegistry, proxy: FaultProxy) -> None:
    host, port = registry.host.split(":")
    async with FaultProxy(host, int(port)) as realm:
        challenge = ("WWW-Authenticate", f'Bearer realm="http://{realm.host}/token",service="test"')
        proxy.inject(Fault("status", status=401, headers=(challenge,)))
        ref = image_ref(proxy.host, "faults/token:v1")
        async with RegistryClient(plain_config(proxy.host, realm.host)) as client:
            realm.inject(Fault.answer(404), times=1)
            error, _ = await timed(client.get_manifest(ref, Deadline.after(5)))
            message = f"{realm.host} answered 404 to token request to 127.0.0.1{INJECTED}"
            assert_definitive(error, message, f"registry {realm.host}", REFUSED)
            realm.inject(Fault.answer(403), times=1)
            error, _ = await timed(client.get_manifest(ref, Deadline.after(5)))
            assert_definitive(
                error,
                f"the token service of {proxy.host} (127.0.0.1) refused anonymous access (403{INJECTED})",
                f"registry {proxy.host}",
                "check the registry's entry in the credentials file (dockerconfigjson)",
            )


# -- the one helper, called directly ------------------------------------------------------------------------


def _get(transport: RegistryTransport, host: str, path: str, what: str) -> Call:
    settings = transport.settings(host)
    return Call("GET", settings, f"{settings.base_url}/v2/{path}", what, repository_scope("faults/fetch"))


async def test_fetch_judges_statuses(client: RegistryClient, registry: LocalRegistry) -> None:
    image = tiny_image()
    await push_image(client, image_ref(registry.host, "faults/fetch:v1"), image)
    config = image.blobs[0].descriptor.digest
    deadline = Deadline.after(5)
    async with RegistryTransport(plain_config(registry.host)) as transport:
        absent = _get(transport, registry.host, f"faults/fetch/blobs/sha256:{'0' * 64}", "the absent blob")
        assert await transport.fetch(absent, deadline, missing_ok=True) is None
        # Without missing_ok a 404 is a refusal like any other status the caller did not expect.
        error, _ = await timed(transport.fetch(absent, deadline))
        message = f"{registry.host} answered 404 to the absent blob: BLOB_UNKNOWN blob unknown to registry"
        assert_definitive(error, message, f"registry {registry.host}", REFUSED)
        error, _ = await timed(transport.fetch(absent, deadline, named="the other name"))
        assert isinstance(error, EvidenceUnavailable) and " answered 404 to the other name: " in error.message
        found = _get(transport, registry.host, f"faults/fetch/blobs/{config}", "the config")
        error, _ = await timed(transport.fetch(found, deadline, ok=(201,)))
        assert_definitive(
            error, f"{registry.host} answered 200 to the config", f"registry {registry.host}", REFUSED
        )
        reply = await transport.fetch(found, deadline, expected=Expected(config, "blob", "here"))
        assert reply.status == 200 and reply.body == image.blobs[0].data


async def test_fetch_refuses_a_body_of_another_digest(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    image = tiny_image()
    await push_image(client, image_ref(registry.host, "faults/fetch:v1"), image)
    config = image.blobs[0].descriptor.digest
    other = "sha256:" + "0" * 64
    async with RegistryTransport(plain_config(registry.host)) as transport:
        call = _get(transport, registry.host, f"faults/fetch/blobs/{config}", "the config")
        error, _ = await timed(
            transport.fetch(call, Deadline.after(5), expected=Expected(other, "blob", "there"))
        )
        message = f"the config from {registry.host}: received bytes hash to {config}"
        assert_definitive(error, message, "there", ALTERED + "blob")
