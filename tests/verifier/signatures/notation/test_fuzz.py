"""Hostile Notation envelopes fail as themselves (issue 24 item 11): structure-aware fuzzing of the JWS and
COSE readers. Valid envelopes get one header, payload field or chain entry replaced by any JSON or CBOR
value and are signed again (so that the mutation reaches past the signature check into every reader), or
left with the old signature; raw bytes go in too. The only outcomes are a verified signature or a typed
refusal (VerificationError, InputError) of that envelope."""

from __future__ import annotations

import base64
import json
from typing import Any

import cbor2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import notation_envelopes as envelopes
from tests.support.notary_pki import NOW, make_pki
from verifier.base._errors import InputError, VerificationError
from verifier.signatures.notation import (
    COSE_MEDIA_TYPE,
    JWS_MEDIA_TYPE,
    NotationSignature,
    NotationTrust,
    TargetArtifact,
    TrustedIdentity,
    verify_notation,
)

PKI = make_pki("ec-p256")
CHAIN = PKI.chain
TARGET = {
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": "sha256:" + "ab" * 32,
    "size": 9,
}
DESCRIPTOR = TargetArtifact(TARGET["mediaType"], TARGET["digest"], 9)  # type: ignore[arg-type]
TRUST = NotationTrust(
    stores={"ca": (PKI.root.certificate,)},
    identities=(TrustedIdentity.parse("x509.subject: C=US, ST=WA, O=Example"),),
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
cbor_values = st.recursive(
    _scalars | st.binary(max_size=40) | st.builds(cbor2.CBORTag, st.sampled_from([0, 1, 18, 100]), _scalars),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(-40, 40), inner, max_size=4)
    ),
    max_leaves=12,
)
JWS_HEADERS = ["alg", "crit", "cty", envelopes.SCHEME, envelopes.SIGNING_TIME, envelopes.EXPIRY,
               "io.cncf.notary.authenticSigningTime", "x5c", "kid"]  # fmt: skip
COSE_HEADERS = [1, 2, 3, 33, envelopes.SCHEME, envelopes.SIGNING_TIME, envelopes.EXPIRY,
                "io.cncf.notary.authenticSigningTime"]  # fmt: skip
UNPROTECTED = ["x5c", "io.cncf.notary.timestampSignature", "io.cncf.notary.signingAgent", 33]


def _outcome(data: bytes, media_type: str) -> str:
    try:
        verify_notation(
            NotationSignature(data, media_type),
            TRUST,
            descriptor=DESCRIPTOR,
            repository="r.example/a",
            now=NOW,
        )
    except (VerificationError, InputError):
        return "refused"
    return "verified"


def test_the_unmutated_envelopes_verify() -> None:
    body = envelopes.payload(TARGET)
    signed = envelopes.jws(PKI.leaf.signing_key, CHAIN, envelopes.jws_headers("ES256", NOW), body)
    assert _outcome(signed, JWS_MEDIA_TYPE) == "verified"
    headers = envelopes.cose_headers("ES256", NOW)
    assert _outcome(
        envelopes.cose(PKI.leaf.signing_key, CHAIN, headers, body, alg="ES256"), COSE_MEDIA_TYPE
    ) == ("verified")


@FUZZ
@given(
    where=st.sampled_from(["protected", "unprotected", "payload", "target"]),
    name=st.sampled_from([*JWS_HEADERS, "mediaType", "digest", "size", "targetArtifact"]),
    value=json_values,
    resign=st.booleans(),
)
def test_a_mutated_jws_is_verified_or_refused(where: str, name: str, value: Any, resign: bool) -> None:
    protected = envelopes.jws_headers("ES256", NOW)
    unprotected: dict[str, Any] = {}
    document: Any = {"targetArtifact": dict(TARGET)}
    if where == "protected":
        protected[name] = value
    elif where == "unprotected":
        unprotected[name] = value
    elif where == "payload":
        document[name] = value
    else:
        document["targetArtifact"][name] = value
    body = json.dumps(document).encode()
    data = envelopes.jws(PKI.leaf.signing_key, CHAIN, protected, body, unprotected=unprotected, alg="ES256")
    if not resign:  # the headers changed under the signature of the untouched envelope
        honest = json.loads(
            envelopes.jws(PKI.leaf.signing_key, CHAIN, envelopes.jws_headers("ES256", NOW), body)
        )
        mutated = json.loads(data)
        mutated["signature"] = honest["signature"]
        data = json.dumps(mutated).encode()
    assert _outcome(data, JWS_MEDIA_TYPE) in ("verified", "refused")


@FUZZ
@given(part=st.sampled_from(["payload", "protected", "header", "signature"]), value=json_values)
def test_a_jws_with_a_part_of_another_type_is_refused(part: str, value: Any) -> None:
    body = envelopes.payload(TARGET)
    document = json.loads(
        envelopes.jws(PKI.leaf.signing_key, CHAIN, envelopes.jws_headers("ES256", NOW), body)
    )
    document[part] = value
    assert _outcome(json.dumps(document).encode(), JWS_MEDIA_TYPE) == "refused"


@FUZZ
@given(
    where=st.sampled_from(["protected", "unprotected", "target"]),
    name=st.sampled_from([*COSE_HEADERS, *UNPROTECTED, "mediaType", "digest", "size"]),
    value=cbor_values,
    chain_protected=st.booleans(),
)
def test_a_mutated_cose_envelope_is_verified_or_refused(
    where: str, name: Any, value: Any, chain_protected: bool
) -> None:
    protected = envelopes.cose_headers("ES256", NOW)
    unprotected: dict[Any, Any] = {}
    target: Any = dict(TARGET)
    if where == "protected":
        protected[name] = value
    elif where == "unprotected":
        unprotected[name] = value
    else:
        target[name] = value
    try:
        body = json.dumps({"targetArtifact": target}).encode()
    except (TypeError, ValueError):
        body = cbor2.dumps(target)  # a payload that is not JSON at all
    try:
        data = envelopes.cose(
            PKI.leaf.signing_key,
            CHAIN,
            protected,
            body,
            unprotected=unprotected,
            alg="ES256",
            chain_protected=chain_protected and name != 33,
        )
    except (TypeError, ValueError, cbor2.CBOREncodeError):
        return  # cbor2 cannot write it: no envelope to judge
    assert _outcome(data, COSE_MEDIA_TYPE) in ("verified", "refused")


@FUZZ
@given(index=st.integers(0, 3), value=cbor_values)
def test_a_cose_message_with_a_part_of_another_type_is_refused(index: int, value: Any) -> None:
    body = envelopes.payload(TARGET)
    message = cbor2.loads(
        envelopes.cose(PKI.leaf.signing_key, CHAIN, envelopes.cose_headers("ES256", NOW), body, alg="ES256")
    )
    parts = list(message.value)
    parts[index] = value
    try:
        data = cbor2.dumps(cbor2.CBORTag(18, parts))
    except (TypeError, ValueError, cbor2.CBOREncodeError):
        return
    assert _outcome(data, COSE_MEDIA_TYPE) == "refused"


@FUZZ
@given(
    data=st.binary(max_size=2048), media_type=st.sampled_from([JWS_MEDIA_TYPE, COSE_MEDIA_TYPE, "text/plain"])
)
def test_raw_bytes_are_refused(data: bytes, media_type: str) -> None:
    assert _outcome(data, media_type) == "refused"


@FUZZ
@given(flip=st.integers(0, 10_000), media_type=st.sampled_from([JWS_MEDIA_TYPE, COSE_MEDIA_TYPE]))
def test_a_valid_envelope_with_one_byte_changed_is_verified_or_refused(flip: int, media_type: str) -> None:
    body = envelopes.payload(TARGET)
    if media_type == JWS_MEDIA_TYPE:
        data = envelopes.jws(PKI.leaf.signing_key, CHAIN, envelopes.jws_headers("ES256", NOW), body)
    else:
        data = envelopes.cose(
            PKI.leaf.signing_key, CHAIN, envelopes.cose_headers("ES256", NOW), body, alg="ES256"
        )
    position = flip % len(data)
    changed = data[:position] + bytes([data[position] ^ 0x41]) + data[position + 1 :]
    assert _outcome(changed, media_type) in ("verified", "refused")


def test_a_timestamp_token_of_garbage_is_refused() -> None:
    token = base64.b64encode(b"\x30\x03\x02\x01\x00").decode()
    body = envelopes.payload(TARGET)
    data = envelopes.jws(
        PKI.leaf.signing_key,
        CHAIN,
        envelopes.jws_headers("ES256", NOW),
        body,
        unprotected={"io.cncf.notary.timestampSignature": token},
    )
    tsa = NotationTrust(
        stores={"ca": (PKI.root.certificate,), "tsa": (PKI.root.certificate,)}, identities=TRUST.identities
    )
    try:
        verify_notation(
            NotationSignature(data, JWS_MEDIA_TYPE), tsa, descriptor=DESCRIPTOR, repository=None, now=NOW
        )
    except VerificationError as error:
        assert "timestamp" in error.message
    else:
        raise AssertionError("a garbage timestamp token verified")
