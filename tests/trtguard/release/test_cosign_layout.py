"""trtguard/release/cosign_layout.py: writing .sig/.att layers and referrers as cosign and skopeo read them.

cosign's config is reproduced byte for byte (the connaisseur fixtures are real cosign ``.sig`` manifests);
what is written is read back through the verifier's reading side, on a real registry.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.connaisseur import ALICE_ONLY, KEYLESS, THREE_SIGNERS, fixture_manifest
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry
from trtguard.release.cosign_layout import append_layer, cosign_config, push_referrer, simple_signing_payload
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._references import ImageReference
from verifier.crypto._keys import generate_private_key
from verifier.registry._cosign_layout import (
    DSSE_ENVELOPE,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING,
    list_referrers,
    read_referrer,
    read_signatures,
    referrers_tag,
    signature_tag,
)
from verifier.registry._oci import OCI_INDEX, Descriptor
from verifier.registry.client import RegistryClient
from verifier.signatures import CosignSignature, TrustPolicy, verify_image_signatures


@pytest.mark.parametrize("digest", [ALICE_ONLY, THREE_SIGNERS, KEYLESS])
def test_cosign_config_is_byte_identical_to_cosigns(shared_fixtures: Path, digest: str) -> None:
    _, manifest = fixture_manifest(shared_fixtures, digest)
    layers = [Descriptor.from_json(layer, where="layer") for layer in manifest["layers"]]
    config = cosign_config(layers)
    assert f"sha256:{hashlib.sha256(config).hexdigest()}" == manifest["config"]["digest"]
    assert len(config) == manifest["config"]["size"]


async def test_append_keeps_other_signatures_and_skips_duplicates(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/signed:v1")
    digest = await push_image(client, ref, tiny_image())
    payload = simple_signing_payload(ref, digest)
    keys = {"first": generate_private_key(), "second": generate_private_key()}
    deadline = Deadline.after(10)
    for key in keys.values():
        annotations = {SIGNATURE_ANNOTATION: base64.b64encode(key.sign(payload)).decode()}
        pushed = await append_layer(
            writer,
            ref,
            signature_tag(digest),
            payload,
            media_type=SIMPLE_SIGNING,
            annotations=annotations,
            deadline=deadline,
        )
    again = await append_layer(
        writer,
        ref,
        signature_tag(digest),
        payload,
        media_type=SIMPLE_SIGNING,
        annotations=annotations,
        deadline=deadline,
    )
    assert again.digest == pushed.digest
    layers = await read_signatures(client, ref, digest, deadline)
    assert len(layers) == 2
    manifest = await client.get_manifest(ref, deadline, reference=signature_tag(digest))
    assert manifest is not None
    config = await client.get_blob(ref, manifest.config, deadline)
    assert config == cosign_config(manifest.layers)
    result = verify_image_signatures(
        digest,
        TrustPolicy(keys={name: key.public_key() for name, key in keys.items()}, threshold=2),
        classic=[CosignSignature.from_layer(s.payload, s.media_type, s.annotations) for s in layers],
        repository=ref.name,
    )
    assert sorted(result.keys) == ["first", "second"]


def test_simple_signing_payload_shape() -> None:
    ref = ImageReference.parse("registry.example/team/app:1.0")
    digest = "sha256:" + "c" * 64
    payload = simple_signing_payload(ref, digest, {"team": "ml", "build": "42"})
    assert payload == (
        b'{"critical":{"identity":{"docker-reference":"registry.example/team/app"},'
        b'"image":{"docker-manifest-digest":"sha256:' + b"c" * 64 + b'"},'
        b'"type":"cosign container image signature"},"optional":{"build":"42","team":"ml"}}'
    )
    assert json.loads(simple_signing_payload(ref, digest))["optional"] is None


async def test_referrers_through_the_fallback_index(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/referred:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    deadline = Deadline.after(10)
    first = await push_referrer(
        writer,
        ref,
        image.descriptor,
        artifact_type=DSSE_ENVELOPE,
        blob=b'{"one":1}',
        blob_media_type=DSSE_ENVELOPE,
        deadline=deadline,
    )
    assert first.subject_indexed is False  # distribution 2.8 does not process `subject`
    second = await push_referrer(
        writer,
        ref,
        image.descriptor,
        artifact_type="application/example",
        blob=b"two",
        blob_media_type="text/plain",
        deadline=deadline,
    )
    again = await push_referrer(
        writer,
        ref,
        image.descriptor,
        artifact_type=DSSE_ENVELOPE,
        blob=b'{"one":1}',
        blob_media_type=DSSE_ENVELOPE,
        deadline=deadline,
    )
    assert again.digest == first.digest
    listed = await list_referrers(client, ref, digest, deadline)
    assert [d.digest for d in listed] == [first.digest, second.digest]
    only = await list_referrers(client, ref, digest, deadline, artifact_types=[DSSE_ENVELOPE])
    assert [d.digest for d in only] == [first.digest]
    artifact = await read_referrer(client, ref, only[0], digest, deadline)
    assert artifact is not None and artifact.blob == b'{"one":1}'
    assert artifact.manifest.subject is not None and artifact.manifest.subject.digest == digest
    index = await client.get_manifest(ref, deadline, reference=referrers_tag(digest))
    assert index is not None and index.media_type == OCI_INDEX


SKOPEO = shutil.which("skopeo")


@pytest.mark.skipif(SKOPEO is None, reason="needs Debian's skopeo (apt-get install skopeo)")
async def test_containers_image_reads_and_writes_the_same_layout(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry, tmp_path: Path
) -> None:
    """An independent implementation (containers/image in skopeo) reads our .sig and writes one we read.

    Debian's skopeo cannot sign or verify sigstore signatures, but it carries them as attachments when
    ``use-sigstore-attachments`` is on for the registry.
    """
    assert SKOPEO is not None
    ref = ImageReference.parse(f"{registry.host}/interop/app:v1")
    digest = await push_image(client, ref, tiny_image())
    key = generate_private_key()
    payload = simple_signing_payload(ref, digest)
    signature = base64.b64encode(key.sign(payload)).decode()
    await append_layer(
        writer,
        ref,
        signature_tag(digest),
        payload,
        media_type=SIMPLE_SIGNING,
        annotations={SIGNATURE_ANNOTATION: signature},
        deadline=Deadline.after(10),
    )
    registries_d = tmp_path / "registries.d"
    registries_d.mkdir()
    (registries_d / "local.yaml").write_text(
        f'docker:\n  "{registry.host}":\n    use-sigstore-attachments: true\n'
    )
    base = [SKOPEO, "--insecure-policy", "--registries.d", str(registries_d), "copy"]
    out = tmp_path / "copied"

    def skopeo(*argv: str) -> None:
        done = subprocess.run([*base, *argv], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr

    await asyncio.to_thread(skopeo, "--src-tls-verify=false", f"docker://{ref}", f"dir:{out}")
    attachment = (out / "signature-1").read_bytes()
    prefix = b"\x00sigstore-json\n"
    assert attachment.startswith(prefix)
    document = json.loads(attachment[len(prefix) :])
    assert document["mimeType"] == SIMPLE_SIGNING
    assert base64.b64decode(document["payload"]) == payload
    assert document["annotations"] == {SIGNATURE_ANNOTATION: signature}

    copy = ImageReference.parse(f"{registry.host}/interop/copy:v1")
    await asyncio.to_thread(skopeo, "--dest-tls-verify=false", f"dir:{out}", f"docker://{copy}")
    layers = await read_signatures(client, copy, digest, Deadline.after(10))
    result = verify_image_signatures(
        digest,
        TrustPolicy(keys={"signer": key.public_key()}),
        classic=[CosignSignature.from_layer(s.payload, s.media_type, s.annotations) for s in layers],
        repository=ref.name,
    )
    assert result.keys == ("signer",)
    # And a signature appended by trtguard keeps the one containers/image wrote.
    second = generate_private_key()
    await append_layer(
        writer,
        copy,
        signature_tag(digest),
        payload,
        media_type=SIMPLE_SIGNING,
        annotations={SIGNATURE_ANNOTATION: base64.b64encode(second.sign(payload)).decode()},
        deadline=Deadline.after(10),
    )
    assert len(await read_signatures(client, copy, digest, Deadline.after(10))) == 2
