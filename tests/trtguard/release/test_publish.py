"""trtguard/release/publish.py: uploads to a real registry, through the verifier's transport.

What is pushed is read back through the client; a refused step of the upload protocol says which, word for
word (pinned before the writer left the registry client).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import tiny_image
from tests.support.localregistry import LocalRegistry
from tests.verifier.registry.faults import DENIED, INJECTED, assert_definitive, image_ref, timed
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.registry._oci import OCI_MANIFEST, Descriptor
from verifier.registry.client import RegistryClient


async def test_blobs_are_uploaded_once(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry, tmp_path: Path
) -> None:
    ref = image_ref(registry.host, "publish/blobs:v1")
    deadline = Deadline.after(10)
    data = b"a blob " * 1000
    assert not await writer.blob_exists(
        ref, Descriptor.for_bytes("application/octet-stream", data).digest, deadline
    )
    descriptor = await writer.push_blob(ref, data, "application/octet-stream", deadline)
    assert await writer.blob_exists(ref, descriptor.digest, deadline)
    sent = dict(client.stats.requests)
    assert await writer.push_blob(ref, data, "application/octet-stream", deadline) == descriptor
    assert dict(client.stats.requests) == {**sent, "HEAD": sent["HEAD"] + 1}  # asked, not uploaded again
    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * 9000)  # more than one upload chunk
    streamed = await writer.push_blob_file(ref, path, "application/x-file", deadline, annotations={"a": "b"})
    assert (streamed.size, dict(streamed.annotations)) == (path.stat().st_size, {"a": "b"})
    assert await client.get_blob(ref, streamed, deadline) == path.read_bytes()


async def test_a_pushed_manifest_is_kept_as_verified_content(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    ref = image_ref(registry.host, "publish/manifest:v1")
    image = tiny_image()
    deadline = Deadline.after(10)
    for blob in image.blobs:
        await writer.push_blob(ref, blob.data, blob.media_type, deadline)
    pushed = await writer.push_manifest(ref, image.manifest, OCI_MANIFEST, deadline, tag="v1")
    assert (pushed.digest, pushed.size, pushed.subject_indexed) == (image.digest, len(image.manifest), False)
    sent = client.stats.total_requests
    manifest = await client.get_manifest(ref.with_digest(pushed.digest), deadline)
    assert manifest.data == image.manifest and client.stats.total_requests == sent
    assert await client.resolve(ref, deadline) == pushed.digest


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
    faulty: tuple[RegistryClient, FaultProxy], step: str, method: str, path: str, what: str
) -> None:
    client, proxy = faulty
    writer = RegistryWriter(client)
    name = f"publish/write-{step}"
    ref = image_ref(proxy.host, f"{name}:v1")
    image = tiny_image()
    proxy.inject(Fault.answer(403), method=method, path=path)
    deadline = Deadline.after(5)
    blob = image.blobs[0]
    if step == "manifest":
        error, _ = await timed(writer.push_manifest(ref, image.manifest, OCI_MANIFEST, deadline, tag="v1"))
    else:
        error, _ = await timed(writer.push_blob(ref, blob.data, blob.media_type, deadline))
    message = what.format(digest=blob.descriptor.digest, name=name)
    detail = "" if method == "HEAD" else INJECTED  # an answer to HEAD has no body to quote
    assert_definitive(
        error, f"{proxy.host} denied access to {message}{detail}", f"registry {proxy.host}", DENIED
    )
