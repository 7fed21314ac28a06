"""verifier.signatures with material made here: real keys, real signatures, a local Rekor key.

The public interop vectors (cosign, containers/image, Connaisseur, Sigstore conformance) are in
test_signatures_interop.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography import x509

from tests.support import local_rekor
from verifier import signatures
from verifier.base._errors import InputError, VerificationError
from verifier.crypto import _dsse as dsse
from verifier.crypto import _intoto as intoto
from verifier.crypto import _keys as keys
from verifier.crypto._keys import PrivateKey, PublicKey
from verifier.signatures import (
    COSIGN_SIGN_PREDICATE,
    CosignSignature,
    KeylessIdentity,
    NoSignatures,
    TrustPolicy,
    TrustRoot,
)

IMAGE = "sha256:" + hashlib.sha256(b"an image manifest").hexdigest()
OTHER_IMAGE = "sha256:" + hashlib.sha256(b"another manifest").hexdigest()
REPOSITORY = "registry.example.com/inference/trt"


@pytest.fixture(scope="module")
def signer() -> dict[str, PrivateKey]:
    return {name: keys.generate_private_key() for name in ("alice", "bob", "carol", "rekor")}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def simple_signing(digest: str = IMAGE, reference: str = REPOSITORY, **critical: Any) -> bytes:
    document = {
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
            **critical,
        },
        "optional": None,
    }
    return json.dumps(document).encode()


def classic(key: PrivateKey, payload: bytes | None = None, **fields: Any) -> CosignSignature:
    payload = simple_signing() if payload is None else payload
    return CosignSignature(payload=payload, signature=_b64(key.sign(payload)), **fields)


def policy(signer: Mapping[str, PrivateKey], *names: str, **options: Any) -> TrustPolicy:
    return TrustPolicy(keys={name: signer[name].public_key() for name in names}, **options)


def rekor_entry(
    rekor: PrivateKey, body: dict[str, Any], *, integrated_time: int = 1_700_000_000
) -> dict[str, Any]:
    payload: dict[str, str | int] = {
        "body": _b64(json.dumps(body).encode()),
        "integratedTime": integrated_time,
        "logID": rekor.public_key().key_id,
        "logIndex": 42,
    }
    return {"SignedEntryTimestamp": _b64(rekor.sign(rfc8785.dumps(payload))), "Payload": payload}


def hashedrekord(data: bytes, signature: bytes, key: PublicKey) -> dict[str, Any]:
    return {
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(data).hexdigest()}},
            "signature": {"content": _b64(signature), "publicKey": {"content": _b64(key.to_pem())}},
        },
    }


# --- classic signatures ---------------------------------------------------------------------------------


def test_classic_signature_by_a_trusted_key(signer: dict[str, PrivateKey]) -> None:
    result = signatures.verify_image_signatures(
        IMAGE, policy(signer, "alice"), classic=[classic(signer["alice"])], repository=REPOSITORY
    )
    assert (result.keys, result.identities, result.verified, result.threshold) == (("alice",), (), 1, 1)
    assert result.tlog_verified is False
    assert result.summary() == "1 of 1 required signers: keys [alice]"


def test_no_signature_at_all_is_its_own_error(signer: dict[str, PrivateKey]) -> None:
    with pytest.raises(NoSignatures, match=f"no signature found for {IMAGE}") as raised:
        signatures.verify_image_signatures(IMAGE, policy(signer, "alice"), location="image x")
    assert raised.value.location == "image x"
    assert raised.value.exit_code == 1


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda s: classic(s["carol"]), "signature present but not made by any trusted key"),
        (
            lambda s: CosignSignature(
                payload=simple_signing() + b" ", signature=classic(s["alice"]).signature
            ),
            "signature present but not made by any trusted key",
        ),
        (lambda s: classic(s["alice"], simple_signing(OTHER_IMAGE)), f"the signature is for {OTHER_IMAGE}"),
        (
            lambda s: classic(s["alice"], simple_signing(type="something else")),
            "type is 'something else'",
        ),
        (lambda s: classic(s["alice"], b"not json"), "the signed payload is not JSON"),
        (lambda s: classic(s["alice"], b'{"critical": []}'), "critical section is not an object"),
        (
            lambda s: CosignSignature(payload=simple_signing(), signature=""),
            "no dev.cosignproject.cosign/signature",
        ),
        (lambda s: CosignSignature(payload=simple_signing(), signature="@@@"), "not valid base64"),
        (
            lambda s: classic(s["alice"], media_type="application/vnd.dsse.envelope.v1+json"),
            "is not a cosign simple-signing payload",
        ),
    ],
    ids=[
        "wrong-key",
        "payload-changed",
        "digest",
        "type",
        "not-json",
        "shape",
        "no-annotation",
        "base64",
        "media",
    ],
)
def test_classic_signature_rejections_name_the_reason(
    signer: dict[str, PrivateKey], make: Callable[[dict[str, PrivateKey]], Any], reason: str
) -> None:
    with pytest.raises(VerificationError) as raised:
        signatures.verify_image_signatures(IMAGE, policy(signer, "alice", "bob"), classic=[make(signer)])
    assert not isinstance(raised.value, NoSignatures)
    message = raised.value.message
    assert message.startswith("0 of 1 required signatures from keys [alice, bob] (signature 1: ")
    assert reason in message


def test_repository_check_ignores_tags_and_normalises_names(signer: dict[str, PrivateKey]) -> None:
    tagged = classic(signer["alice"], simple_signing(reference=f"{REPOSITORY}:v1"))
    assert signatures.verify_image_signatures(
        IMAGE, policy(signer, "alice"), classic=[tagged], repository=REPOSITORY
    )
    hub = classic(signer["alice"], simple_signing(reference="index.docker.io/library/nginx"))
    assert signatures.verify_image_signatures(
        IMAGE, policy(signer, "alice"), classic=[hub], repository="docker.io/library/nginx"
    )
    with pytest.raises(VerificationError, match=r"is for repository registry\.example\.com/other, not"):
        signatures.verify_image_signatures(
            IMAGE,
            policy(signer, "alice"),
            classic=[classic(signer["alice"], simple_signing(reference="registry.example.com/other"))],
            repository=REPOSITORY,
        )
    with pytest.raises(VerificationError, match="is not a valid reference"):
        signatures.verify_image_signatures(
            IMAGE,
            policy(signer, "alice"),
            classic=[classic(signer["alice"], simple_signing(reference="UPPER/Case"))],
            repository=REPOSITORY,
        )


def test_threshold_counts_distinct_keys(signer: dict[str, PrivateKey]) -> None:
    two = [classic(signer["alice"]), classic(signer["alice"]), classic(signer["carol"])]
    with pytest.raises(VerificationError) as raised:
        signatures.verify_image_signatures(IMAGE, policy(signer, "alice", "bob", threshold=2), classic=two)
    assert raised.value.message.startswith("1 of 2 required signatures from keys [alice, bob] (signature 3: ")
    both = [classic(signer["alice"]), classic(signer["carol"]), classic(signer["bob"])]
    result = signatures.verify_image_signatures(
        IMAGE, policy(signer, "alice", "bob", threshold=2), classic=both
    )
    assert (result.keys, result.verified) == (("alice", "bob"), 2)


def test_one_key_under_two_names_is_one_signer(signer: dict[str, PrivateKey]) -> None:
    same = TrustPolicy(keys={"a": signer["alice"].public_key(), "b": signer["alice"].public_key()})
    result = signatures.verify_image_signatures(IMAGE, same, classic=[classic(signer["alice"])])
    assert (result.keys, result.verified) == (("a", "b"), 1)
    with pytest.raises(InputError, match="threshold 2 cannot be met by 1 distinct key"):
        TrustPolicy(keys=dict(same.keys), threshold=2)


def test_invalid_image_digest_is_an_input_error(signer: dict[str, PrivateKey]) -> None:
    with pytest.raises(InputError, match="image digest"):
        signatures.verify_image_signatures(
            "sha256:abc", policy(signer, "alice"), classic=[classic(signer["alice"])]
        )


def test_from_layer_reads_the_cosign_annotations() -> None:
    layer = CosignSignature.from_layer(
        b"{}",
        signatures.SIMPLE_SIGNING_MEDIA_TYPE,
        {
            signatures.SIGNATURE_ANNOTATION: "c2ln",
            signatures.CERTIFICATE_ANNOTATION: "cert",
            signatures.CHAIN_ANNOTATION: "chain",
            signatures.BUNDLE_ANNOTATION: "{}",
        },
    )
    assert (layer.signature, layer.certificate, layer.chain, layer.rekor_bundle) == (
        "c2ln",
        "cert",
        "chain",
        "{}",
    )
    assert CosignSignature.from_layer(b"{}", "text/plain", {}).signature == ""


# --- Rekor SET (classic) --------------------------------------------------------------------------------


def with_rekor(
    signer: dict[str, PrivateKey], key_name: str = "alice", **entry_options: Any
) -> CosignSignature:
    payload = simple_signing()
    signature = signer[key_name].sign(payload)
    entry = rekor_entry(
        signer["rekor"], hashedrekord(payload, signature, signer[key_name].public_key()), **entry_options
    )
    return CosignSignature(payload=payload, signature=_b64(signature), rekor_bundle=json.dumps(entry))


def test_rekor_set_is_checked_when_the_policy_requires_a_log(signer: dict[str, PrivateKey]) -> None:
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    result = signatures.verify_image_signatures(IMAGE, trust, classic=[with_rekor(signer)])
    assert result.tlog_verified is True


def _tamper_entry(signature: CosignSignature, change: Callable[[dict[str, Any]], object]) -> CosignSignature:
    assert signature.rekor_bundle is not None
    entry = json.loads(signature.rekor_bundle)
    change(entry)
    return CosignSignature(
        payload=signature.payload, signature=signature.signature, rekor_bundle=json.dumps(entry)
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: e["Payload"].update(logIndex=43), "signed entry timestamp (SET) does not verify"),
        (lambda e: e["Payload"].update(logID="00" * 32), "unknown log"),
        (lambda e: e.update(SignedEntryTimestamp="***"), "not valid base64"),
        (lambda e: e.pop("Payload"), "Rekor bundle annotation is malformed"),
        (lambda e: e["Payload"].update(integratedTime="1700000000"), "fields of the wrong type"),
    ],
    ids=["set", "log-id", "set-base64", "shape", "types"],
)
def test_rekor_entry_tampering_is_detected(
    signer: dict[str, PrivateKey], change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    with pytest.raises(VerificationError, match=reason.replace("(", "\\(").replace(")", "\\)")):
        signatures.verify_image_signatures(IMAGE, trust, classic=[_tamper_entry(with_rekor(signer), change)])


@pytest.mark.parametrize(
    ("body_change", "reason"),
    [
        (lambda b: b["spec"]["data"]["hash"].update(value="0" * 64), "different artifact hash"),
        (lambda b: b["spec"]["signature"].update(content=_b64(b"other")), "different signature"),
        (lambda b: b.update(kind="rekord"), "expected hashedrekord/0.0.1"),
    ],
)
def test_rekor_body_must_match_the_signature(
    signer: dict[str, PrivateKey], body_change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    # Re-signing the SET proves the body check itself catches the mismatch.
    payload = simple_signing()
    signature = signer["alice"].sign(payload)
    body = hashedrekord(payload, signature, signer["alice"].public_key())
    body_change(body)
    entry = rekor_entry(signer["rekor"], body)
    layer = CosignSignature(payload=payload, signature=_b64(signature), rekor_bundle=json.dumps(entry))
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    with pytest.raises(VerificationError, match=reason):
        signatures.verify_image_signatures(IMAGE, trust, classic=[layer])


def test_rekor_body_with_another_signing_key_is_rejected(signer: dict[str, PrivateKey]) -> None:
    payload = simple_signing()
    signature = signer["alice"].sign(payload)
    entry = rekor_entry(signer["rekor"], hashedrekord(payload, signature, signer["bob"].public_key()))
    layer = CosignSignature(payload=payload, signature=_b64(signature), rekor_bundle=json.dumps(entry))
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    with pytest.raises(VerificationError, match="different signing key"):
        signatures.verify_image_signatures(IMAGE, trust, classic=[layer])


def test_missing_rekor_bundle_when_required(signer: dict[str, PrivateKey]) -> None:
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    with pytest.raises(VerificationError, match="no Rekor bundle but the policy requires one"):
        signatures.verify_image_signatures(IMAGE, trust, classic=[classic(signer["alice"])])


def test_rekor_entry_is_ignored_unless_required(signer: dict[str, PrivateKey]) -> None:
    broken = _tamper_entry(with_rekor(signer), lambda e: e["Payload"].update(logIndex=1))
    result = signatures.verify_image_signatures(IMAGE, policy(signer, "alice"), classic=[broken])
    assert result.tlog_verified is False


# --- key-signed Sigstore bundles (cosign v3 layout) -----------------------------------------------------


def keyed_bundle(
    key: PrivateKey,
    *,
    digest: str = IMAGE,
    predicate_type: str = COSIGN_SIGN_PREDICATE,
    rekor: PrivateKey | None = None,
    tamper_body: bool = False,
    cosigner: PrivateKey | None = None,
    logged: PrivateKey | None = None,
) -> bytes:
    """A cosign v3 key-signed bundle; with ``rekor``, its entry (promise, real inclusion proof, checkpoint)
    in a log signed by that key. ``cosigner`` adds a second signature; ``logged`` is whose signature the
    entry records (default: ``key``'s)."""
    statement = intoto.Statement(
        subject=[intoto.ResourceDescriptor(digest={"sha256": digest.removeprefix("sha256:")})],
        predicate_type=predicate_type,
    )
    envelope = intoto.sign_statement(statement, key)
    signed = [(envelope.signatures[0].sig, key)]
    if cosigner is not None:
        signed.append((cosigner.sign(dsse.pae(envelope.payload_type, envelope.payload)), cosigner))
    entries = []
    if rekor is not None:
        recorded = next(pair for pair in signed if pair[1] is (logged or key))
        payload = envelope.payload + (b"x" if tamper_body else b"")
        body = local_rekor.dsse_entry(payload, [(recorded[0], recorded[1].public_key().to_pem())])
        entries.append(local_rekor.LocalLog(rekor).entry(body))
    document = {
        "mediaType": signatures.BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {
            "publicKey": {"hint": _b64(bytes.fromhex(key.public_key().key_id))},
            "tlogEntries": entries,
        },
        "dsseEnvelope": {
            "payload": _b64(envelope.payload),
            "payloadType": envelope.payload_type,
            "signatures": [{"sig": _b64(sig), "keyid": ""} for sig, _ in signed],
        },
    }
    return json.dumps(document).encode()


def test_cosign_v3_keyed_bundle_signs_the_image(signer: dict[str, PrivateKey]) -> None:
    result = signatures.verify_image_signatures(
        IMAGE, policy(signer, "alice"), bundles=[keyed_bundle(signer["alice"])]
    )
    assert result.keys == ("alice",)


def test_keyed_bundles_and_classic_signatures_count_together(signer: dict[str, PrivateKey]) -> None:
    trust = policy(signer, "alice", "bob", threshold=2)
    result = signatures.verify_image_signatures(
        IMAGE, trust, classic=[classic(signer["alice"])], bundles=[keyed_bundle(signer["bob"])]
    )
    assert (result.keys, result.verified) == (("alice", "bob"), 2)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda s: keyed_bundle(s["carol"]), "signature present but not made by any trusted key"),
        (lambda s: keyed_bundle(s["alice"], digest=OTHER_IMAGE), "subject digest mismatch"),
        (lambda s: keyed_bundle(s["alice"], predicate_type="https://example.com/other"), "predicate type is"),
        (lambda s: b'{"mediaType": "application/json"}', "not a Sigstore bundle"),
        (lambda s: b"\x00", "not a Sigstore bundle"),
    ],
    ids=["wrong-key", "digest", "predicate", "not-bundle", "binary"],
)
def test_keyed_bundle_rejections(
    signer: dict[str, PrivateKey], make: Callable[[dict[str, PrivateKey]], Any], reason: str
) -> None:
    with pytest.raises(VerificationError, match=reason) as raised:
        signatures.verify_image_signatures(IMAGE, policy(signer, "alice"), bundles=[make(signer)])
    assert "(bundle 1: " in raised.value.message


def test_keyed_bundle_rekor_entry(signer: dict[str, PrivateKey]) -> None:
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    good = keyed_bundle(signer["alice"], rekor=signer["rekor"])
    assert signatures.verify_image_signatures(IMAGE, trust, bundles=[good]).tlog_verified
    with pytest.raises(VerificationError, match="different DSSE payload hash"):
        signatures.verify_image_signatures(
            IMAGE, trust, bundles=[keyed_bundle(signer["alice"], rekor=signer["rekor"], tamper_body=True)]
        )
    with pytest.raises(VerificationError, match="no transparency log entry"):
        signatures.verify_image_signatures(IMAGE, trust, bundles=[keyed_bundle(signer["alice"])])
    with pytest.raises(VerificationError, match="unknown log"):
        signatures.verify_image_signatures(
            IMAGE, trust, bundles=[keyed_bundle(signer["alice"], rekor=signer["bob"])]
        )


def _cosigned_bundle(signer: dict[str, PrivateKey], logged: str) -> bytes:
    """A bundle signed by alice and bob whose log entry records ``logged``'s signature only."""
    return keyed_bundle(signer["alice"], rekor=signer["rekor"], cosigner=signer["bob"], logged=signer[logged])


@pytest.mark.parametrize("logged", ["alice", "bob"])
def test_only_keys_whose_signature_is_logged_count_under_a_log_requirement(
    signer: dict[str, PrivateKey], logged: str
) -> None:
    bundle = _cosigned_bundle(signer, logged)
    rekor = (signer["rekor"].public_key(),)
    both = policy(signer, "alice", "bob", threshold=2)
    assert signatures.verify_image_signatures(IMAGE, both, bundles=[bundle]).keys == ("alice", "bob")
    with pytest.raises(VerificationError, match="1 of 2 required signatures"):
        signatures.verify_image_signatures(
            IMAGE,
            policy(signer, "alice", "bob", threshold=2, rekor_keys=rekor, require_tlog=True),
            bundles=[bundle],
        )
    one = policy(signer, "alice", "bob", rekor_keys=rekor, require_tlog=True)
    result = signatures.verify_image_signatures(IMAGE, one, bundles=[bundle])
    assert (result.keys, result.tlog_verified) == ((logged,), True)


def test_verify_bundle_returns_the_statement_of_an_attestation(signer: dict[str, PrivateKey]) -> None:
    bundle = keyed_bundle(signer["alice"], predicate_type="https://trtguard.dev/attestations/engine-build/v1")
    result = signatures.verify_bundle(
        bundle,
        policy(signer, "alice"),
        digest=IMAGE,
        predicate_type="https://trtguard.dev/attestations/engine-build/v1",
    )
    assert result.statement is not None
    assert result.statement.subject_digests() == frozenset({IMAGE})
    with pytest.raises(VerificationError, match="predicate type is") as raised:
        signatures.verify_bundle(
            bundle,
            policy(signer, "alice"),
            digest=IMAGE,
            predicate_type=COSIGN_SIGN_PREDICATE,
            location="b.json",
        )
    assert raised.value.location == "b.json"


def test_keyed_message_signature_bundle(signer: dict[str, PrivateKey]) -> None:
    artifact = b"engine bytes"
    digest = hashlib.sha256(artifact).digest()
    document = {
        "mediaType": "application/vnd.dev.sigstore.bundle+json;version=0.3",
        "verificationMaterial": {"publicKey": {"hint": "x"}, "tlogEntries": []},
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": _b64(digest)},
            "signature": _b64(signer["alice"].sign(artifact)),
        },
    }
    bundle = json.dumps(document)
    result = signatures.verify_bundle(bundle, policy(signer, "alice"), digest=f"sha256:{digest.hex()}")
    assert result.keys == ("alice",)
    assert result.statement is None
    with pytest.raises(VerificationError, match="the bundle signs sha256:"):
        signatures.verify_bundle(bundle, policy(signer, "alice"), digest=OTHER_IMAGE)
    with pytest.raises(VerificationError, match="message signature, not an attestation"):
        signatures.verify_bundle(
            bundle, policy(signer, "alice"), digest=f"sha256:{digest.hex()}", predicate_type="https://x/y"
        )


# --- DSSE attestations ----------------------------------------------------------------------------------


def _attestation(key: PrivateKey, tmp_path: Path) -> tuple[dsse.Envelope, str]:
    engine = tmp_path / "engine.plan"
    engine.write_bytes(b"plan")
    statement = intoto.statement_for_file(
        engine, "https://trtguard.dev/attestations/engine-build/v1", {"a": 1}
    )
    return intoto.sign_statement(statement, key), "sha256:" + hashlib.sha256(b"plan").hexdigest()


def test_attestation_checks_signature_subject_and_predicate(
    signer: dict[str, PrivateKey], tmp_path: Path
) -> None:
    envelope, digest = _attestation(signer["alice"], tmp_path)
    result = signatures.verify_attestation(
        envelope,
        policy(signer, "alice", "bob"),
        subject_digest=digest,
        predicate_type="https://trtguard.dev/attestations/engine-build/v1",
    )
    assert (result.keys, result.verified) == (("alice",), 1)
    assert result.statement is not None and result.statement.predicate == {"a": 1}

    with pytest.raises(VerificationError, match="subject digest mismatch"):
        signatures.verify_attestation(envelope, policy(signer, "alice"), subject_digest=OTHER_IMAGE)
    with pytest.raises(VerificationError, match="predicate type is"):
        signatures.verify_attestation(envelope, policy(signer, "alice"), predicate_type="https://x/y")
    with pytest.raises(VerificationError, match="0 of 1 required signatures from keys \\[bob\\]"):
        signatures.verify_attestation(envelope, policy(signer, "bob"))
    with pytest.raises(VerificationError, match="1 of 2 required"):
        signatures.verify_attestation(envelope, policy(signer, "alice", "bob", threshold=2))


def test_attestation_payload_type_and_missing_signatures(
    signer: dict[str, PrivateKey], tmp_path: Path
) -> None:
    wrong_type = dsse.sign_envelope("text/plain", b"{}", signer["alice"])
    with pytest.raises(VerificationError, match="payload type is 'text/plain'"):
        signatures.verify_attestation(wrong_type, policy(signer, "alice"))
    envelope, _ = _attestation(signer["alice"], tmp_path)
    unsigned = dsse.Envelope(envelope.payload_type, envelope.payload, ())
    with pytest.raises(NoSignatures, match="carries no signature"):
        signatures.verify_attestation(unsigned, policy(signer, "alice"))
    needs_log = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    with pytest.raises(VerificationError, match="cannot carry"):
        signatures.verify_attestation(envelope, needs_log)


# --- policy configuration -------------------------------------------------------------------------------


def test_policy_configuration_errors(signer: dict[str, PrivateKey], shared_fixtures: Path) -> None:
    with pytest.raises(InputError, match="at least one trusted key"):
        TrustPolicy()
    identity = KeylessIdentity(issuer="https://issuer", subject="me@example.com")
    with pytest.raises(InputError, match="need a Sigstore trusted root"):
        TrustPolicy(identities=(identity,))
    with pytest.raises(InputError, match="no Rekor key or trusted root"):
        policy(signer, "alice", require_tlog=True)
    with pytest.raises(InputError, match="threshold 0"):
        policy(signer, "alice", threshold=0)
    root = TrustRoot.from_file(shared_fixtures / "cosign" / "trust" / "prod-trusted_root.json")
    keyless = TrustPolicy(identities=(identity,), trust_root=root, threshold=3)
    assert keyless.describe() == "identities [me@example.com (https://issuer)]"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"subject": "a"}, "exactly one of issuer and issuer_regex"),
        ({"issuer": "i", "issuer_regex": "i", "subject": "a"}, "exactly one of issuer and issuer_regex"),
        ({"issuer": "i"}, "exactly one of subject and subject_regex"),
        ({"issuer": "i", "subject_regex": "("}, "not a valid regular expression"),
    ],
)
def test_keyless_identity_rules_are_validated(arguments: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        KeylessIdentity(**arguments)


def test_keyless_identity_regexes_must_match_the_whole_value(shared_fixtures: Path) -> None:
    certificate = x509.load_pem_x509_certificate(
        (shared_fixtures / "cosign" / "containers-image" / "raw" / "rekor-cert.pem").read_bytes()
    )
    issuer = "https://github.com/login/oauth"
    assert (
        KeylessIdentity(issuer=issuer, subject="mitr@redhat.com").match(certificate)
        == f"mitr@redhat.com ({issuer})"
    )
    assert KeylessIdentity(issuer_regex=r"https://github\.com/.*", subject_regex=r".*@redhat\.com").match(
        certificate
    )
    assert KeylessIdentity(issuer=issuer, subject_regex="redhat").match(certificate) is None
    assert KeylessIdentity(issuer_regex="github", subject="mitr@redhat.com").match(certificate) is None
    assert (
        KeylessIdentity(issuer="https://accounts.google.com", subject="mitr@redhat.com").match(certificate)
        is None
    )
    assert str(KeylessIdentity(issuer_regex="a.*", subject="s")) == "s (/a.*/)"


def test_trust_root_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the trusted root"):
        TrustRoot.from_file(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"mediaType": "application/json"}')
    with pytest.raises(InputError, match="not a Sigstore trusted root") as raised:
        TrustRoot.from_file(bad)
    assert raised.value.location == str(bad)
    bad.write_bytes(b"\xff")
    with pytest.raises(InputError, match="not a Sigstore trusted root"):
        TrustRoot.from_file(bad)


def test_trust_root_from_a_client_trust_config(shared_fixtures: Path, tmp_path: Path) -> None:
    root = json.loads((shared_fixtures / "cosign" / "trust" / "prod-trusted_root.json").read_bytes())
    config = {
        "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
        "trustedRoot": root,
        "signingConfig": {"mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json"},
    }
    path = tmp_path / "trust_config.json"
    path.write_text(json.dumps(config))
    trust_root = TrustRoot.from_file(path)
    assert {log.log_id.hex()[:8] for log in trust_root.rekor_logs} >= {"c0d23d6a"}
    assert len(trust_root.certificate_authorities) == 2


# --- bare DSSE envelopes as image signatures; limits -------------------------------------------------------


def _sign_statement(
    key: PrivateKey, digest: str = IMAGE, predicate_type: str = COSIGN_SIGN_PREDICATE
) -> dsse.Envelope:
    statement = intoto.Statement(
        subject=[intoto.ResourceDescriptor(digest={"sha256": digest.removeprefix("sha256:")})],
        predicate_type=predicate_type,
    )
    return intoto.sign_statement(statement, key)


def test_signing_statement_envelopes_count_with_other_signatures(signer: dict[str, PrivateKey]) -> None:
    trust = policy(signer, "alice", "bob", "carol", threshold=3)
    result = signatures.verify_image_signatures(
        IMAGE,
        trust,
        classic=[classic(signer["alice"])],
        bundles=[keyed_bundle(signer["bob"])],
        envelopes=[_sign_statement(signer["carol"])],
    )
    assert (result.keys, result.verified) == (("alice", "bob", "carol"), 3)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda s: _sign_statement(s["carol"]), "signature present but not made by any trusted key"),
        (lambda s: _sign_statement(s["alice"], OTHER_IMAGE), "subject digest mismatch"),
        (
            lambda s: _sign_statement(s["alice"], predicate_type="https://example.com/sbom"),
            "predicate type is",
        ),
        (lambda s: dsse.sign_envelope("text/plain", b"{}", s["alice"]), "payload type is 'text/plain'"),
        (lambda s: dsse.sign_envelope(intoto.PAYLOAD_TYPE, b"[]", s["alice"]), "invalid in-toto statement"),
    ],
    ids=["wrong-key", "digest", "predicate", "payload-type", "statement"],
)
def test_signing_statement_envelope_rejections(
    signer: dict[str, PrivateKey], make: Callable[[dict[str, PrivateKey]], dsse.Envelope], reason: str
) -> None:
    with pytest.raises(VerificationError, match=reason) as raised:
        signatures.verify_image_signatures(IMAGE, policy(signer, "alice"), envelopes=[make(signer)])
    assert "(envelope 1: " in raised.value.message


def test_signing_statement_envelopes_never_meet_a_log_requirement(signer: dict[str, PrivateKey]) -> None:
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    with pytest.raises(VerificationError, match="0 of 1 required") as raised:
        signatures.verify_image_signatures(IMAGE, trust, envelopes=[_sign_statement(signer["alice"])])
    assert "envelope 1: no verified transparency log entry" in raised.value.message
    # Alongside a logged signature the envelope adds nothing: one logged signer is not two.
    two = policy(
        signer, "alice", "bob", threshold=2, rekor_keys=(signer["rekor"].public_key(),), require_tlog=True
    )
    with pytest.raises(VerificationError, match="1 of 2 required"):
        signatures.verify_image_signatures(
            IMAGE, two, classic=[with_rekor(signer)], envelopes=[_sign_statement(signer["bob"])]
        )


def test_too_many_signatures_for_one_image_are_refused(signer: dict[str, PrivateKey]) -> None:
    crowd = [classic(signer["alice"])] * (signatures.MAX_SIGNATURES + 1)
    with pytest.raises(VerificationError, match=r"65 signatures found .* at most 64 are checked"):
        signatures.verify_image_signatures(IMAGE, policy(signer, "alice"), classic=crowd)


def test_keyed_bundle_with_too_many_envelope_signatures(signer: dict[str, PrivateKey]) -> None:
    document = json.loads(keyed_bundle(signer["alice"]))
    signatures_list = document["dsseEnvelope"]["signatures"]
    document["dsseEnvelope"]["signatures"] = signatures_list * (signatures.MAX_SIGNATURES + 1)
    with pytest.raises(VerificationError, match="at most 64 are checked"):
        signatures.verify_image_signatures(IMAGE, policy(signer, "alice"), bundles=[json.dumps(document)])


@pytest.mark.parametrize(
    "body_change",
    [
        lambda b: b["spec"]["data"].update(hash="not an object"),
        lambda b: b.update(spec=[]),
        lambda b: b["spec"].update(signature=None),
        lambda b: b["spec"]["signature"].update(publicKey={"content": 5}),
    ],
    ids=["hash-type", "spec-type", "signature-null", "key-type"],
)
def test_rekor_body_of_the_wrong_shape_is_a_clean_failure(
    signer: dict[str, PrivateKey], body_change: Callable[[dict[str, Any]], None]
) -> None:
    payload = simple_signing()
    signature = signer["alice"].sign(payload)
    body = hashedrekord(payload, signature, signer["alice"].public_key())
    body_change(body)
    layer = CosignSignature(
        payload=payload,
        signature=_b64(signature),
        rekor_bundle=json.dumps(rekor_entry(signer["rekor"], body)),
    )
    trust = policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    with pytest.raises(VerificationError, match="the Rekor entry"):
        signatures.verify_image_signatures(IMAGE, trust, classic=[layer])


# --- key-signed bundles: what the bundle spec allows, what the log proves ----------------------------------


def _message_bundle(
    key: PrivateKey,
    artifact: bytes,
    *,
    log: local_rekor.LocalLog | None = None,
    media_type: str = signatures.BUNDLE_MEDIA_TYPE,
    promise: bool = True,
    proof: bool = True,
    digest_algorithm: str = "SHA2_256",
) -> dict[str, Any]:
    """A key-signed message-signature bundle over ``artifact``, logged in ``log`` when given."""
    digest = hashlib.sha256(artifact).digest()
    signature = key.sign(artifact)
    material: dict[str, Any] = {"publicKey": {"hint": _b64(bytes.fromhex(key.public_key().key_id))}}
    if log is not None:
        body = local_rekor.hashedrekord(digest, signature, key.public_key().to_pem())
        material["tlogEntries"] = [log.entry(body, promise=promise, proof=proof)]
    return {
        "mediaType": media_type,
        "verificationMaterial": material,
        "messageSignature": {
            "messageDigest": {"algorithm": digest_algorithm, "digest": _b64(digest)},
            "signature": _b64(signature),
        },
    }


ARTIFACT = b"engine bytes"
ARTIFACT_DIGEST = "sha256:" + hashlib.sha256(ARTIFACT).hexdigest()


def _logged_policy(signer: dict[str, PrivateKey], **options: Any) -> TrustPolicy:
    return policy(signer, "alice", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True, **options)


def test_bundle_without_tlog_entries_is_a_bundle(signer: dict[str, PrivateKey]) -> None:
    # cosign --tlog-upload=false; Go's encoder leaves the empty list out altogether.
    document = _message_bundle(signer["alice"], ARTIFACT)
    assert "tlogEntries" not in document["verificationMaterial"]
    result = signatures.verify_bundle(json.dumps(document), policy(signer, "alice"), digest=ARTIFACT_DIGEST)
    assert (result.keys, result.tlog_verified) == (("alice",), False)
    with pytest.raises(VerificationError, match="no transparency log entry but the policy requires one"):
        signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)


def test_v01_bundle_with_only_a_signed_entry_timestamp(signer: dict[str, PrivateKey]) -> None:
    log = local_rekor.LocalLog(signer["rekor"])
    v01 = "application/vnd.dev.sigstore.bundle+json;version=0.1"
    document = _message_bundle(signer["alice"], ARTIFACT, log=log, media_type=v01, proof=False)
    result = signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)
    assert result.tlog_verified
    # The same entry in a v0.2 bundle lacks what v0.2 requires; the message names the field.
    v02 = "application/vnd.dev.sigstore.bundle+json;version=0.2"
    document = _message_bundle(signer["alice"], ARTIFACT, log=log, media_type=v02, proof=False)
    with pytest.raises(
        VerificationError, match=r"field verificationMaterial\.tlogEntries\[0\]\.inclusionProof missing"
    ):
        signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)
    # A v0.1 entry without its promise, equally.
    document = _message_bundle(signer["alice"], ARTIFACT, log=log, media_type=v01, promise=False)
    with pytest.raises(VerificationError, match=r"tlogEntries\[0\]\.inclusionPromise missing"):
        signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)


def test_v03_bundle_with_proof_only_and_with_both(signer: dict[str, PrivateKey]) -> None:
    log = local_rekor.LocalLog(signer["rekor"])
    for promise in (True, False):
        document = _message_bundle(signer["alice"], ARTIFACT, log=log, promise=promise)
        result = signatures.verify_bundle(
            json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST
        )
        assert result.tlog_verified


def test_log_entries_are_looked_at_only_when_the_policy_asks(signer: dict[str, PrivateKey]) -> None:
    # A broken entry under a policy that needs none: the signature counts, and the result says the log was
    # not verified (nothing was checked), rather than claiming what was not looked at.
    document = _message_bundle(signer["alice"], ARTIFACT, log=local_rekor.LocalLog(signer["rekor"]))
    document["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["hashes"] = []
    result = signatures.verify_bundle(json.dumps(document), policy(signer, "alice"), digest=ARTIFACT_DIGEST)
    assert result.tlog_verified is False
    with pytest.raises(VerificationError, match="fewer hashes than the tree has levels"):
        signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)


def test_entries_of_unknown_logs_are_skipped_but_one_must_verify(signer: dict[str, PrivateKey]) -> None:
    ours, theirs = local_rekor.LocalLog(signer["rekor"]), local_rekor.LocalLog(signer["carol"])
    document = _message_bundle(signer["alice"], ARTIFACT, log=ours)
    entries = document["verificationMaterial"]["tlogEntries"]
    foreign = _message_bundle(signer["alice"], ARTIFACT, log=theirs)["verificationMaterial"]["tlogEntries"]
    document["verificationMaterial"]["tlogEntries"] = foreign + entries
    assert signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)
    document["verificationMaterial"]["tlogEntries"] = foreign
    with pytest.raises(VerificationError, match="unknown log"):
        signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)
    document["verificationMaterial"]["tlogEntries"] = entries + entries
    with pytest.raises(VerificationError, match="the same log entry twice"):
        signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)


def _root_policy(signer: dict[str, PrivateKey], root: dict[str, Any]) -> TrustPolicy:
    trust_root = TrustRoot.from_bytes(json.dumps(root).encode(), location="root.json")
    return TrustPolicy(keys={"alice": signer["alice"].public_key()}, trust_root=trust_root, require_tlog=True)


def test_log_key_validity_window_is_checked_inclusively(signer: dict[str, PrivateKey]) -> None:
    log = local_rekor.LocalLog(signer["rekor"])  # entries are integrated at 2023-11-14T22:13:20Z
    document = json.dumps(_message_bundle(signer["alice"], ARTIFACT, log=log))
    inclusive = log.trusted_root(start="2023-11-14T22:13:20Z", end="2023-11-14T22:13:20Z")
    assert signatures.verify_bundle(document, _root_policy(signer, inclusive), digest=ARTIFACT_DIGEST)
    retired = log.trusted_root(end="2023-11-14T22:13:19Z")
    with pytest.raises(VerificationError, match="the log key was not valid at 2023-11-14T22:13:20"):
        signatures.verify_bundle(document, _root_policy(signer, retired), digest=ARTIFACT_DIGEST)
    # Without a promise the integrated time is not signed: a retired log key cannot date the entry.
    proof_only = json.dumps(_message_bundle(signer["alice"], ARTIFACT, log=log, promise=False))
    with pytest.raises(VerificationError, match="no signed time, and its log key is retired"):
        signatures.verify_bundle(proof_only, _root_policy(signer, retired), digest=ARTIFACT_DIGEST)
    assert signatures.verify_bundle(
        proof_only, _root_policy(signer, log.trusted_root()), digest=ARTIFACT_DIGEST
    )


def test_digests_other_than_sha256_cannot_bind(signer: dict[str, PrivateKey]) -> None:
    document = _message_bundle(signer["alice"], ARTIFACT, digest_algorithm="SHA2_384")
    with pytest.raises(VerificationError, match="message digest is SHA2_384, which cannot bind"):
        signatures.verify_bundle(json.dumps(document), policy(signer, "alice"), digest=ARTIFACT_DIGEST)
    statement = intoto.Statement(
        subject=[intoto.ResourceDescriptor(name="engine", digest={"sha512": "ab" * 64})],
        predicate_type=COSIGN_SIGN_PREDICATE,
    )
    envelope = intoto.sign_statement(statement, signer["alice"])
    bundle = json.dumps(
        {
            "mediaType": signatures.BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {}},
            "dsseEnvelope": envelope.to_dict(),
        }
    )
    with pytest.raises(VerificationError, match="carry sha512 digests only, which cannot bind to sha256:"):
        signatures.verify_bundle(bundle, policy(signer, "alice"), digest=ARTIFACT_DIGEST)
    with pytest.raises(VerificationError, match="carry sha512 digests only"):
        signatures.verify_attestation(envelope, policy(signer, "alice"), subject_digest=ARTIFACT_DIGEST)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.pop("mediaType"), "mediaType missing"),
        (lambda d: d.update(mediaType="application/vnd.dev.sigstore.bundle.v0.4+json"), "not a supported"),
        (lambda d: d.pop("verificationMaterial"), "verificationMaterial missing"),
        (lambda d: d["verificationMaterial"].pop("publicKey"), "needs exactly one of publicKey"),
        (lambda d: d.update(dsseEnvelope={"payloadType": "t"}), "needs exactly one of messageSignature"),
        (lambda d: d["messageSignature"].update(signature=7), "messageSignature.signature expected a string"),
        (
            lambda d: d["verificationMaterial"].update(tlogEntries=[{"logIndex": "x"}]),
            r"tlogEntries\[0\]\.kindVersion missing",
        ),
        (
            lambda d: d["verificationMaterial"].update(x509CertificateChain={"certificates": []}),
            "needs exactly one of publicKey, x509CertificateChain, certificate",
        ),
    ],
)
def test_malformed_bundles_name_the_field(
    signer: dict[str, PrivateKey], change: Callable[[dict[str, Any]], None], field: str
) -> None:
    document = _message_bundle(signer["alice"], ARTIFACT)
    change(document)
    with pytest.raises(VerificationError, match=f"not a Sigstore bundle .*{field}"):
        signatures.verify_bundle(json.dumps(document), policy(signer, "alice"), digest=ARTIFACT_DIGEST)


def test_protobuf_json_forms_are_accepted(signer: dict[str, PrivateKey]) -> None:
    # proto field names, URL-safe unpadded base64 and numbers for int64: what other encoders write.
    document = _message_bundle(signer["alice"], ARTIFACT, log=local_rekor.LocalLog(signer["rekor"]))
    entry = document["verificationMaterial"].pop("tlogEntries")[0]
    entry["log_index"] = int(entry.pop("logIndex"))
    entry["canonicalizedBody"] = (
        base64.urlsafe_b64encode(base64.b64decode(entry["canonicalizedBody"])).decode().rstrip("=")
    )
    document["verificationMaterial"]["tlog_entries"] = [entry]
    result = signatures.verify_bundle(json.dumps(document), _logged_policy(signer), digest=ARTIFACT_DIGEST)
    assert result.tlog_verified


# --- transparency log proofs (verifier/signatures/_inclusion.py) -------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17])
def test_inclusion_proofs_of_every_leaf(size: int) -> None:
    from verifier.signatures._inclusion import leaf_hash, root_from_inclusion_proof  # noqa: PLC0415

    leaves = [leaf_hash(b"entry %d" % i) for i in range(size)]
    root = local_rekor.merkle_root(leaves)
    for index in range(size):
        path = local_rekor.audit_path(index, leaves)
        assert root_from_inclusion_proof(index, size, leaves[index], path) == root
        if size > 1:
            # The same path from another position leads elsewhere, or is not a path of this tree at all.
            other = (index + 1) % size
            try:
                assert root_from_inclusion_proof(other, size, leaves[index], path) != root
            except VerificationError as error:
                assert "hashes than the tree has levels" in error.message
    with pytest.raises(VerificationError, match="outside a tree of"):
        root_from_inclusion_proof(size, size, leaves[0], [])
    with pytest.raises(VerificationError, match="more hashes than the tree has levels"):
        root_from_inclusion_proof(0, size, leaves[0], [*local_rekor.audit_path(0, leaves), root])


def test_each_counted_signature_says_where_it_came_from_and_its_log_index(
    signer: dict[str, PrivateKey],
) -> None:
    """What the decision log records: which input counted, who signed it, the verified entry's log index."""
    trust = policy(signer, "alice", "bob", rekor_keys=(signer["rekor"].public_key(),), require_tlog=True)
    classic = with_rekor(signer)
    bundle = keyed_bundle(signer["bob"], rekor=signer["rekor"])
    unlogged = keyed_bundle(signer["alice"])  # present, but not counted: the policy requires a log entry
    result = signatures.verify_image_signatures(IMAGE, trust, classic=[classic], bundles=[unlogged, bundle])
    assert classic.rekor_bundle is not None
    classic_index = json.loads(classic.rekor_bundle)["Payload"]["logIndex"]
    bundle_index = int(json.loads(bundle)["verificationMaterial"]["tlogEntries"][0]["logIndex"])
    assert [(c.source, c.index, [m.label for m in c.signers], c.log_index) for c in result.counted] == [
        ("classic", 0, ["alice"], classic_index),
        ("bundle", 1, ["bob"], bundle_index),
    ]
    # Without a log requirement nothing is looked up in a log, and no index is recorded.
    plain = signatures.verify_image_signatures(IMAGE, policy(signer, "alice"), bundles=[unlogged])
    assert [(c.source, c.index, c.log_index) for c in plain.counted] == [("bundle", 0, None)]
