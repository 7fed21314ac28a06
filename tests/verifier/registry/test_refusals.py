"""Every refusal, missing answer and content mismatch of the registry client, word for word.

Pinned before the client was split into transport and operations, so that moving the checks into one
helper changed no message, location, hint or transience.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from verifier.deadline import Deadline
from verifier.errors import EvidenceUnavailable
from verifier.references import ImageReference
from verifier.registry.client import RegistryClient

INJECTED = ": INJECTED injected by the fault proxy"
ALTERED = "the registry (or something between it and trtguard) altered the "
REFUSED = "the registry refused the request; check that it supports the OCI distribution API"


@pytest.fixture
async def faulty(proxy: FaultProxy, registry: LocalRegistry) -> AsyncIterator[RegistryClient]:
    async with RegistryClient(plain_config(proxy.host, registry.host)) as made:
        yield made


async def _pushed(client: RegistryClient, registry: LocalRegistry, proxy: FaultProxy, name: str) -> str:
    """Push a new image directly to the registry; returns its digest reference through the proxy."""
    digest = await push_image(
        client, ImageReference.parse(f"{registry.host}/refusals/{name}:v1"), tiny_image()
    )
    return f"{proxy.host}/refusals/{name}@{digest}"


def _same(
    error: EvidenceUnavailable, message: str, location: str, hint: str, *, prefix: bool = False
) -> None:
    assert error.transient is False
    assert error.message.startswith(message) if prefix else error.message == message
    assert (error.location, error.hint) == (location, hint)


async def test_manifest_by_digest_with_wrong_bytes(
    faulty: RegistryClient, proxy: FaultProxy, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(await _pushed(faulty, registry, proxy, "manifest-bytes"))
    proxy.inject(Fault("corrupt"), path="/manifests/")
    with pytest.raises(EvidenceUnavailable) as raised:
        await faulty.get_manifest(ref, Deadline.after(5))
    _same(
        raised.value,
        f"manifest refusals/manifest-bytes@{ref.digest} from {proxy.host}: received bytes hash to sha256:",
        f"image {proxy.host}/refusals/manifest-bytes@{ref.digest}",
        ALTERED + "manifest",
        prefix=True,
    )


async def test_manifest_by_tag_contradicting_its_digest_header(
    faulty: RegistryClient, proxy: FaultProxy, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(await _pushed(faulty, registry, proxy, "manifest-header"))
    proxy.inject(Fault("corrupt"), path="/manifests/")
    with pytest.raises(EvidenceUnavailable) as raised:
        await faulty.get_manifest(ImageReference(ref.registry, ref.repository, "v1", None), Deadline.after(5))
    _same(
        raised.value,
        f"manifest refusals/manifest-header:v1 from {proxy.host}: the registry says {ref.digest} but the "
        "bytes hash to sha256:",
        f"image {proxy.host}/refusals/manifest-header:v1",
        ALTERED + "manifest",
        prefix=True,
    )


async def test_blob_with_wrong_bytes(
    faulty: RegistryClient, proxy: FaultProxy, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(await _pushed(faulty, registry, proxy, "blob-bytes"))
    layer = (await faulty.get_manifest(ref, Deadline.after(5))).layers[0]
    proxy.inject(Fault("corrupt"), path="/blobs/")
    with pytest.raises(EvidenceUnavailable) as raised:
        await faulty.get_blob(ref, layer, Deadline.after(5))
    _same(
        raised.value,
        f"blob {layer.digest} of refusals/blob-bytes from {proxy.host}: received bytes hash to sha256:",
        f"image {proxy.host}/refusals/blob-bytes",
        ALTERED + "blob",
        prefix=True,
    )


async def test_blob_missing(faulty: RegistryClient, proxy: FaultProxy) -> None:
    ref = ImageReference.parse(f"{proxy.host}/refusals/no-blob:v1")
    digest = "sha256:" + "0" * 64
    with pytest.raises(EvidenceUnavailable) as raised:
        await faulty.get_blob(ref, digest, Deadline.after(5))
    _same(
        raised.value,
        f"{proxy.host} has no blob {digest} of refusals/no-blob",
        f"image {proxy.host}/refusals/no-blob",
        "the manifest refers to a blob the registry does not hold; push it again",
    )


async def test_manifest_missing(faulty: RegistryClient, proxy: FaultProxy) -> None:
    ref = ImageReference.parse(f"{proxy.host}/refusals/no-manifest:v9")
    with pytest.raises(EvidenceUnavailable) as raised:
        await faulty.get_manifest(ref, Deadline.after(5))
    _same(
        raised.value,
        f"{proxy.host} has no manifest refusals/no-manifest:v9",
        f"image {proxy.host}/refusals/no-manifest:v9",
        "check the image name, tag and digest, and that the image was pushed",
    )


@pytest.mark.parametrize(
    ("status", "words", "hint"),
    [
        (403, "denied access to", "the credentials in use lack permission for this repository"),
        (400, "answered 400 to", REFUSED),
        (405, "answered 405 to", REFUSED),
    ],
)
async def test_refused_reads(
    faulty: RegistryClient, proxy: FaultProxy, registry: LocalRegistry, status: int, words: str, hint: str
) -> None:
    ref = ImageReference.parse(await _pushed(faulty, registry, proxy, f"refused-{status}"))
    layer = (await faulty.get_manifest(ref, Deadline.after(5))).layers[0]
    proxy.inject(Fault.answer(status))
    deadline = Deadline.after(5)
    name = f"refusals/refused-{status}"
    where = f"registry {proxy.host}"
    with pytest.raises(EvidenceUnavailable) as manifest:
        await faulty.get_manifest(ImageReference(ref.registry, ref.repository, "v1", None), deadline)
    _same(manifest.value, f"{proxy.host} {words} manifest {name}:v1{INJECTED}", where, hint)
    with pytest.raises(EvidenceUnavailable) as blob:
        await faulty.get_blob(ref, layer, deadline)
    _same(blob.value, f"{proxy.host} {words} blob {layer.digest} of {name}{INJECTED}", where, hint)
    with pytest.raises(EvidenceUnavailable) as referrers:
        await faulty.referrers(ref, layer.digest, deadline)
    _same(referrers.value, f"{proxy.host} {words} referrers of {name}@{layer.digest}{INJECTED}", where, hint)


@pytest.mark.parametrize(
    ("step", "method", "path", "what"),
    [
        ("exists", "HEAD", "/blobs/sha256:", "blob {digest} of {name}"),
        ("start", "POST", "/blobs/uploads/", "upload of blob {digest} to {name}"),
        ("finish", "PUT", "/blobs/uploads/", "upload of blob {digest} to {name}"),
        ("manifest", "PUT", "/manifests/", "manifest {name}:v1"),
    ],
)
async def test_refused_writes(
    faulty: RegistryClient, proxy: FaultProxy, step: str, method: str, path: str, what: str
) -> None:
    name = f"refusals/write-{step}"
    ref = ImageReference.parse(f"{proxy.host}/{name}:v1")
    image = tiny_image()
    proxy.inject(Fault.answer(403), method=method, path=path)
    deadline = Deadline.after(5)
    blob = image.blobs[0]
    with pytest.raises(EvidenceUnavailable) as raised:
        if step == "manifest":
            await faulty.push_manifest(ref, image.manifest, image.descriptor.media_type, deadline, tag="v1")
        else:
            await faulty.push_blob(ref, blob.data, blob.media_type, deadline)
    message = what.format(digest=blob.descriptor.digest, name=name)
    detail = "" if method == "HEAD" else INJECTED  # an answer to HEAD has no body to quote
    _same(
        raised.value,
        f"{proxy.host} denied access to {message}{detail}",
        f"registry {proxy.host}",
        "the credentials in use lack permission for this repository",
    )


async def test_refused_token_requests(registry: LocalRegistry, proxy: FaultProxy) -> None:
    host, port = registry.host.split(":")
    async with FaultProxy(host, int(port)) as realm:
        challenge = ("WWW-Authenticate", f'Bearer realm="http://{realm.host}/token",service="test"')
        proxy.inject(Fault("status", status=401, headers=(challenge,)))
        ref = ImageReference.parse(f"{proxy.host}/refusals/token:v1")
        async with RegistryClient(plain_config(proxy.host, realm.host)) as client:
            realm.inject(Fault.answer(404), times=1)
            with pytest.raises(EvidenceUnavailable) as missing:
                await client.get_manifest(ref, Deadline.after(5))
            _same(
                missing.value,
                f"{realm.host} answered 404 to token request to 127.0.0.1{INJECTED}",
                f"registry {realm.host}",
                REFUSED,
            )
            realm.inject(Fault.answer(403), times=1)
            with pytest.raises(EvidenceUnavailable) as denied:
                await client.get_manifest(ref, Deadline.after(5))
            _same(
                denied.value,
                f"the token service of {proxy.host} (127.0.0.1) refused anonymous access (403{INJECTED})",
                f"registry {proxy.host}",
                "check the registry's entry in the credentials file (dockerconfigjson)",
            )
