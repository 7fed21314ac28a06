"""verifier/registry/client.py: the read operations against a real registry.

Resolving tags, manifests (OCI and Docker, images and indexes), blobs and the referrers API; what is missing
is definitive, and a tag's ``Docker-Content-Digest`` must agree with its bytes.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import json
import sys

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import push_image, push_index, tiny_image
from tests.support.localregistry import LocalRegistry
from tests.verifier.registry.faults import ALTERED, assert_definitive, image_ref, pushed_image, timed
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable, InputError
from verifier.registry._oci import DOCKER_MANIFEST, OCI_INDEX, Descriptor
from verifier.registry.client import RegistryClient


async def test_push_resolve_and_fetch(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = image_ref(registry.host, "client/app:v1")
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
    ref = image_ref(registry.host, f"client/pinned:v1@{digest}")
    assert await client.resolve(ref, Deadline.after(1)) == digest
    assert client.stats.total_requests == 0


async def test_multi_arch_index_digest_is_what_a_tag_resolves_to(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = image_ref(registry.host, "client/multi:v1")
    images = [tiny_image(architecture="amd64"), tiny_image(architecture="arm64")]
    digest = await push_index(client, ref, images)
    assert await client.resolve(ref, Deadline.after(10)) == digest
    index = await client.get_manifest(ref, Deadline.after(10))
    assert index is not None and index.is_index and index.media_type == OCI_INDEX
    assert [m.digest for m in index.manifests] == [i.digest for i in images]
    assert index.manifests[1].platform == {"architecture": "arm64", "os": "linux"}


async def test_docker_media_types(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    ref = image_ref(registry.host, "client/docker:v2")
    image = tiny_image()
    config, layer = image.blobs
    deadline = Deadline.after(10)
    for blob in image.blobs:
        await writer.push_blob(ref, blob.data, blob.media_type, deadline)
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
    await writer.push_manifest(ref, data, DOCKER_MANIFEST, deadline, tag="v2")
    manifest = await client.get_manifest(ref, deadline)
    assert manifest is not None
    assert manifest.media_type == DOCKER_MANIFEST
    assert manifest.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert manifest.artifact_type is None


async def test_missing_things_are_definitive(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = image_ref(registry.host, "client/absent:nope")
    with pytest.raises(EvidenceUnavailable) as raised:
        await client.resolve(ref, Deadline.after(10))
    assert raised.value.transient is False
    assert f"{registry.host} has no manifest client/absent:nope" in raised.value.message
    assert await client.get_manifest(ref, Deadline.after(10), missing_ok=True) is None
    assert_definitive(
        raised.value,
        f"{registry.host} has no manifest client/absent:nope",
        f"image {registry.host}/client/absent:nope",
        "check the image name, tag and digest, and that the image was pushed",
    )
    digest = "sha256:" + "0" * 64
    with pytest.raises(EvidenceUnavailable, match="has no blob") as blob:
        await client.get_blob(ref, digest, Deadline.after(10))
    assert blob.value.transient is False
    assert_definitive(
        blob.value,
        f"{registry.host} has no blob {digest} of client/absent",
        f"image {registry.host}/client/absent",
        "the manifest refers to a blob the registry does not hold; push it again",
    )


async def test_referrers_api_absent_on_distribution_2_8(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = image_ref(registry.host, "client/refs:v1")
    digest = await push_image(client, ref, tiny_image())
    assert await client.referrers(ref, digest, Deadline.after(10)) is None


async def test_bad_digest_arguments_are_input_errors(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = image_ref(registry.host, "client/x:v1")
    with pytest.raises(InputError):
        await client.get_blob(ref, "md5:abc", Deadline.after(1))
    with pytest.raises(InputError):
        await client.referrers(ref, "sha256:short", Deadline.after(1))


async def test_manifest_by_tag_contradicting_its_digest_header(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "lying-tag")
    proxy.inject(Fault("corrupt"), path="/manifests/")
    error, _ = await timed(client.resolve(image_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient is False
    assert_definitive(
        error,
        f"manifest {name} from {proxy.host}: the registry says {digest} but the bytes hash to sha256:",
        f"image {proxy.host}/{name}",
        ALTERED + "manifest",
        prefix=True,
    )


class _ImportCounter(importlib.abc.MetaPathFinder):
    """Counts the imports that reach the finders: a failed import is not cached and searches sys.path anew."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        self.names.append(fullname)


async def test_requests_import_nothing_once_warm(client: RegistryClient, registry: LocalRegistry) -> None:
    # httpcore imports sniffio for every pool lock; without it installed, every request searched sys.path
    # again (issue 15: about 5 ms of each cold registry admission).
    refs = [image_ref(registry.host, f"client/imports-{n}:v1") for n in range(3)]
    for ref in refs:
        await push_image(client, ref, tiny_image())
    counter = _ImportCounter()
    sys.meta_path.insert(0, counter)
    try:
        for ref in refs:
            await client.resolve(ref, Deadline.after(10))
    finally:
        sys.meta_path.remove(counter)
    assert client.stats.total_requests > 0
    assert counter.names == []
