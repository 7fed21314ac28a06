"""verifier/registry/evidence.py: RegistryEvidence against a real registry, fed into verifier.signatures."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from pathlib import Path

import pytest

from tests.support.faultproxy import Fault, FaultProxy
from tests.support.images import TinyImage, push_image, tiny_image
from tests.support.localregistry import LocalRegistry, plain_config
from trtguard.release._push_engine import push_engine
from trtguard.release.cosign_layout import append_layer, push_referrer, simple_signing_payload
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable, InputError, VerificationError
from verifier.base._files import MAX_DOCUMENT_BYTES
from verifier.base._references import ImageReference
from verifier.crypto._dsse import Envelope, sign_envelope
from verifier.crypto._intoto import (
    PAYLOAD_TYPE,
    ResourceDescriptor,
    Statement,
    sign_statement,
    statement_for_file,
)
from verifier.crypto._keys import PrivateKey, generate_private_key
from verifier.evidence import COSIGN_SIGN_PREDICATE, EvidenceSource
from verifier.evidence_choice import evidence_source
from verifier.evidence_folder import LocalEvidence
from verifier.registry._cosign_layout import (
    BUNDLE_CONTENT_ANNOTATION,
    BUNDLE_PREDICATE_ANNOTATION,
    DSSE_ENVELOPE,
    IN_TOTO_JSON,
    OPENPGP_STATEMENT,
    PGP_SIGNATURE,
    PREDICATE_TYPE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    SIGSTORE_BUNDLE,
    SIMPLE_SIGNING,
    attestation_tag,
    signature_tag,
)
from verifier.registry._oci import EMPTY_DESCRIPTOR, OCI_MANIFEST, Descriptor, image_manifest
from verifier.registry.client import RegistryClient
from verifier.registry.engine_artifact import ENGINE_ARTIFACT_TYPE, ENGINE_LAYER, TITLE_ANNOTATION
from verifier.registry.evidence import RegistryEvidence
from verifier.signatures import TrustPolicy, verify_attestation, verify_image_signatures
from verifier.signatures.notation import ARTIFACT_TYPE as NOTATION_SIGNATURE
from verifier.signatures.notation import JWS_MEDIA_TYPE, MAX_ENVELOPE_BYTES, MAX_NOTATION_SIGNATURES

BUILD = "https://trtguard.dev/attestations/engine-build/v1"


def _statement(digest: str, predicate_type: str, predicate: dict[str, object] | None = None) -> Statement:
    return Statement(
        subject=[ResourceDescriptor(digest={"sha256": digest.removeprefix("sha256:")})],
        predicate_type=predicate_type,
        predicate=predicate or {},
    )


def _keyed_bundle(envelope: Envelope, key: PrivateKey) -> bytes:
    """A cosign v3 style key-signed bundle (no transparency log entry)."""
    hint = base64.b64encode(hashlib.sha256(key.public_key().to_der()).digest()).decode()
    return json.dumps(
        {
            "mediaType": SIGSTORE_BUNDLE,
            "verificationMaterial": {"publicKey": {"hint": hint}, "tlogEntries": []},
            "dsseEnvelope": envelope.to_dict(),
        }
    ).encode()


async def _sign_classic(client: RegistryClient, ref: ImageReference, digest: str, key: PrivateKey) -> None:
    payload = simple_signing_payload(ref, digest)
    await append_layer(
        RegistryWriter(client),
        ref,
        signature_tag(digest),
        payload,
        media_type=SIMPLE_SIGNING,
        annotations={SIGNATURE_ANNOTATION: base64.b64encode(key.sign(payload)).decode()},
        deadline=Deadline.after(10),
    )


async def _sign_v3(client: RegistryClient, ref: ImageReference, image: TinyImage, key: PrivateKey) -> None:
    envelope = sign_statement(_statement(image.digest, COSIGN_SIGN_PREDICATE), key)
    await push_referrer(
        RegistryWriter(client),
        ref,
        image.descriptor,
        artifact_type=SIGSTORE_BUNDLE,
        blob=_keyed_bundle(envelope, key),
        blob_media_type=SIGSTORE_BUNDLE,
        annotations={
            BUNDLE_CONTENT_ANNOTATION: "dsse-envelope",
            BUNDLE_PREDICATE_ANNOTATION: COSIGN_SIGN_PREDICATE,
        },
        deadline=Deadline.after(10),
    )


async def _attach(
    client: RegistryClient,
    ref: ImageReference,
    subject: Descriptor,
    envelope: Envelope,
    statement_type: str | None = None,
) -> None:
    """Attach the way attach-attestation does: a .att layer and a DSSE referrer."""
    statement_type = statement_type or json.loads(envelope.payload)["predicateType"]
    data = envelope.to_json()
    await append_layer(
        RegistryWriter(client),
        ref,
        attestation_tag(subject.digest),
        data,
        media_type=DSSE_ENVELOPE,
        annotations={PREDICATE_TYPE_ANNOTATION: statement_type},
        deadline=Deadline.after(10),
    )
    await push_referrer(
        RegistryWriter(client),
        ref,
        subject,
        artifact_type=DSSE_ENVELOPE,
        blob=data,
        blob_media_type=DSSE_ENVELOPE,
        deadline=Deadline.after(10),
    )


def test_registry_evidence_is_an_evidence_source(client: RegistryClient) -> None:
    source: EvidenceSource = RegistryEvidence(client)
    assert source.description == "registry"
    assert source.concurrent_lookups


async def test_evidence_source_chooses_folder_registries_or_nothing(tmp_path: Path) -> None:
    folder, client = evidence_source(attestations=tmp_path, registry_config=None)
    assert isinstance(folder, LocalEvidence) and client is None
    registries, client = evidence_source(attestations=None, registry_config=None, registry=True)
    assert isinstance(registries, RegistryEvidence) and client is not None
    await client.aclose()
    empty, client = evidence_source(attestations=None, registry_config=None)
    assert isinstance(empty, LocalEvidence) and client is None
    assert empty.description == "no attestation folder given (--attestations)"
    with pytest.raises(EvidenceUnavailable, match="cannot be resolved offline"):
        await empty.resolve_digest(ImageReference.parse("r.example/a:1"), Deadline.after(1))


@pytest.mark.parametrize("registry", [True, False])
def test_evidence_source_refuses_a_folder_and_the_registries(tmp_path: Path, registry: bool) -> None:
    config = None if registry else tmp_path / "registries.yaml"
    with pytest.raises(InputError, match="are alternatives") as caught:
        evidence_source(attestations=tmp_path, registry_config=config, registry=registry)
    assert caught.value.hint == "check offline against a folder, or against the registries"


async def test_classic_and_v3_signatures_of_a_tagged_image(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/signed:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    classic_key, bundle_key = generate_private_key(), generate_private_key()
    await _sign_classic(client, ref, digest, classic_key)
    await _sign_v3(client, ref, image, bundle_key)
    evidence = RegistryEvidence(client)
    material = await evidence.image_signatures(ref, Deadline.after(10))  # a tag: judged by its digest
    assert material.digest == digest
    assert len(material.classic) == 1 and len(material.bundles) == 1
    policy = TrustPolicy(
        keys={"classic": classic_key.public_key(), "v3": bundle_key.public_key()}, threshold=2
    )
    result = verify_image_signatures(
        digest, policy, classic=material.classic, bundles=material.bundles, repository=ref.name
    )
    assert sorted(result.keys) == ["classic", "v3"]
    # The v3 bundle is handed in whole, not again as a bare statement (it would be counted twice).
    assert material.statements == ()
    assert COSIGN_SIGN_PREDICATE.encode() in base64.b64decode(
        json.loads(material.bundles[0])["dsseEnvelope"]["payload"]
    )
    # v3 signatures are not attestations.
    assert (await evidence.attestations(ref, Deadline.after(10))).attestations == ()


async def test_unsigned_image_has_empty_material(client: RegistryClient, registry: LocalRegistry) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/unsigned:v1")
    digest = await push_image(client, ref, tiny_image())
    material = await RegistryEvidence(client).image_signatures(ref, Deadline.after(10))
    assert material.digest == digest and material.classic == () and material.bundles == ()


async def test_attestations_from_att_and_referrers_are_deduplicated_and_filtered(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/attested:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    key = generate_private_key()
    sbom = sign_statement(_statement(digest, "https://cyclonedx.org/bom", {"components": []}), key)
    await _attach(client, ref, image.descriptor, sbom)
    # Found but about another artifact: left out.
    elsewhere = sign_statement(_statement("sha256:" + "9" * 64, BUILD), key)
    await _attach(client, ref, image.descriptor, elsewhere)
    # Garbage under the .att tag: skipped.
    await append_layer(
        RegistryWriter(client),
        ref,
        attestation_tag(digest),
        b"not json",
        media_type=DSSE_ENVELOPE,
        annotations={},
        deadline=Deadline.after(10),
    )
    # A cosign v3 attestation bundle: its envelope counts as an attestation.
    provenance = sign_statement(_statement(digest, "https://slsa.dev/provenance/v1"), key)
    await push_referrer(
        RegistryWriter(client),
        ref,
        image.descriptor,
        artifact_type=SIGSTORE_BUNDLE,
        blob=_keyed_bundle(provenance, key),
        blob_media_type=SIGSTORE_BUNDLE,
        deadline=Deadline.after(10),
    )
    found = (await RegistryEvidence(client).attestations(ref, Deadline.after(10))).attestations
    assert sorted(a.predicate_type for a in found) == [
        "https://cyclonedx.org/bom",
        "https://slsa.dev/provenance/v1",
    ]
    sbom_found = next(a for a in found if a.predicate_type == "https://cyclonedx.org/bom")
    assert sbom_found.envelope == sbom and sbom_found.subjects == {digest}
    result = verify_attestation(
        sbom_found.envelope, TrustPolicy(keys={"ci": key.public_key()}), subject_digest=digest
    )
    assert result.keys == ("ci",)


async def test_a_statement_too_deep_to_check_is_kept_as_unchecked(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    # attack 27 case J: a signed SBOM nested deeper than the parser goes was skipped with a log line, so an
    # older SBOM was judged as if it were the newest; it is returned as unchecked, of the type it claims
    ref = ImageReference.parse(f"{registry.host}/evidence/deep:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    key = generate_private_key()
    head = {"_type": "https://in-toto.io/Statement/v1", "subject": [{"digest": {"sha256": digest[7:]}}]}
    payload = json.dumps({**head, "predicateType": "https://cyclonedx.org/bom"})[:-1].encode()
    payload += b', "predicate": ' + b'{"components": [' * 3000 + b"{}" + b"]}" * 3000 + b"}"
    deep = sign_envelope(PAYLOAD_TYPE, payload, key)
    await _attach(client, ref, image.descriptor, deep, "https://cyclonedx.org/bom")
    found = await RegistryEvidence(client).attestations(ref, Deadline.after(10))
    assert found.attestations == ()
    assert [u.predicate_type for u in found.unchecked] == ["https://cyclonedx.org/bom"] * 2  # .att, referrer
    assert all(u.subjects == frozenset({digest}) and "nested too deeply" in u.reason for u in found.unchecked)


async def test_engine_artifact_subjects_and_build_manifest(
    client: RegistryClient, registry: LocalRegistry, tmp_path: Path
) -> None:
    engine = tmp_path / "model.plan"
    engine.write_bytes(b"engine bytes " * 100)
    calibration = tmp_path / "calib.cache"
    calibration.write_bytes(b"TRT-8601-EntropyCalibration2\n")
    to = ImageReference.parse(f"{registry.host}/evidence/engine:v1")
    artifact = await push_engine(
        RegistryWriter(client), to, engine, Deadline.after(30), calibration_cache=calibration
    )
    evidence = RegistryEvidence(client)
    subjects = await evidence.subjects(artifact.reference, Deadline.after(10))
    assert artifact.calibration_cache is not None
    assert (subjects.artifact, subjects.engine_file, subjects.calibration_cache_file, subjects.onnx_file) == (
        artifact.reference.digest,
        artifact.engine.digest,
        artifact.calibration_cache.digest,
        None,
    )
    # The calibration cache layer is mounted beside the engine, but never finds attestations about it.
    assert subjects.digests == {artifact.reference.digest, artifact.engine.digest}
    key = generate_private_key()
    build = sign_statement(statement_for_file(engine, BUILD, {"audit_id": "A-1"}), key)
    manifest = await client.get_manifest(artifact.reference, Deadline.after(10))
    assert manifest is not None
    await _attach(client, artifact.reference, manifest.descriptor, build)
    (found,) = (await evidence.attestations(to, Deadline.after(10))).attestations  # by tag
    assert found.predicate_type == BUILD and found.subjects == {artifact.engine.digest}


async def test_a_malformed_engine_artifact_is_refused(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/smuggled:v1")
    deadline, writer = Deadline.after(10), RegistryWriter(client)
    await writer.push_blob(ref, b"{}", EMPTY_DESCRIPTOR.media_type, deadline)
    engine = await writer.push_blob(ref, b"engine", ENGINE_LAYER, deadline)
    plugin = await writer.push_blob(ref, b"\x7fELF", "application/x-sharedlib", deadline)
    layers = [
        Descriptor(
            engine.media_type, engine.digest, engine.size, annotations={TITLE_ANNOTATION: "model.plan"}
        ),
        Descriptor(
            plugin.media_type, plugin.digest, plugin.size, annotations={TITLE_ANNOTATION: "plugin.so"}
        ),
    ]
    data = image_manifest(config=EMPTY_DESCRIPTOR, layers=layers, artifact_type=ENGINE_ARTIFACT_TYPE)
    await writer.push_manifest(ref, data, OCI_MANIFEST, deadline, tag="v1")
    # A definitive answer about the artifact (a violation), not a failure to check it (onError).
    with pytest.raises(VerificationError, match="not a well-formed engine artifact"):
        await RegistryEvidence(client).subjects(ref, deadline)


async def test_plain_images_and_indexes_stand_for_their_digest_only(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/plain:v1")
    digest = await push_image(client, ref, tiny_image())
    subjects = await RegistryEvidence(client).subjects(ref, Deadline.after(10))
    assert subjects.digests == {digest}
    assert subjects.engine_file is None


async def test_other_artifacts_stand_for_their_digest_only(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    # An artifact of another type may hold any file: its layers must not stand for it, or a signed
    # engine's digest could vouch for an artifact that also carries, say, a plugin library.
    ref = ImageReference.parse(f"{registry.host}/evidence/other-artifact:v1")
    deadline, writer = Deadline.after(10), RegistryWriter(client)
    await writer.push_blob(ref, b"{}", EMPTY_DESCRIPTOR.media_type, deadline)
    engine = await writer.push_blob(ref, b"engine", ENGINE_LAYER, deadline)
    plugin = await writer.push_blob(ref, b"\x7fELF", "application/x-sharedlib", deadline)
    data = image_manifest(
        config=EMPTY_DESCRIPTOR, layers=[engine, plugin], artifact_type="application/vnd.example.bundle.v1"
    )
    pushed = await writer.push_manifest(ref, data, OCI_MANIFEST, deadline, tag="v1")
    subjects = await RegistryEvidence(client).subjects(ref, deadline)
    assert subjects.digests == {pushed.digest}
    assert subjects.engine_file is None


async def test_registry_failures_keep_their_transient_flag(
    proxy: FaultProxy, registry: LocalRegistry, client: RegistryClient
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/failing:v1")
    digest = await push_image(client, ref, tiny_image())
    await _sign_classic(client, ref, digest, generate_private_key())
    through = ImageReference.parse(f"{proxy.host}/evidence/failing:v1")
    async with RegistryClient(plain_config(proxy.host)) as faulty:
        proxy.inject(Fault.answer(503), path=".sig")
        with pytest.raises(EvidenceUnavailable) as transient:
            await RegistryEvidence(faulty).image_signatures(through, Deadline.after(5))
        assert transient.value.transient and "answered 503 three times" in transient.value.message
        proxy.clear()
        proxy.inject(Fault("corrupt"), path=".sig")
        with pytest.raises(EvidenceUnavailable) as lying:
            await RegistryEvidence(faulty).image_signatures(through, Deadline.after(5))
        assert lying.value.transient is False and "the bytes hash to" in lying.value.message
        # A corrupt signature blob is one bad layer: left out (never verified), not the end of the look-up.
        proxy.clear()
        proxy.inject(Fault("corrupt"), path="/blobs/")
        material = await RegistryEvidence(faulty).image_signatures(through, Deadline.after(5))
        assert material.classic == ()


async def test_one_bad_attachment_hides_no_other_signature(
    proxy: FaultProxy, registry: LocalRegistry, client: RegistryClient
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/spoiled:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    key = generate_private_key()
    await _sign_classic(client, ref, digest, key)
    await _sign_v3(client, ref, image, key)
    # What anyone with push access could add: a referrer too large to be a signature, one whose manifest
    # goes missing, and a .sig layer whose blob goes missing.
    deadline = Deadline.after(30)
    huge = b" " * (MAX_DOCUMENT_BYTES + 1)

    async def junk(blob: bytes) -> str:
        pushed = await push_referrer(
            RegistryWriter(client),
            ref,
            image.descriptor,
            artifact_type=SIGSTORE_BUNDLE,
            blob=blob,
            blob_media_type=SIGSTORE_BUNDLE,
            deadline=deadline,
        )
        return pushed.digest

    await junk(huge)
    vanishing = await junk(b"{}")
    stale = b'{"critical": {}}'
    await append_layer(
        RegistryWriter(client),
        ref,
        signature_tag(digest),
        stale,
        media_type=SIMPLE_SIGNING,
        annotations={},
        deadline=deadline,
    )
    proxy.inject(Fault.answer(404), path=vanishing)
    proxy.inject(Fault.answer(404), path=f"sha256:{hashlib.sha256(stale).hexdigest()}")
    through = ImageReference.parse(f"{proxy.host}/evidence/spoiled:v1")
    async with RegistryClient(plain_config(proxy.host)) as faulty:
        material = await RegistryEvidence(faulty).image_signatures(through, Deadline.after(10))
    assert len(material.classic) == 1 and len(material.bundles) == 1
    result = verify_image_signatures(
        digest,
        TrustPolicy(keys={"k": key.public_key()}),
        classic=material.classic,
        bundles=material.bundles,
        repository=ref.name,
    )
    assert result.keys == ("k",)
    # The oversized blob was refused by its descriptor's size, without being downloaded.
    assert proxy.count("GET", f"sha256:{hashlib.sha256(huge).hexdigest()}") == 0


async def test_burst_of_100_lookups_of_a_new_signed_image_is_one_set_of_requests(
    proxy: FaultProxy, registry: LocalRegistry, client: RegistryClient
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/burst:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    key = generate_private_key()
    await _sign_classic(client, ref, digest, key)
    await _sign_v3(client, ref, image, key)
    through = ImageReference.parse(f"{proxy.host}/evidence/burst:v1")
    proxy.inject(Fault("delay", seconds=0.2))  # keep the 100 look-ups overlapping
    async with RegistryClient(plain_config(proxy.host)) as fresh:
        evidence = RegistryEvidence(fresh)
        results = await asyncio.gather(
            *(evidence.image_signatures(through, Deadline.after(20)) for _ in range(100))
        )
    assert all(r.digest == digest and len(r.classic) == 1 and len(r.bundles) == 1 for r in results)
    paths = [path for _, path in proxy.requests]
    assert len(paths) == len(set(paths)), f"repeated requests: {sorted(paths)}"
    # tag, .sig manifest, payload blob, referrers API, fallback index, bundle manifest, bundle blob
    assert len(paths) == 7


async def test_openpgp_referrers_of_one_statement_count_together_and_notation_ones_are_read(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    ref = ImageReference.parse(f"{registry.host}/evidence/openpgp:v1")
    image = tiny_image()
    digest = await push_image(client, ref, image)
    statement = _statement(digest, BUILD).to_json()
    for signer in (
        b"signature by alice",
        b"signature by bob",
    ):  # one referrer per signer, as two attaches push
        await push_referrer(
            RegistryWriter(client),
            ref,
            image.descriptor,
            artifact_type=OPENPGP_STATEMENT,
            blob=statement,
            blob_media_type=IN_TOTO_JSON,
            extra_layers=[(signer, PGP_SIGNATURE)],
            deadline=Deadline.after(10),
        )
    # The second attach of the same signature is not pushed twice.
    await push_referrer(
        RegistryWriter(client),
        ref,
        image.descriptor,
        artifact_type=OPENPGP_STATEMENT,
        blob=statement,
        blob_media_type=IN_TOTO_JSON,
        extra_layers=[(b"signature by bob", PGP_SIGNATURE)],
        deadline=Deadline.after(10),
    )
    [found] = (await RegistryEvidence(client).attestations(ref, Deadline.after(10))).attestations
    assert found.envelope.payload == statement and not found.envelope.signatures
    assert sorted(found.openpgp_signatures) == [b"signature by alice", b"signature by bob"]
    for media_type in (JWS_MEDIA_TYPE, "application/unknown"):  # an unknown envelope type is skipped
        await push_referrer(
            RegistryWriter(client),
            ref,
            image.descriptor,
            artifact_type=NOTATION_SIGNATURE,
            blob=b"an envelope of type " + media_type.encode(),
            blob_media_type=media_type,
            deadline=Deadline.after(10),
        )
    signatures = await RegistryEvidence(client).image_signatures(ref, Deadline.after(10))
    assert [(s.envelope, s.media_type) for s in signatures.notation] == [
        (b"an envelope of type application/jose+json", JWS_MEDIA_TYPE)
    ]
    assert signatures.count == 1


async def test_notation_referrers_are_bounded_in_size_and_number(
    client: RegistryClient, registry: LocalRegistry
) -> None:
    """D1 (issue 25): an envelope above MAX_ENVELOPE_BYTES is left out unread (it fails only itself); more
    than MAX_NOTATION_SIGNATURES signature manifests are refused before any is read."""
    ref = ImageReference.parse(f"{registry.host}/evidence/notation-bounds:v1")
    image = tiny_image()
    await push_image(client, ref, image)

    async def attach(blob: bytes) -> None:
        await push_referrer(
            RegistryWriter(client),
            ref,
            image.descriptor,
            artifact_type=NOTATION_SIGNATURE,
            blob=blob,
            blob_media_type=JWS_MEDIA_TYPE,
            deadline=Deadline.after(10),
        )

    await attach(b"{" + b" " * MAX_ENVELOPE_BYTES + b"}")
    await attach(b"a small envelope")
    signatures = await RegistryEvidence(client).image_signatures(ref, Deadline.after(10))
    assert [s.envelope for s in signatures.notation] == [b"a small envelope"]
    for number in range(MAX_NOTATION_SIGNATURES - 1):
        await attach(f"envelope {number}".encode())
    with pytest.raises(EvidenceUnavailable, match=f"{MAX_NOTATION_SIGNATURES + 1} referrers") as refused:
        await RegistryEvidence(client).image_signatures(ref, Deadline.after(10))
    assert not refused.value.transient
