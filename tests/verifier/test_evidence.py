"""verifier.evidence.LocalEvidence: a folder of DSSE envelopes, Sigstore bundles and OCI manifests."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from verifier.base._deadline import Deadline
from verifier.base._digests import sha256_bytes
from verifier.base._errors import EvidenceUnavailable, InputError, VerificationError
from verifier.base._references import ImageReference
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor, Statement
from verifier.crypto._keys import PrivateKey, generate_private_key
from verifier.evidence import COSIGN_SIGN_PREDICATE
from verifier.evidence_documents import classic_signature_document
from verifier.evidence_folder import LocalEvidence
from verifier.registry._oci import Descriptor
from verifier.registry.engine_artifact import (
    ENGINE_LAYER,
    TITLE_ANNOTATION,
    engine_artifact_manifest,
    engine_layer,
)
from verifier.signatures import MAX_SIGNATURE_BYTES, CosignSignature, TrustPolicy, verify_image_signatures

SUBJECT = "ab" * 32
T = TypeVar("T")


def envelope_json(subject: str = SUBJECT, predicate_type: str = "https://example.com/p") -> bytes:
    statement = Statement(
        subject=[ResourceDescriptor(digest={"sha256": subject})], predicate_type=predicate_type
    )
    return sign_envelope(PAYLOAD_TYPE, statement.to_json(), generate_private_key()).to_json()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def test_envelopes_bundles_and_json_lines(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(envelope_json())
    bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "dsseEnvelope": json.loads(envelope_json(predicate_type=COSIGN_SIGN_PREDICATE)),
    }
    (tmp_path / "b.sigstore.json").write_text(json.dumps(bundle))
    (tmp_path / "c.jsonl").write_bytes(envelope_json() + b"\n\n" + envelope_json(subject="cd" * 32) + b"\n")
    (tmp_path / "README.md").write_text("ignored")
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/a/b@sha256:{SUBJECT}")
    found = run(evidence.attestations(ref, Deadline.never())).attestations
    assert sorted(a.origin.rsplit("/", 1)[1] for a in found) == ["a.json", "c.jsonl:1"]
    # A signing bundle is a signature, kept whole (a keyless one needs its certificate), not an attestation.
    signatures = run(evidence.image_signatures(ref, Deadline.never()))
    assert signatures.statements == ()
    assert [json.loads(b)["mediaType"] for b in signatures.bundles] == [bundle["mediaType"]]


def _engine_artifact(*layers: Descriptor) -> bytes:
    return engine_artifact_manifest(layers or [engine_layer("model.plan", SUBJECT, 1)])


def test_engine_artifact_manifest_maps_an_artifact_to_its_layers(tmp_path: Path) -> None:
    manifest = _engine_artifact()
    (tmp_path / "artifact.json").write_bytes(manifest)
    (tmp_path / "att.json").write_bytes(envelope_json())
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/models/m@sha256:{sha256_bytes(manifest)}")
    subjects = run(evidence.subjects(ref, Deadline.never()))
    assert (subjects.artifact, subjects.engine_file) == (ref.digest, f"sha256:{SUBJECT}")
    assert subjects.digests == {ref.digest, f"sha256:{SUBJECT}"}
    assert len(run(evidence.attestations(ref, Deadline.never())).attestations) == 1
    assert evidence.skipped == ()


@pytest.mark.parametrize(
    "manifest",
    [
        {"artifactType": "application/vnd.example.bundle.v1"},
        {},  # a plain image: its config type is an image config's
    ],
    ids=["other-artifact", "image"],
)
def test_other_manifests_stand_for_their_digest_only(tmp_path: Path, manifest: dict[str, Any]) -> None:
    document = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": f"sha256:{'0' * 64}",
            "size": 2,
        },
        "layers": [{"mediaType": ENGINE_LAYER, "digest": f"sha256:{SUBJECT}", "size": 1}],
        **manifest,
    }
    data = json.dumps(document).encode()
    (tmp_path / "artifact.json").write_bytes(data)
    (tmp_path / "att.json").write_bytes(envelope_json())
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/models/m@sha256:{sha256_bytes(data)}")
    subjects = run(evidence.subjects(ref, Deadline.never()))
    assert subjects.digests == {ref.digest}
    assert subjects.engine_file is None
    assert run(evidence.attestations(ref, Deadline.never())).attestations == ()
    assert evidence.skipped == ()  # its descriptor is kept (what a Notation signature names), nothing else
    signatures = run(evidence.image_signatures(ref, Deadline.never()))
    assert signatures.descriptor is not None and signatures.descriptor.size == len(data)


def test_a_malformed_engine_artifact_is_refused(tmp_path: Path) -> None:
    manifest = _engine_artifact(
        engine_layer("model.plan", SUBJECT, 1),
        Descriptor(
            "application/x-sharedlib", f"sha256:{'cd' * 32}", 4, annotations={TITLE_ANNOTATION: "p.so"}
        ),
    )
    (tmp_path / "artifact.json").write_bytes(manifest)
    ref = ImageReference.parse(f"quay.io/models/m@sha256:{sha256_bytes(manifest)}")
    # A definitive answer about the artifact (a violation), not a failure to check it (onError).
    with pytest.raises(VerificationError, match="not a well-formed engine artifact"):
        run(LocalEvidence(tmp_path).subjects(ref, Deadline.never()))


def test_tags_cannot_be_resolved_offline(tmp_path: Path) -> None:
    with pytest.raises(EvidenceUnavailable, match="cannot be resolved offline") as caught:
        run(LocalEvidence(tmp_path).resolve_digest(ImageReference.parse("quay.io/a/b:1"), Deadline.never()))
    assert caught.value.transient is False


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not JSON"),
        (b'{"kind": "Pod"}', "neither a DSSE envelope"),
        (
            b'{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": []}',
            "invalid in-toto statement",
        ),
        (b'{"mediaType": "application/vnd.oci.image.manifest.v1+json"}', "not a valid OCI manifest"),
    ],
)
def test_malformed_files_fail_only_themselves_and_are_listed_with_why(
    tmp_path: Path, content: bytes, message: str
) -> None:
    # Issue 24 item 11: a broken or hostile file beside valid evidence fails only itself (it was an input
    # error that failed every check of the folder), as a registry's unreadable attachment is skipped.
    (tmp_path / "bad.json").write_bytes(content)
    (tmp_path / "good.json").write_bytes(envelope_json())
    (tmp_path / "lines.jsonl").write_bytes(content.replace(b"\n", b" ") + b"\n" + envelope_json() + b"\n")
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/a/b@sha256:{SUBJECT}")
    found = run(evidence.attestations(ref, Deadline.never())).attestations
    assert sorted(a.origin for a in found) == [str(tmp_path / "good.json"), f"{tmp_path / 'lines.jsonl'}:2"]
    reasons = {s.location: s.reason for s in evidence.skipped}
    assert reasons.keys() == {str(tmp_path / "bad.json"), f"{tmp_path / 'lines.jsonl'}:1"}
    assert all(r.startswith("refused, it counts for nothing: ") and message in r for r in reasons.values())


def test_a_file_over_the_size_limit_fails_only_itself(tmp_path: Path) -> None:
    (tmp_path / "huge.json").write_bytes(b" " * (16 * 1024 * 1024 + 1))
    (tmp_path / "good.json").write_bytes(envelope_json())
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/a/b@sha256:{SUBJECT}")
    assert len(run(evidence.attestations(ref, Deadline.never())).attestations) == 1
    [skipped] = evidence.skipped
    assert "larger than 16 MiB" in skipped.reason


def test_unsupported_files_are_skipped_with_their_reason(tmp_path: Path) -> None:
    message_bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"publicKey": {"hint": "x"}},
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": "AA=="},
            "signature": "AA==",
        },
    }
    (tmp_path / "blob.sigstore.json").write_text(json.dumps(message_bundle))
    (tmp_path / "plain.dsse").write_bytes(
        sign_envelope("text/plain", b"hello", generate_private_key()).to_json()
    )
    (tmp_path / "good.json").write_bytes(envelope_json())
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/a/b@sha256:{SUBJECT}")
    (found,) = run(evidence.attestations(ref, Deadline.never())).attestations
    assert found.origin == str(tmp_path / "good.json")
    signatures = run(evidence.image_signatures(ref, Deadline.never()))
    assert signatures.count == 0
    reasons = {Path(s.location).name: s.reason for s in evidence.skipped}
    assert "message signature" in reasons["blob.sigstore.json"]
    assert "payload type 'text/plain'" in reasons["plain.dsse"]


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        LocalEvidence(tmp_path / "absent")
    assert "no attestation folder" in LocalEvidence().description


def _classic(repository: str, digest: str, key: PrivateKey) -> CosignSignature:
    payload = json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": repository},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        }
    ).encode()
    return CosignSignature(payload=payload, signature=base64.b64encode(key.sign(payload)).decode())


def test_classic_signatures_and_message_signature_bundles_count_as_image_signatures(tmp_path: Path) -> None:
    key = generate_private_key()
    digest = f"sha256:{SUBJECT}"
    signature = _classic("quay.io/a/b", digest, key)
    (tmp_path / "sig.cosign.json").write_bytes(classic_signature_document(signature))
    message = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"publicKey": {"hint": "x"}},
        "messageSignature": {
            "messageDigest": {
                "algorithm": "SHA2_256",
                "digest": base64.b64encode(bytes.fromhex(SUBJECT)).decode(),
            },
            "signature": "AA==",
        },
    }
    (tmp_path / "message.sigstore.json").write_text(json.dumps(message))
    evidence = LocalEvidence(tmp_path)
    found = run(evidence.image_signatures(ImageReference.parse(f"quay.io/a/b@{digest}"), Deadline.never()))
    assert found.classic == (signature,)
    assert [json.loads(b)["messageSignature"]["signature"] for b in found.bundles] == ["AA=="]
    policy = TrustPolicy(keys={"k": key.public_key()})
    assert verify_image_signatures(digest, policy, classic=found.classic, repository="quay.io/a/b").keys == (
        "k",
    )
    assert evidence.skipped == ()


def test_a_broken_classic_signature_document_is_left_out_with_why(tmp_path: Path) -> None:
    (tmp_path / "sig.cosign.json").write_text(
        json.dumps({"payload": "not base64!", "signature": "x", "media_type": "m"})
    )
    [skipped] = LocalEvidence(tmp_path).skipped
    assert "exactly the keys" in skipped.reason


def test_evidence_in_a_repository_folder_counts_for_that_repository_only(tmp_path: Path) -> None:
    """The layout fetch-attestations writes: a registry keeps evidence per repository, and so does the
    folder, so that an artifact copied to another repository does not bring the first one's evidence."""
    scoped = tmp_path / "quay.io" / "team" / "good" / f"sha256-{SUBJECT}"
    scoped.mkdir(parents=True)
    (scoped / "attestation-1.dsse.json").write_bytes(envelope_json())
    (tmp_path / "loose.dsse.json").write_bytes(envelope_json(predicate_type="https://example.com/loose"))
    evidence = LocalEvidence(tmp_path)

    def predicates(repository: str) -> set[str]:
        ref = ImageReference.parse(f"{repository}@sha256:{SUBJECT}")
        return {a.predicate_type for a in run(evidence.attestations(ref, Deadline.never())).attestations}

    assert predicates("quay.io/team/good") == {"https://example.com/p", "https://example.com/loose"}
    assert predicates("quay.io/team/mirror") == {"https://example.com/loose"}


def test_a_manifest_without_a_media_type_gives_its_descriptor(tmp_path: Path) -> None:
    # OCI lets a manifest leave mediaType out; fetch-attestations copies it byte for byte for Notation.
    data = json.dumps(
        {
            "schemaVersion": 2,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": f"sha256:{'0' * 64}",
                "size": 2,
            },
            "layers": [],
        }
    ).encode()
    (tmp_path / "manifest.json").write_bytes(data)
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/models/m@sha256:{sha256_bytes(data)}")
    found = run(evidence.image_signatures(ref, Deadline.never())).descriptor
    assert found is not None
    assert (found.media_type, found.size) == ("application/vnd.oci.image.manifest.v1+json", len(data))


@pytest.mark.parametrize("media_type", [[], {}, ["application/vnd.oci.image.manifest.v1+json"]])
def test_a_media_type_of_another_json_type_is_refused_not_a_crash(tmp_path: Path, media_type: Any) -> None:
    # Found by tests/verifier/test_hostile_evidence.py: an unhashable mediaType raised TypeError (a traceback
    # for the whole check) where the folder looked the type up.
    document = {"schemaVersion": 2, "mediaType": media_type, "layers": []}
    (tmp_path / "odd.json").write_text(json.dumps(document))
    [skipped] = LocalEvidence(tmp_path).skipped
    assert skipped.reason.startswith("refused, it counts for nothing: ")


def test_files_beside_a_statement_are_its_detached_signatures_and_nothing_else(tmp_path: Path) -> None:
    """``X.json.<kind>`` beside a bare statement ``X.json`` is a detached signature of that kind, for
    whichever format signs so (the folder names none); beside an envelope it changes nothing; one that
    cannot be read fails only itself."""
    statement = Statement(
        subject=[ResourceDescriptor(digest={"sha256": SUBJECT})], predicate_type="p"
    ).to_json()
    (tmp_path / "bare.json").write_bytes(statement)
    (tmp_path / "bare.json.ed25519").write_bytes(b"one")
    (tmp_path / "bare.json.toy").write_bytes(b"two")
    (tmp_path / "bare.json.huge").write_bytes(b"x" * (MAX_SIGNATURE_BYTES + 1))
    (tmp_path / "signed.json").write_bytes(envelope_json())
    (tmp_path / "signed.json.sha256").write_text("a checksum, not a signature")
    evidence = LocalEvidence(tmp_path)
    ref = ImageReference.parse(f"quay.io/a/b@sha256:{SUBJECT}")
    found = {
        a.origin.split(" ")[0].rsplit("/", 1)[1]: a
        for a in run(evidence.attestations(ref, Deadline.never())).attestations
    }
    assert found["bare.json"].detached == (("ed25519", b"one"), ("toy", b"two"))
    assert found["bare.json"].openpgp_signatures == ()
    assert found["bare.json"].envelope.payload == statement
    assert found["signed.json"].detached == ()
    assert found["signed.json"].envelope.signatures  # read as the DSSE envelope it is
    assert [s.location.rsplit("/", 1)[1] for s in evidence.skipped] == ["bare.json.huge"]
