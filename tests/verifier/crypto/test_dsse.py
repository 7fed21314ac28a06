"""verifier.crypto._dsse: PAE, envelope JSON, signing, verification with thresholds; interop with
securesystemslib."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.signer._crypto_signer import CryptoSigner
from securesystemslib.signer._key import SSlibKey

from verifier.base._errors import InputError, VerificationError
from verifier.crypto import _dsse as dsse
from verifier.crypto import _keys as keys
from verifier.crypto._dsse import Envelope, EnvelopeSignature
from verifier.crypto._keys import PrivateKey, PublicKey


@pytest.fixture(scope="module")
def signers() -> dict[str, PrivateKey]:
    return {name: keys.generate_private_key() for name in ("alice", "bob", "carol")}


def test_pae_matches_the_spec_example() -> None:
    # secure-systems-lab/dsse protocol.md
    assert (
        dsse.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert dsse.pae("", b"") == b"DSSEv1 0  0 "
    assert dsse.pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"


def test_sign_and_verify_round_trip(signers: dict[str, PrivateKey]) -> None:
    envelope = dsse.sign_envelope("application/example", b'{"x": 1}', signers["alice"])
    assert envelope.signatures[0].keyid == signers["alice"].public_key().key_id
    parsed = Envelope.from_json(envelope.to_json())
    assert parsed == envelope
    assert dsse.verify_envelope(parsed, {"alice": signers["alice"].public_key()}) == ("alice",)


def test_envelope_json_uses_the_dsse_field_names(signers: dict[str, PrivateKey]) -> None:
    envelope = dsse.sign_envelope("text/plain", b"hi", signers["alice"])
    document = json.loads(envelope.to_json())
    assert set(document) == {"payloadType", "payload", "signatures"}
    assert base64.b64decode(document["payload"]) == b"hi"
    assert set(document["signatures"][0]) == {"keyid", "sig"}


@pytest.mark.parametrize(
    "tamper",
    [
        lambda e: Envelope(e.payload_type, e.payload + b" ", e.signatures),
        lambda e: Envelope("application/other", e.payload, e.signatures),
        lambda e: Envelope(
            e.payload_type,
            e.payload,
            (EnvelopeSignature(sig=e.signatures[0].sig[:-1] + bytes([e.signatures[0].sig[-1] ^ 1])),),
        ),
    ],
    ids=["payload", "payload-type", "signature"],
)
def test_any_change_breaks_the_signature(
    signers: dict[str, PrivateKey], tamper: Callable[[Envelope], Envelope]
) -> None:
    envelope = dsse.sign_envelope("application/example", b"payload", signers["alice"])
    tampered = tamper(envelope)
    with pytest.raises(VerificationError, match="0 of 1 required signatures from keys \\[alice\\]") as raised:
        dsse.verify_envelope(tampered, {"alice": signers["alice"].public_key()})
    # a signature that still names alice's key id: the payload or the signature changed, not the signer
    altered = raised.value.message.startswith("payload altered: a signature under the key id of [alice]")
    assert altered is bool(tampered.signatures[0].keyid)


def test_threshold_counts_distinct_keys_not_signatures(signers: dict[str, PrivateKey]) -> None:
    alice, bob = signers["alice"], signers["bob"]
    first = dsse.sign_envelope("t", b"p", alice)
    twice = Envelope("t", b"p", first.signatures + dsse.sign_envelope("t", b"p", alice).signatures)
    trusted = {"alice": alice.public_key(), "bob": bob.public_key()}
    with pytest.raises(VerificationError) as raised:
        dsse.verify_envelope(twice, trusted, threshold=2)
    assert raised.value.message.startswith("1 of 2 required signatures from keys [alice, bob]")
    assert "carries 2 signatures" in raised.value.message

    both = Envelope("t", b"p", first.signatures + dsse.sign_envelope("t", b"p", bob).signatures)
    assert dsse.verify_envelope(both, trusted, threshold=2) == ("alice", "bob")


def test_two_names_for_one_key_count_once(signers: dict[str, PrivateKey]) -> None:
    alice = signers["alice"]
    envelope = dsse.sign_envelope("t", b"p", alice)
    trusted = {
        "alice": alice.public_key(),
        "alice-again": alice.public_key(),
        "bob": signers["bob"].public_key(),
    }
    assert dsse.verify_envelope(envelope, trusted) == ("alice", "alice-again")
    with pytest.raises(VerificationError, match="1 of 2 required"):
        dsse.verify_envelope(envelope, trusted, threshold=2)


def test_threshold_that_cannot_be_met_is_an_input_error(signers: dict[str, PrivateKey]) -> None:
    envelope = dsse.sign_envelope("t", b"p", signers["alice"])
    key = signers["alice"].public_key()
    with pytest.raises(InputError, match="threshold 2 cannot be met by 1 distinct key"):
        dsse.verify_envelope(envelope, {"a": key, "b": key}, threshold=2)
    with pytest.raises(InputError, match="threshold 0"):
        dsse.verify_envelope(envelope, {"a": key}, threshold=0)


def test_unsigned_envelope_is_distinguished_from_a_bad_signature(signers: dict[str, PrivateKey]) -> None:
    with pytest.raises(VerificationError, match="carries no signature"):
        dsse.verify_envelope(Envelope("t", b"p", ()), {"alice": signers["alice"].public_key()})
    other = dsse.sign_envelope("t", b"p", signers["carol"])
    with pytest.raises(VerificationError, match="none by a trusted key"):
        dsse.verify_envelope(other, {"alice": signers["alice"].public_key()})


def test_keyid_is_only_a_hint(signers: dict[str, PrivateKey]) -> None:
    envelope = dsse.sign_envelope("t", b"p", signers["alice"])
    mislabelled = Envelope("t", b"p", (EnvelopeSignature(sig=envelope.signatures[0].sig, keyid="bob"),))
    trusted = {"bob": signers["bob"].public_key(), "alice": signers["alice"].public_key()}
    assert dsse.verify_envelope(mislabelled, trusted) == ("alice",)


def test_too_many_signatures_are_refused(signers: dict[str, PrivateKey]) -> None:
    signature = dsse.sign_envelope("t", b"p", signers["alice"]).signatures[0]
    crowded = Envelope("t", b"p", (signature,) * (dsse.MAX_SIGNATURES + 1))
    with pytest.raises(VerificationError, match="at most 64 are checked"):
        dsse.verify_envelope(crowded, {"alice": signers["alice"].public_key()})


def test_url_safe_and_unpadded_base64_is_accepted() -> None:
    payload = b"\xfb\xff\xfe subjects?"
    url_safe = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    envelope = Envelope.from_json(json.dumps({"payloadType": "t", "payload": url_safe, "signatures": []}))
    assert envelope.payload == payload


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", "expected a JSON object"),
        (b'{"payload": "", "signatures": []}', "no payloadType"),
        (b'{"payloadType": "t", "payload": "%%%", "signatures": []}', "payload is not valid base64"),
        (b'{"payloadType": "t", "payload": 5, "signatures": []}', "must be a base64 string"),
        (b'{"payloadType": "t", "payload": ""}', "no signatures list"),
        (b'{"payloadType": "t", "payload": "", "signatures": ["x"]}', "signatures\\[0\\] is not an object"),
        (
            b'{"payloadType": "t", "payload": "", "signatures": [{"keyid": 1, "sig": ""}]}',
            "keyid is not a string",
        ),
        (b'{"payloadType": "t", "payload": "", "signatures": [{"sig": "@@"}]}', "signatures\\[0\\].sig"),
        (b"\xff\xfe", "not JSON"),
        (b"[" * 100_000, "the document is nested too deeply"),
        # JSON can spell an unpaired surrogate, which PAE cannot encode as UTF-8.
        (b'{"payloadType": "t\\ud800", "payload": "", "signatures": []}', "payloadType is not valid Unicode"),
    ],
)
def test_malformed_envelopes_raise_input_errors(document: Any, message: str) -> None:
    with pytest.raises(InputError, match=message) as raised:
        Envelope.from_json(document, location="att.json")
    assert raised.value.location == "att.json"


def test_interop_securesystemslib_signs_we_verify() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    theirs = SslibEnvelope(payload=b'{"a": 1}', payload_type="application/vnd.in-toto+json", signatures={})
    theirs.sign(CryptoSigner(private))
    ours = Envelope.from_dict(theirs.to_dict())
    public = PublicKey.from_crypto(private.public_key())
    assert dsse.verify_envelope(ours, {"ci": public}) == ("ci",)


def test_interop_we_sign_securesystemslib_verifies(signers: dict[str, PrivateKey]) -> None:
    alice = signers["alice"]
    ours = dsse.sign_envelope("application/vnd.in-toto+json", b'{"b": 2}', alice)
    theirs = SslibEnvelope.from_dict(json.loads(ours.to_json()))
    crypto_key = serialization.load_pem_public_key(alice.public_key().to_pem())
    public_key = SSlibKey.from_crypto(crypto_key, keyid=alice.public_key().key_id)
    verified = theirs.verify([public_key], 1)
    assert list(verified) == [alice.public_key().key_id]


def test_interop_cosign_keyless_dsse_envelope(shared_fixtures: Path) -> None:
    # The DSSE envelope inside cosign's own attestation bundle verifies with the signing certificate's key.
    bundle = json.loads(
        (shared_fixtures / "cosign" / "bundles" / "cosign" / "oci-attestation.sigstore.json").read_bytes()
    )
    envelope = Envelope.from_dict(bundle["dsseEnvelope"])
    certificate = x509.load_der_x509_certificate(
        base64.b64decode(bundle["verificationMaterial"]["certificate"]["rawBytes"])
    )
    public = PublicKey.from_crypto(certificate.public_key())
    assert dsse.verify_envelope(envelope, {"cody": public}) == ("cody",)
    altered = Envelope(
        envelope.payload_type, envelope.payload.replace(b"sha256", b"sha257", 1), envelope.signatures
    )
    with pytest.raises(VerificationError):
        dsse.verify_envelope(altered, {"cody": public})


# --- the DSSE specification's test vector (tests/data/dsse-spec, SOURCES.md) ----------------------------


def _spec_vector() -> dict[str, Any]:
    path = Path(__file__).resolve().parents[2] / "data" / "dsse-spec" / "protocol-test-vector.json"
    vector: dict[str, Any] = json.loads(path.read_text())
    return vector


def test_spec_vector_pae_and_envelope() -> None:
    vector = _spec_vector()
    assert dsse.pae(vector["payload_type"], vector["serialized_body"].encode()) == vector["pae"].encode()
    envelope = dsse.Envelope.from_json(json.dumps(vector["envelope"]))
    assert (envelope.payload_type, envelope.payload) == (vector["payload_type"], b"hello world")
    assert envelope.signatures[0].keyid == ""


def test_spec_vector_signature_verifies() -> None:
    # The spec signs with deterministic ECDSA (RFC 6979) and writes r || s; trtguard (like cosign) carries
    # ECDSA signatures as ASN.1 DER, so the vector's signature is re-encoded, not accepted raw.
    vector = _spec_vector()
    numbers = vector["key"]
    private = ec.derive_private_key(int(numbers["d"]), ec.SECP256R1())
    assert private.public_key().public_numbers() == ec.EllipticCurvePublicNumbers(
        int(numbers["x"]), int(numbers["y"]), ec.SECP256R1()
    )
    raw = base64.b64decode(vector["envelope"]["signatures"][0]["sig"])
    # Reproducing the signature proves PAE, hash and key are the spec's.
    again = private.sign(vector["pae"].encode(), ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
    r, s = decode_dss_signature(again)
    assert r.to_bytes(32, "big") + s.to_bytes(32, "big") == raw
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    envelope = dsse.Envelope.from_json(json.dumps(vector["envelope"]))
    public = PublicKey.from_crypto(private.public_key())
    as_der = dsse.Envelope(envelope.payload_type, envelope.payload, (dsse.EnvelopeSignature(sig=der),))
    assert dsse.verify_envelope(as_der, {"spec": public}) == ("spec",)
    with pytest.raises(VerificationError, match="0 of 1 required signatures"):
        dsse.verify_envelope(envelope, {"spec": public})
