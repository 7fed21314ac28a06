"""Notary Project verification with a PKI made here: each way Notation verifiers go wrong (issue 19), and the
signing side round-tripping in both envelopes."""

from __future__ import annotations

import base64
import json
import re
import time
from datetime import timedelta
from typing import Any

import cbor2
import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support import notation_envelopes as envelopes
from tests.support.notary_pki import NOW, Pki, issue, make_pki, new_key, subject
from verifier.base import Deadline
from verifier.base._errors import EvidenceUnavailable, InputError, VerificationError
from verifier.signatures import TrustPolicy, verify_image_signatures
from verifier.signatures.notation import (
    COSE_MEDIA_TYPE,
    JWS_MEDIA_TYPE,
    MAX_ENVELOPE_BYTES,
    NotationSignature,
    NotationTrust,
    TargetArtifact,
    TrustedIdentity,
    sign_notation,
    verify_notation,
)
from verifier.signatures.notation import _verify as notation_verify
from verifier.signatures.notation._envelope import read_envelope
from verifier.signatures.notation._sign import _raw_signature

DIGEST = "sha256:" + "ab" * 32
DESCRIPTOR = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": DIGEST, "size": 1234}
TARGET = TargetArtifact("application/vnd.oci.image.manifest.v1+json", DIGEST, 1234)
IDENTITY = TrustedIdentity.parse("x509.subject: C=US, ST=WA, O=Example, CN=Release Signer")
ENVELOPES = [JWS_MEDIA_TYPE, COSE_MEDIA_TYPE]


def _trust(pki: Pki, **options: Any) -> NotationTrust:
    options.setdefault("stores", {"ca": (pki.root.certificate,)})
    options.setdefault("identities", (IDENTITY,))
    return NotationTrust(**options)


def _sign(pki: Pki, media_type: str = JWS_MEDIA_TYPE, **options: Any) -> NotationSignature:
    envelope = sign_notation(DESCRIPTOR, pki.leaf.signing_key, pki.chain, media_type=media_type, **options)
    return NotationSignature(envelope, media_type)


def _verify(signature: NotationSignature, trust: NotationTrust, **options: Any) -> tuple[str, ...]:
    options.setdefault("now", NOW)
    options.setdefault("repository", "registry.example.com/models/app")
    options.setdefault("descriptor", TARGET)
    return verify_notation(signature, trust, **options).logged


def _jws(pki: Pki, key: Any, protected: dict[str, Any]) -> NotationSignature:
    """A JWS envelope with exactly these protected headers, signed by ``key`` (bypassing sign_notation)."""
    header = base64.urlsafe_b64encode(json.dumps(protected).encode()).rstrip(b"=").decode()
    payload = (
        base64.urlsafe_b64encode(json.dumps({"targetArtifact": DESCRIPTOR}).encode()).rstrip(b"=").decode()
    )
    signature = _raw_signature(key, protected["alg"], f"{header}.{payload}".encode())
    document = {
        "payload": payload,
        "protected": header,
        "header": {"x5c": [base64.b64encode(c.public_bytes(Encoding.DER)).decode() for c in pki.chain]},
        "signature": base64.urlsafe_b64encode(signature).rstrip(b"=").decode(),
    }
    return NotationSignature(json.dumps(document).encode(), JWS_MEDIA_TYPE)


def _protected(alg: str, **extra: Any) -> dict[str, Any]:
    return {
        "alg": alg,
        "crit": ["io.cncf.notary.signingScheme"],
        "cty": "application/vnd.cncf.notary.payload.v1+json",
        "io.cncf.notary.signingScheme": "notary.x509",
        "io.cncf.notary.signingTime": NOW.isoformat(),
    } | extra


@pytest.mark.parametrize("media_type", ENVELOPES)
@pytest.mark.parametrize("kind", ["ec-p256", "ec-p384", "ec-p521", "rsa-2048", "rsa-3072", "rsa-4096"])
def test_signatures_made_here_verify_in_both_envelopes(media_type: str, kind: str) -> None:
    pki = make_pki(kind)
    assert _verify(_sign(pki, media_type), _trust(pki)) == ()


@pytest.mark.parametrize("media_type", ENVELOPES)
def test_a_tampered_envelope_fails_integrity(media_type: str) -> None:
    pki = make_pki()
    good = _sign(pki, media_type).envelope
    other = sign_notation(
        {**DESCRIPTOR, "digest": "sha256:" + "cd" * 32},
        pki.leaf.signing_key,
        pki.chain,
        media_type=media_type,
    )
    if media_type == JWS_MEDIA_TYPE:
        document, foreign = json.loads(good), json.loads(other)
        document["payload"] = foreign["payload"]
        tampered = json.dumps(document).encode()
    else:
        message, foreign = cbor2.loads(good), cbor2.loads(other)
        tampered = cbor2.dumps(
            cbor2.CBORTag(18, [message.value[0], dict(message.value[1]), foreign.value[2], message.value[3]])
        )
    with pytest.raises(VerificationError, match="signature does not verify"):
        _verify(NotationSignature(tampered, media_type), _trust(pki))


@pytest.mark.parametrize("level", ["strict", "permissive", "audit"])
def test_an_untrusted_root_never_passes_at_any_level(level: str) -> None:
    pki, stranger = make_pki(), make_pki()
    trust = _trust(stranger, level=level)
    with pytest.raises(VerificationError, match="contains no certificate of the signer's 'ca' trust store"):
        _verify(_sign(pki), trust)


@pytest.mark.parametrize("level", ["strict", "permissive", "audit"])
def test_an_untrusted_identity_never_passes_at_any_level(level: str) -> None:
    pki = make_pki()
    trust = _trust(
        pki,
        identities=(TrustedIdentity.parse("x509.subject: C=US, ST=WA, O=Example, CN=Someone Else"),),
        level=level,
    )
    with pytest.raises(VerificationError, match="matches none of the trusted identities"):
        _verify(_sign(pki), trust)


def test_skip_is_refused_as_a_level() -> None:
    pki = make_pki()
    with pytest.raises(InputError, match="'skip' verifies nothing"):
        _trust(pki, level="skip")


@pytest.mark.parametrize(("level", "fails"), [("strict", True), ("permissive", False), ("audit", False)])
def test_the_signers_expiry_is_enforced_at_strict_and_logged_otherwise(level: str, fails: bool) -> None:
    pki = make_pki()
    signature = _sign(pki, signing_time=NOW - timedelta(days=2), expiry=NOW - timedelta(days=1))
    if fails:
        with pytest.raises(
            VerificationError, match=r"the signature expired at .* \(expiry, enforced at level strict\)"
        ):
            _verify(signature, _trust(pki, level=level))
    else:
        assert "expiry, only logged" in _verify(signature, _trust(pki, level=level))[0]


@pytest.mark.parametrize(("level", "fails"), [("strict", True), ("permissive", False), ("audit", False)])
def test_a_chain_expired_now_without_a_timestamp_is_enforced_at_strict_only(level: str, fails: bool) -> None:
    pki = make_pki()
    signature = _sign(pki)
    later = pki.leaf.certificate.not_valid_after_utc + timedelta(days=1)
    if fails:
        with pytest.raises(
            VerificationError, match=r"now, and no authentic timestamp covers the signing: .*expired"
        ):
            _verify(signature, _trust(pki, level=level), now=later)
    else:
        assert "authenticTimestamp, only logged" in _verify(signature, _trust(pki, level=level), now=later)[0]


def test_the_chain_must_have_been_valid_at_the_signing_time() -> None:
    pki = make_pki()
    signature = _sign(pki, signing_time=pki.leaf.certificate.not_valid_before_utc - timedelta(days=1))
    with pytest.raises(VerificationError, match=r"at the claimed signing time .* valid only from"):
        _verify(signature, _trust(pki))


def test_a_tsa_store_makes_a_timestamp_mandatory() -> None:
    pki = make_pki()
    trust = _trust(pki, stores={"ca": (pki.root.certificate,), "tsa": (make_pki().root.certificate,)})
    with pytest.raises(VerificationError, match="carries no timestamp countersignature"):
        _verify(_sign(pki), trust)


def test_the_algorithm_must_follow_the_key() -> None:
    pki = make_pki("rsa-3072")
    assert _verify(_jws(pki, pki.leaf.signing_key, _protected("PS384")), _trust(pki)) == ()
    # jwcrypto alone would accept this PS256 signature by a 3072-bit key.
    with pytest.raises(VerificationError, match="algorithm is 'PS256', but the signing key calls for PS384"):
        _verify(_jws(pki, pki.leaf.signing_key, _protected("PS256")), _trust(pki))


@pytest.mark.parametrize(
    ("protected", "reason"),
    [
        ({"crit": []}, 'no "crit" list'),
        (
            {
                "crit": ["io.cncf.notary.expiry"],
                "io.cncf.notary.expiry": (NOW + timedelta(days=9)).isoformat(),
            },
            "not marked critical: io.cncf.notary.signingScheme",
        ),
        (
            {"io.cncf.notary.expiry": (NOW + timedelta(days=9)).isoformat()},
            "not marked critical: io.cncf.notary.expiry",
        ),
        (
            {
                "crit": ["io.cncf.notary.signingScheme", "io.cncf.notary.verificationPlugin"],
                "io.cncf.notary.verificationPlugin": "acme",
            },
            "requires a verification plugin",
        ),
        ({"crit": ["io.cncf.notary.signingScheme", "x-acme"], "x-acme": 1}, "does not understand: x-acme"),
        ({"io.cncf.notary.signingScheme": "notary.x509.signingAuthority"}, "must not be present"),
        (
            {"io.cncf.notary.authenticSigningTime": NOW.isoformat()},
            "authenticSigningTime must not be present for notary.x509$",
        ),
        ({"io.cncf.notary.signingScheme": "notary.x509.other"}, "is not notary.x509 or"),
        ({"io.cncf.notary.signingScheme": ["notary.x509"]}, "is not notary.x509 or"),
        ({"cty": "application/json"}, "content type"),
    ],
)
def test_critical_headers_follow_the_spec(protected: dict[str, Any], reason: str) -> None:
    pki = make_pki()
    with pytest.raises(VerificationError, match=reason):
        _verify(_jws(pki, pki.leaf.signing_key, _protected("ES256", **protected)), _trust(pki))


PLUGIN = "io.cncf.notary.verificationPlugin"
MIN_VERSION = "io.cncf.notary.verificationPluginMinVersion"


@pytest.mark.parametrize("media_type", ENVELOPES)
@pytest.mark.parametrize(
    ("extra", "critical"),
    [
        ({PLUGIN: "acme"}, []),  # was accepted: the header was only refused when crit listed it
        ({PLUGIN: "acme"}, [PLUGIN]),
        ({PLUGIN: "acme", MIN_VERSION: "1.0.0"}, [PLUGIN]),
        ({PLUGIN: "acme", MIN_VERSION: "1.0.0"}, [PLUGIN, MIN_VERSION]),
        ({MIN_VERSION: "1.0.0"}, []),
        ({PLUGIN: ""}, []),
        ({PLUGIN: 7}, []),
    ],
)
def test_a_signature_that_requires_a_verification_plugin_never_verifies(
    media_type: str, extra: dict[str, Any], critical: list[str]
) -> None:
    """notation-go refuses a verificationPlugin attribute that is not critical, and one that is without the
    plugin; trtguard runs none, so every such signature fails, in both envelopes, signed for real."""
    pki = make_pki()
    body = envelopes.payload(DESCRIPTOR)
    if media_type == JWS_MEDIA_TYPE:
        headers = envelopes.jws_headers("ES256", NOW, **extra)
        headers["crit"] = [*headers["crit"], *critical]
        data = envelopes.jws(pki.leaf.signing_key, pki.chain, headers, body)
    else:
        cose_headers = envelopes.cose_headers("ES256", NOW, **extra)
        cose_headers[2] = [*cose_headers[2], *critical]
        data = envelopes.cose(pki.leaf.signing_key, pki.chain, cose_headers, body, alg="ES256")
    with pytest.raises(VerificationError, match="requires a verification plugin"):
        _verify(NotationSignature(data, media_type), _trust(pki, level="audit"))
    # The same envelope without the attribute verifies: the refusal is the plugin's, nothing else.
    plain = {k: v for k, v in extra.items() if k not in (PLUGIN, MIN_VERSION)}
    if media_type == JWS_MEDIA_TYPE:
        data = envelopes.jws(
            pki.leaf.signing_key, pki.chain, envelopes.jws_headers("ES256", NOW, **plain), body
        )
    else:
        data = envelopes.cose(
            pki.leaf.signing_key, pki.chain, envelopes.cose_headers("ES256", NOW, **plain), body, alg="ES256"
        )
    assert _verify(NotationSignature(data, media_type), _trust(pki)) == ()


@pytest.mark.parametrize(
    ("scheme", "time_header"),
    [
        ("notary.x509", "io.cncf.notary.signingTime"),
        ("notary.x509.signingAuthority", "io.cncf.notary.authenticSigningTime"),
    ],
)
def test_each_scheme_needs_its_signing_time(scheme: str, time_header: str) -> None:
    pki = make_pki()
    headers = _protected("ES256", **{"io.cncf.notary.signingScheme": scheme})
    del headers["io.cncf.notary.signingTime"]
    with pytest.raises(
        VerificationError, match=f"^{re.escape(time_header)} is missing for {re.escape(scheme)}$"
    ):
        _verify(_jws(pki, pki.leaf.signing_key, headers), _trust(pki))


def test_the_signing_authority_scheme_needs_its_authentic_time_marked_critical() -> None:
    pki = make_pki()
    headers = _protected("ES256", **{"io.cncf.notary.signingScheme": "notary.x509.signingAuthority"})
    del headers["io.cncf.notary.signingTime"]
    headers["io.cncf.notary.authenticSigningTime"] = NOW.isoformat()
    trust = _trust(pki, stores={"signingAuthority": (pki.root.certificate,)})
    with pytest.raises(
        VerificationError, match=r"not marked critical: io\.cncf\.notary\.authenticSigningTime"
    ):
        _verify(_jws(pki, pki.leaf.signing_key, headers), trust)
    headers["crit"] = ["io.cncf.notary.signingScheme", "io.cncf.notary.authenticSigningTime"]
    assert _verify(_jws(pki, pki.leaf.signing_key, headers), trust) == ()
    # notary.x509.signingAuthority signatures are anchored in signingAuthority stores only.
    with pytest.raises(
        VerificationError, match="no certificate of the signer's 'signingAuthority' trust store"
    ):
        _verify(_jws(pki, pki.leaf.signing_key, headers), _trust(pki))


def test_notary_x509_signatures_use_only_ca_stores() -> None:
    pki = make_pki()
    trust = _trust(pki, stores={"signingAuthority": (pki.root.certificate,)})
    with pytest.raises(
        VerificationError, match=r"no certificate of the signer's 'ca' trust store .*never anchored"
    ):
        _verify(_sign(pki), trust)


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (
            {"usages": [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CODE_SIGNING]},
            "must not contain serverAuth",
        ),
        ({"usages": [ExtendedKeyUsageOID.TIME_STAMPING]}, "must not contain timeStamping"),
        ({"key_usage_critical": False}, "key usage .* not marked critical"),
        ({"ca": True}, "is a CA certificate"),
    ],
)
def test_the_leaf_certificate_profile_is_checked(options: dict[str, Any], reason: str) -> None:
    pki = make_pki()
    pki.leaf = pki.leaf_for(subject("Release Signer", unit="Builds"), **options)
    with pytest.raises(VerificationError, match=reason):
        _verify(_sign(pki), _trust(pki))


def test_a_chain_not_ending_in_its_root_or_with_a_path_too_long_fails() -> None:
    pki = make_pki()
    envelope = sign_notation(DESCRIPTOR, pki.leaf.signing_key, pki.chain[:2])
    with pytest.raises(VerificationError, match="not a self-signed root"):
        _verify(NotationSignature(envelope, JWS_MEDIA_TYPE), _trust(pki))
    deeper = issue(subject("Team CA"), issuer=pki.intermediate, ca=True, key=new_key())
    leaf = issue(subject("Release Signer", unit="Builds"), issuer=deeper)
    chain = [leaf.certificate, deeper.certificate, pki.intermediate.certificate, pki.root.certificate]
    envelope = sign_notation(DESCRIPTOR, leaf.signing_key, chain)
    with pytest.raises(VerificationError, match=r"path length 0 .* does not admit"):
        _verify(NotationSignature(envelope, JWS_MEDIA_TYPE), _trust(pki))


def test_registry_scopes_limit_the_signer() -> None:
    pki = make_pki()
    trust = _trust(pki, scopes=("registry.example.com/models/app",))
    assert _verify(_sign(pki), trust) == ()
    with pytest.raises(VerificationError, match="outside the signer's registry scopes"):
        _verify(_sign(pki), trust, repository="registry.example.com/models/other")


def test_the_signer_refuses_a_key_that_is_not_the_certificates() -> None:
    pki, other = make_pki(), make_pki()
    with pytest.raises(InputError, match="does not belong to the signing certificate"):
        sign_notation(DESCRIPTOR, other.leaf.signing_key, pki.chain)


def test_one_signature_counts_once_whichever_stores_admit_it() -> None:
    pki = make_pki()
    by_root = _trust(pki)
    by_intermediate = _trust(pki, stores={"ca": (pki.intermediate.certificate,)})
    policy = TrustPolicy(notation={"root": by_root, "intermediate": by_intermediate}, threshold=2)
    with pytest.raises(VerificationError, match="1 of 2 required signatures"):
        verify_image_signatures(DIGEST, policy, notation=[_sign(pki)], notation_target=TARGET, now=NOW)
    other = pki.leaf_for(subject("Second Signer", unit="Builds"))
    second = NotationSignature(
        sign_notation(DESCRIPTOR, other.signing_key, [other.certificate, *pki.chain[1:]]), JWS_MEDIA_TYPE
    )
    policy = TrustPolicy(
        notation={"root": _trust(pki, identities=(TrustedIdentity.parse("*"),))}, threshold=2
    )
    assert (
        verify_image_signatures(
            DIGEST, policy, notation=[_sign(pki), second], notation_target=TARGET, now=NOW
        ).verified
        == 2
    )


# Issue 25: the false accepts and false rejects outside material found, each at its root.


@pytest.mark.parametrize("media_type", ENVELOPES)
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"size": 1235}, "size 1235 \\(the artifact's is 1234\\)"),
        ({"mediaType": "application/vnd.docker.distribution.manifest.v2+json"}, "media type .*docker"),
        ({"size": "1234"}, "targetArtifact.size is not a non-negative integer"),
        ({"size": True}, "targetArtifact.size is not a non-negative integer"),
        ({"mediaType": None}, "lacks its mediaType or digest"),
    ],
)
def test_the_whole_target_descriptor_must_be_the_artifacts(
    media_type: str, change: dict[str, Any], reason: str
) -> None:
    pki = make_pki()
    envelope = sign_notation({**DESCRIPTOR, **change}, pki.leaf.signing_key, pki.chain, media_type=media_type)
    with pytest.raises(VerificationError, match=reason):
        _verify(NotationSignature(envelope, media_type), _trust(pki))


def test_without_the_manifest_descriptor_no_notation_signature_counts() -> None:
    pki = make_pki()
    policy = TrustPolicy(notation={"n": _trust(pki)})
    with pytest.raises(VerificationError, match="descriptor \\(media type and size\\) is unknown"):
        verify_image_signatures(DIGEST, policy, notation=[_sign(pki)], now=NOW)


def test_a_leaf_with_any_extended_key_usage_is_refused() -> None:
    pki = make_pki()
    leaf = pki.leaf_for(
        subject("Release Signer"),
        usages=[ExtendedKeyUsageOID.CODE_SIGNING, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE],
    )
    chain = [leaf.certificate, pki.intermediate.certificate, pki.root.certificate]
    signature = NotationSignature(sign_notation(DESCRIPTOR, leaf.signing_key, chain), JWS_MEDIA_TYPE)
    with pytest.raises(VerificationError, match="must not contain anyExtendedKeyUsage"):
        _verify(signature, _trust(pki))


def test_a_subject_with_equals_hash_never_matches_an_identity() -> None:
    pki = make_pki()
    leaf = pki.leaf_for(subject("Bad=#CN"))
    chain = [leaf.certificate, pki.intermediate.certificate, pki.root.certificate]
    signature = NotationSignature(sign_notation(DESCRIPTOR, leaf.signing_key, chain), JWS_MEDIA_TYPE)
    partial = TrustedIdentity.parse("x509.subject: C=US, ST=WA, O=Example")
    with pytest.raises(VerificationError, match='contains "=#", which Notation refuses'):
        _verify(signature, _trust(pki, identities=(partial,)))
    # '*' does not read the subject, as Notation's wildcard does not
    assert _verify(signature, _trust(pki, identities=(TrustedIdentity.parse("*"),))) == ()


def test_a_cose_chain_in_the_protected_header_is_read() -> None:
    pki = make_pki()
    body = envelopes.payload(DESCRIPTOR)
    data = envelopes.cose(
        pki.leaf.signing_key,
        pki.chain,
        envelopes.cose_headers("ES256", NOW),
        body,
        alg="ES256",
        chain_protected=True,
    )
    assert _verify(NotationSignature(data, COSE_MEDIA_TYPE), _trust(pki)) == ()
    both = envelopes.cose(
        pki.leaf.signing_key,
        pki.chain,
        envelopes.cose_headers("ES256", NOW),
        body,
        alg="ES256",
        chain_protected=True,
        unprotected={33: [c.public_bytes(Encoding.DER) for c in pki.chain]},
    )
    with pytest.raises(VerificationError, match="both protected and unprotected"):
        _verify(NotationSignature(both, COSE_MEDIA_TYPE), _trust(pki))


@pytest.mark.parametrize("crit", [[["io.cncf.notary.signingScheme"]], [{"a": 1}], [None], [True]])
def test_a_crit_of_other_types_is_refused_not_a_crash(crit: list[Any]) -> None:
    pki = make_pki()
    headers = envelopes.jws_headers("ES256", NOW, crit=crit)
    data = envelopes.jws(pki.leaf.signing_key, pki.chain, headers, envelopes.payload(DESCRIPTOR))
    with pytest.raises(VerificationError, match='"crit" lists something other than header names'):
        _verify(NotationSignature(data, JWS_MEDIA_TYPE), _trust(pki))


def test_an_unexpected_error_in_one_signature_refuses_only_it(monkeypatch: pytest.MonkeyPatch) -> None:
    pki = make_pki()
    hostile = NotationSignature(b"{}", JWS_MEDIA_TYPE, "hostile")
    real = verify_notation

    def flaky(signature: NotationSignature, *args: Any, **kwargs: Any) -> Any:
        if signature.origin == "hostile":
            raise TypeError("a reader bug")
        return real(signature, *args, **kwargs)

    monkeypatch.setattr("verifier.signatures._verify.verify_notation", flaky)
    policy = TrustPolicy(notation={"n": _trust(pki)})
    result = verify_image_signatures(
        DIGEST, policy, notation=[hostile, _sign(pki)], notation_target=TARGET, now=NOW
    )
    assert result.verified == 1
    with pytest.raises(VerificationError, match="could not be checked \\(TypeError\\)"):
        verify_image_signatures(DIGEST, policy, notation=[hostile], notation_target=TARGET, now=NOW)


# D1 (issue 25): hostile envelopes are bounded, read once, and the request's deadline holds across them.


@pytest.mark.parametrize("media_type", ENVELOPES)
def test_an_envelope_above_the_bound_fails_as_itself_unread(
    media_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki = make_pki()
    body = envelopes.payload(DESCRIPTOR)
    padding = "x" * MAX_ENVELOPE_BYTES  # an unprotected header: the signature still verifies
    if media_type == JWS_MEDIA_TYPE:
        headers = envelopes.jws_headers("ES256", NOW)
        big = envelopes.jws(
            pki.leaf.signing_key,
            pki.chain,
            headers,
            body,
            unprotected={"io.cncf.notary.signingAgent": padding},
        )
    else:
        big = envelopes.cose(
            pki.leaf.signing_key,
            pki.chain,
            envelopes.cose_headers("ES256", NOW),
            body,
            alg="ES256",
            unprotected={"io.cncf.notary.signingAgent": padding},
        )
    parsed: list[bytes] = []
    monkeypatch.setattr(json, "loads", lambda data, *a, **k: parsed.append(data))  # nothing is parsed
    monkeypatch.setattr(cbor2, "loads", lambda data, *a, **k: parsed.append(data))
    with pytest.raises(VerificationError, match="at most 1024 KiB are read"):
        _verify(NotationSignature(big, media_type), _trust(pki))
    assert parsed == []


def test_an_envelope_is_read_once_whatever_the_number_of_trusts(monkeypatch: pytest.MonkeyPatch) -> None:
    pki = make_pki()
    reads: list[bytes] = []
    real = read_envelope

    def counted(data: bytes, media_type: str) -> Any:
        reads.append(data)
        return real(data, media_type)

    monkeypatch.setattr(notation_verify, "read_envelope", counted)
    good, bad = _sign(pki), NotationSignature(b"{}", JWS_MEDIA_TYPE, "hostile")
    policy = TrustPolicy(notation={f"n{number}": _trust(pki) for number in range(5)})
    result = verify_image_signatures(DIGEST, policy, notation=[good, bad], notation_target=TARGET, now=NOW)
    assert result.verified == 1
    assert len(reads) == 2  # one per envelope, not one per envelope and trust (10)
    with pytest.raises(VerificationError, match="not a flattened JSON serialization"):
        _verify(bad, _trust(pki))  # the same refusal again, without reading again
    assert len(reads) == 2


def test_a_passed_deadline_stops_before_the_next_envelope_and_is_never_an_allow() -> None:
    pki = make_pki()
    policy = TrustPolicy(notation={"n": _trust(pki)})
    signatures = [_sign(pki) for _ in range(3)]
    passed = Deadline(time.monotonic() - 1)  # already over: no timing is involved
    with pytest.raises(EvidenceUnavailable, match="ran out of time after verifying 0 of 3") as stopped:
        verify_image_signatures(
            DIGEST, policy, notation=signatures, notation_target=TARGET, now=NOW, deadline=passed
        )
    assert stopped.value.transient  # not a verdict the cache keeps
    result = verify_image_signatures(
        DIGEST, policy, notation=signatures, notation_target=TARGET, now=NOW, deadline=Deadline.never()
    )
    assert result.verified >= 1
