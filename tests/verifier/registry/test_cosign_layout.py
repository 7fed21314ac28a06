"""verifier/registry/_cosign_layout.py: reading .sig/.att tags, referrers and the fallback index.

The connaisseur fixtures are real cosign ``.sig`` manifests and payload blobs from Docker Hub: they are
pushed verbatim under their tags and read back through the client and verifier.signatures. Writing the
layouts is tested with the release tooling (tests/trtguard/release/test_cosign_layout.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.connaisseur import ALICE_ONLY, CONNAISSEUR, KEYLESS, THREE_SIGNERS, fixture_manifest
from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from trtguard.release.cosign_layout import append_layer, cosign_config, push_referrer
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable, VerificationError
from verifier.base._references import ImageReference
from verifier.crypto._keys import PublicKey
from verifier.registry._cosign_layout import (
    DSSE_ENVELOPE,
    SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING,
    attestation_tag,
    list_referrers,
    read_attestations,
    read_referrer,
    read_signatures,
    referrers_tag,
    signature_tag,
)
from verifier.registry._oci import OCI_CONFIG, OCI_INDEX, OCI_MANIFEST, Descriptor, image_index
from verifier.registry.client import RegistryClient
from verifier.signatures import (
    CosignSignature,
    KeylessIdentity,
    TrustPolicy,
    TrustRoot,
    verify_image_signatures,
)


def test_tag_names() -> None:
    digest = "sha256:" + "ab" * 32
    assert signature_tag(digest) == f"sha256-{'ab' * 32}.sig"
    assert attestation_tag(digest) == f"sha256-{'ab' * 32}.att"
    assert referrers_tag(digest) == f"sha256-{'ab' * 32}"


async def _push_fixture(client: RegistryClient, ref: ImageReference, shared: Path, digest: str) -> bytes:
    """Push a connaisseur .sig manifest verbatim under its tag, with its payload blobs and cosign config."""
    data, manifest = fixture_manifest(shared, digest)
    deadline, writer = Deadline.after(10), RegistryWriter(client)
    layers = [Descriptor.from_json(layer, where="layer") for layer in manifest["layers"]]
    for layer in layers:
        blob = (shared / CONNAISSEUR / "blobs" / f"{layer.digest.replace(':', '-')}.json").read_bytes()
        await writer.push_blob(ref, blob, layer.media_type, deadline)
    await writer.push_blob(ref, cosign_config(layers), OCI_CONFIG, deadline)
    await writer.push_manifest(ref, data, OCI_MANIFEST, deadline, tag=signature_tag(digest))
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


async def test_an_index_at_a_sig_tag_is_refused_by_reader_and_writer(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/indexed:v1")
    digest = await push_image(client, ref, tiny_image())
    deadline = Deadline.after(10)
    tag = signature_tag(digest)
    await writer.push_manifest(ref, image_index([]), OCI_INDEX, deadline, tag=tag)
    message = f"{registry.host}/layout/indexed:{tag} is an index, not a cosign manifest"
    with pytest.raises(EvidenceUnavailable, match=message) as read:
        await read_signatures(client, ref, digest, deadline)
    with pytest.raises(EvidenceUnavailable, match=message) as written:
        await append_layer(
            writer, ref, tag, b"{}", media_type=SIMPLE_SIGNING, annotations={}, deadline=deadline
        )
    assert (read.value.transient, written.value.transient) == (False, False)


async def test_a_fallback_entry_about_another_artifact_is_ignored(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/tampered:v1")
    victim, other = tiny_image(), tiny_image()
    victim_digest = await push_image(client, ref, victim)
    await push_image(client, ImageReference(ref.registry, ref.repository, None, None), other)
    deadline = Deadline.after(10)
    foreign = await push_referrer(
        writer,
        ref,
        other.descriptor,
        artifact_type=DSSE_ENVELOPE,
        blob=b"{}",
        blob_media_type=DSSE_ENVELOPE,
        deadline=deadline,
    )
    # Someone with push access lists the other artifact's referrer under the victim's fallback tag.
    entry = Descriptor(OCI_MANIFEST, foreign.digest, foreign.size, artifact_type=DSSE_ENVELOPE)
    await writer.push_manifest(
        ref, image_index([entry]), OCI_INDEX, deadline, tag=referrers_tag(victim_digest)
    )
    (listed,) = await list_referrers(client, ref, victim_digest, deadline)
    assert await read_referrer(client, ref, listed, victim_digest, deadline) is None


async def test_a_fallback_tag_that_is_not_an_index_is_reported(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/layout/odd:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    await writer.push_manifest(
        ref, image.manifest, OCI_MANIFEST, Deadline.after(10), tag=referrers_tag(digest)
    )
    with pytest.raises(EvidenceUnavailable, match="not an index") as raised:
        await list_referrers(client, ref, digest, Deadline.after(10))
    assert raised.value.transient is False


async def test_a_registry_with_the_referrers_api(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry
) -> None:
    """Distribution 2.8 has no referrers API; the fault proxy answers for one, listing a real referrer."""
    ref = ImageReference.parse(f"{registry.host}/layout/api:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    pushed = await push_referrer(
        writer,
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
