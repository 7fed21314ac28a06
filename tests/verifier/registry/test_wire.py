"""verifier/registry/_wire.py: bodies bounded as they stream in, redirects, credentials to the origin only."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.localregistry import LocalRegistry, plain_config
from tests.verifier.registry.faults import SLACK, image_ref, pushed_image, timed
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable, InputError
from verifier.registry._oci import OCI_INDEX, encode_json
from verifier.registry.client import RegistryClient
from verifier.registry.config import RegistryConfig


async def test_limits_apply_while_streaming(registry: LocalRegistry) -> None:
    config = RegistryConfig.model_validate(
        {
            "registries": {
                registry.host: {"plain_http": True, "limits": {"manifest_bytes": 1024, "blob_bytes": 1024}}
            }
        }
    )
    ref = image_ref(registry.host, "client/big:v1")
    async with RegistryClient(config) as client:
        deadline, writer = Deadline.after(10), RegistryWriter(client)
        big = b"x" * 5000
        descriptor = await writer.push_blob(ref, big, "application/octet-stream", deadline)
        with pytest.raises(EvidenceUnavailable, match="above the limit") as declared:
            await client.get_blob(ref, descriptor, deadline)
        with pytest.raises(EvidenceUnavailable, match="larger than the limit of 1024") as streamed:
            await client.get_blob(ref, descriptor.digest, deadline)
        assert declared.value.transient is False and streamed.value.transient is False
        index = encode_json(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [], "annotations": {"pad": "p" * 2000}}
        )
        with pytest.raises(InputError, match="above the manifest limit"):
            await writer.push_manifest(ref, index, OCI_INDEX, deadline, tag="big")


async def test_truncated_body(faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry) -> None:
    client, proxy = faulty
    name, _ = await pushed_image(client, registry, "truncated")
    proxy.inject(Fault("truncate"), path="/manifests/")
    error, elapsed = await timed(client.resolve(image_ref(proxy.host, name), Deadline.after(5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "broke off the answer" in error.message and proxy.host in error.message
    assert elapsed < 5


async def test_slow_drip_body_ends_at_the_deadline(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, _ = await pushed_image(client, registry, "drip")
    proxy.inject(Fault("drip", seconds=0.2), path="/manifests/")  # each byte well inside the read timeout
    error, elapsed = await timed(client.resolve(image_ref(proxy.host, name), Deadline.after(1.5)))
    assert isinstance(error, EvidenceUnavailable) and error.transient
    assert "no complete answer" in error.message
    assert elapsed < 1.5 + SLACK


async def test_blob_redirects_are_followed_without_credentials(
    faulty: tuple[RegistryClient, FaultProxy], registry: LocalRegistry
) -> None:
    client, proxy = faulty
    name, digest = await pushed_image(client, registry, "redirected")
    ref = image_ref(proxy.host, name)
    manifest = await client.get_manifest(ref.with_digest(digest), Deadline.after(5))
    assert manifest is not None
    proxy.inject(Fault("redirect"), path="/blobs/")
    data = await client.get_blob(ref, manifest.layers[0], Deadline.after(5))
    assert hashlib.sha256(data).hexdigest() == manifest.layers[0].digest.removeprefix("sha256:")


async def test_credentials_are_not_sent_to_the_redirect_target(
    registry: LocalRegistry, proxy: FaultProxy, tmp_path: Path, client: RegistryClient
) -> None:
    name, digest = await pushed_image(client, registry, "redirect-credentials")
    host, port = registry.host.split(":")
    async with FaultProxy(host, int(port)) as storage:
        credentials = tmp_path / "auth.json"
        credentials.write_text(json.dumps({"auths": {proxy.host: {"username": "u", "password": "p"}}}))
        config = plain_config(proxy.host, storage.host, credentials_file=str(credentials))
        async with RegistryClient(config) as authed:
            ref = image_ref(proxy.host, name)
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
            name, digest = await pushed_image(direct, registry, "redirect-http")
        manifest = await client.get_manifest(
            image_ref(proxy.host, name).with_digest(digest), Deadline.after(5)
        )
        assert manifest is not None
        proxy.inject(Fault("redirect"), path="/blobs/")
        with pytest.raises(EvidenceUnavailable, match=r"redirected .* to plain HTTP") as raised:
            await client.get_blob(image_ref(proxy.host, name), manifest.layers[0], Deadline.after(5))
    assert raised.value.transient is False
