"""verifier/registry/cosign_layout.py: .sig/.att tags, referrers and the fallback index, on a real registry.

The connaisseur fixtures are real cosign ``.sig`` manifests and payload blobs from Docker Hub: they are
pushed verbatim under their tags and read back through the client and verifier.signatures.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from verifier.deadline import Deadline
from verifier.errors import EvidenceUnavailable, VerificationError
from verifier.keys import PublicKey, generate_private_key
from verifier.references import ImageReference
from verifier.registry.client import RegistryClient
from verifier.registry.cosign_layout import (
    DSSE_ENVELOPE,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING,
    append_layer,
    attestation_tag,
    cosign_config,
    list_referrers,
    push_referrer,
    read_attestations,
    read_referrer,
    read_signatures,
    referrers_tag,
    signature_tag,
    simple_signing_payload,
)
from verifier.registry.oci import OCI_CONFIG, OCI_INDEX, OCI_MANIFEST, Descriptor, image_index
from verifier.signatures import (
    CosignSignature,
    KeylessIdentity,
    TrustPolicy,
    TrustRoot,
    verify_image_signatures,
)

CONNAISSEUR = Path("cosign") / "connaisseur-registry"
ALICE_ONLY = "sha256:071bf7a986f1ca9cb2a1f0bc8392822a7777f90d58f2d2c6f271913e08de7c81"
THREE_SIGNERS = "sha256:bfec161fecb0a887df7cb85e4da327c65986ccda7060cf3cd92171c6c90d7533"
KEYLESS = "sha256:31dc72a13a0c34b40eb95419d2b2fd67320c856baf3b72da518023ee8d370aee"


def test_tag_names() -> None:
    digest = "sha256:" + "ab" * 32
    assert signature_tag(digest) == f"sha256-{'ab' * 32}.sig"
    assert attestation_tag(digest) == f"sha256-{'ab' * 32}.att"
    assert referrers_tag(digest) == f"sha256-{'ab' * 32}"


def _fixture_manifest(shared: Path, digest: str) -> tuple[bytes, dict[str, Any]]:
    data = (shared / CONNAISSEUR / "manifests" / f"{digest.replace(':', '-')}.sig.json").read_bytes()
    return data, json.loads(data)


@pytest.mark.parametrize("digest", [ALICE_ONLY, THREE_SIGNERS, KEYLESS])
def test_cosign_config_is_byte_identical_to_cosigns(shared_fixtures: Path, digest: str) -> None:
    _, manifest = _fixture_manifest(shared_fixtures, digest)
    layers = [Descriptor.from_json(layer, where="layer") for layer in manifest["layers"]]
    config = cosign_config(layers)
    assert f"sha256:{hashlib.sha256(config).hexdigest()}" == manifest["config"]["digest"]
    assert len(config) == manifest["config"]["size"]


async def _push_fixture(client: RegistryClient, ref: ImageReference, shared: Path, digest: str) -> bytes:
    """Push a connaisseur .sig manifest verbatim under its tag, with its payload blobs and cosign config."""
    data, manifest = _fixture_manifest(shared, digest)
    deadline = Deadline.after(10)
    layers = [Descriptor.from_json(layer, where="layer") for layer in manifest["layers"]]
    for layer in layers:
        blob = (shared / CONNAISSEUR / "blobs" / f"{layer.digest.replace(':', '-')}.json").read_bytes()
        await client.push_blob(ref, blob, layer.media_type, deadline)
    await client.push_blob(ref, cosign_config(layers), OCI_CONFIG, deadline)
    await client.push_manifest(ref, data, OCI_MANIFEST, deadline, tag=signature_tag(digest))
    return data


def _keys(shared: Path, *names: str) -> dict[str, PublicKey]:
    return {
        name: PublicKey.from_pem((shared / CONNAISSEUR / "keys" / f"{name}.pub").read_bytes())
        for name in names
    }


async def test_connaisseur_signatures_round_trip_through_the_registry(
    client: RegistryClient, registry: LocalRegistry, shared_fixtures: Path
) -> None:
    ref = ImageReference.parse(f"{registry.host}/securesystemsengineering/testimage")
    for digest in (ALICE_ONLY, THREE_SIGNERS):
        await _push_fixture(client, ref, shared_fixtures, digest)
    alice = await read_signatures(client, ref, ALICE_ONLY, Deadline.after(10))
    assert len(alice) == 1 and alice[0].media_type == SIMPLE_SIGNING
    assert alice[0].annotations.get(SIGNATURE_ANNOTATION)
    signed = [CosignSignature.from_layer(s.payload, s.media_type, s.annotations) for s in alice]
    result = verify_image_signatures(
        ALICE_ONLY,
        TrustPolicy(keys=_keys(shared_fixtures, "alice")),
        classic=signed,
        repository="docker.io/securesystemsengineering/testimage",
    )
    assert result.keys == ("alice",)

    three = await read_signatures(client, ref, THREE_SIGNERS, Deadline.after(10))
    assert len(three) == 3 and len({s.digest for s in three}) == 1
    layers = [CosignSignature.from_layer(s.payload, s.media_type, s.annotations) for s in three]
    result = verify_image_signatures(
        THREE_SIGNERS,
        TrustPolicy(keys=_keys(shared_fixtures, "alice", "bob", "charlie"), threshold=3),
        classic=layers,
    )
    assert sorted(result.keys) == ["alice", "bob", "charlie"]
    with pytest.raises(VerificationError):
        verify_image_signatures(
            THREE_SIGNERS, TrustPolicy(keys=_keys(shared_fixtures, "default")), classic=layers
        )
    # The signatures are about their own digests, not each other's.
    with pytest.raises(VerificationError):
        verify_image_signatures(ALICE_ONLY, TrustPolicy(keys=_keys(shared_fixtures, "alice")), classic=layers)


async def test_connaisseur_keyless_signature_round_trip(
    client: RegistryClient, registry: LocalRegistry, shared_fixtures: Path
) -> None:
    ref = ImageReference.parse(f"{registry.host}/phbelitz/rekor-test")
    await _push_fixture(client, ref, shared_fixtures, KEYLESS)
    (layer,) = await read_signatures(client, ref, KEYLESS, Deadline.after(10))
    signature = CosignSignature.from_layer(layer.payload, layer.media_type, layer.annotations)
    assert signature.certificate is not None and signature.rekor_bundle is not None
    policy = TrustPolicy(
        identities=(
            KeylessIdentity(
                issuer="https://github.com/login/oauth", subject="philipp.belitz@securesystems.de"
            ),
        ),
        trust_root=TrustRoot.from_file(shared_fixtures / "cosign" / "trust" / "prod-trusted_root.json"),
    )
    result = verify_image_signatures(KEYLESS, policy, classic=[signature])
    assert result.identities == ("philipp.belitz@securesystems.de (https://github.com/login/oauth)",)


async def test_no_sig_tag_means_no_signatures(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/unsigned:v1")
    digest = await push_image(client, ref, tiny_image())
    assert await read_signatures(client, ref, digest, Deadline.after(10)) == ()
    assert await read_attestations(client, ref, digest, Deadline.after(10)) == ()


async def test_append_keeps_other_signatures_and_skips_duplicates(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/signed:v1")
    digest = await push_image(client, ref, tiny_image())
    payload = simple_signing_payload(ref, digest)
    keys = {"first": generate_private_key(), "second": generate_private_key()}
    deadline = Deadline.after(10)
    for key in keys.values():
        annotations = {SIGNATURE_ANNOTATION: base64.b64encode(key.sign(payload)).decode()}
        pushed = await append_layer(
            client,
            ref,
            signature_tag(digest),
            payload,
            media_type=SIMPLE_SIGNING,
            annotations=annotations,
            deadline=deadline,
        )
    again = await append_layer(
        client,
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


async def test_referrers_through_the_fallback_index(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/referred:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    deadline = Deadline.after(10)
    first = await push_referrer(
        client,
        ref,
        image.descriptor,
        artifact_type=DSSE_ENVELOPE,
        blob=b'{"one":1}',
        blob_media_type=DSSE_ENVELOPE,
        deadline=deadline,
    )
    assert first.subject_indexed is False  # distribution 2.8 does not process `subject`
    second = await push_referrer(
        client,
        ref,
        image.descriptor,
        artifact_type="application/example",
        blob=b"two",
        blob_media_type="text/plain",
        deadline=deadline,
    )
    again = await push_referrer(
        client,
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


async def test_a_fallback_entry_about_another_artifact_is_ignored(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/tampered:v1")
    victim, other = tiny_image(), tiny_image()
    victim_digest = await push_image(client, ref, victim)
    await push_image(client, ImageReference(ref.registry, ref.repository, None, None), other)
    deadline = Deadline.after(10)
    foreign = await push_referrer(
        client,
        ref,
        other.descriptor,
        artifact_type=DSSE_ENVELOPE,
        blob=b"{}",
        blob_media_type=DSSE_ENVELOPE,
        deadline=deadline,
    )
    # Someone with push access lists the other artifact's referrer under the victim's fallback tag.
    entry = Descriptor(OCI_MANIFEST, foreign.digest, foreign.size, artifact_type=DSSE_ENVELOPE)
    await client.push_manifest(
        ref, image_index([entry]), OCI_INDEX, deadline, tag=referrers_tag(victim_digest)
    )
    (listed,) = await list_referrers(client, ref, victim_digest, deadline)
    assert await read_referrer(client, ref, listed, victim_digest, deadline) is None


async def test_a_fallback_tag_that_is_not_an_index_is_reported(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/odd:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    await client.push_manifest(
        ref, image.manifest, OCI_MANIFEST, Deadline.after(10), tag=referrers_tag(digest)
    )
    with pytest.raises(EvidenceUnavailable, match="not an index") as raised:
        await list_referrers(client, ref, digest, Deadline.after(10))
    assert raised.value.transient is False


SKOPEO = shutil.which("skopeo")


@pytest.mark.skipif(SKOPEO is None, reason="needs Debian's skopeo (apt-get install skopeo)")
async def test_containers_image_reads_and_writes_the_same_layout(
    client: RegistryClient, registry: LocalRegistry, tmp_path: Path
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
        client,
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
        client,
        copy,
        signature_tag(digest),
        payload,
        media_type=SIMPLE_SIGNING,
        annotations={SIGNATURE_ANNOTATION: base64.b64encode(second.sign(payload)).decode()},
        deadline=Deadline.after(10),
    )
    assert len(await read_signatures(client, copy, digest, Deadline.after(10))) == 2


async def test_a_registry_with_the_referrers_api(client: RegistryClient, registry: LocalRegistry) -> None:
    """Distribution 2.8 has no referrers API; the fault proxy answers for one, listing a real referrer."""
    ref = ImageReference.parse(f"{registry.host}/layout/api:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    pushed = await push_referrer(
        client,
        ref,
        image.descriptor,
        artifact_type=DSSE_ENVELOPE,
        blob=b'{"via":"api"}',
        blob_media_type=DSSE_ENVELOPE,
        deadline=Deadline.after(10),
    )
    listed = [
        Descriptor(OCI_MANIFEST, pushed.digest, pushed.size, artifact_type=DSSE_ENVELOPE),
        Descriptor(OCI_MANIFEST, "sha256:" + "7" * 64, 10, artifact_type="application/other"),
    ]
    host, port = registry.host.split(":")
    async with FaultProxy(host, int(port)) as proxy:
        proxy.inject(Fault.answer(200, body=image_index(listed), content_type=OCI_INDEX), path="/referrers/")
        async with RegistryClient(plain_config(proxy.host)) as through:
            via = ImageReference.parse(f"{proxy.host}/layout/api:v1")
            found = await list_referrers(
                through, via, digest, Deadline.after(10), artifact_types=[DSSE_ENVELOPE]
            )
            assert [d.digest for d in found] == [pushed.digest]
            artifact = await read_referrer(through, via, found[0], digest, Deadline.after(10))
            assert artifact is not None and artifact.blob == b'{"via":"api"}'
            filtered = await through.referrers(
                via, digest, Deadline.after(10), artifact_type="application/other"
            )
            assert filtered is not None and [d.artifact_type for d in filtered] == ["application/other"]
        assert proxy.count("GET", f"/referrers/{digest}") == 2
        assert proxy.count("GET", f"/manifests/{referrers_tag(digest)}") == 0  # no fallback needed
        proxy.clear()
        proxy.inject(Fault.answer(200, body=image.manifest, content_type=OCI_MANIFEST), path="/referrers/")
        async with RegistryClient(plain_config(proxy.host)) as through:
            via = ImageReference.parse(f"{proxy.host}/layout/api:v1")
            with pytest.raises(EvidenceUnavailable, match="not an index") as raised:
                await list_referrers(through, via, digest, Deadline.after(10))
        assert raised.value.transient is False
