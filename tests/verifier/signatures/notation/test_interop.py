"""Interop: the Notary Project's own vectors (notation-go, tests/data/notation-go/SOURCES.md, and the two in
shared/fixtures/cosign/notation) verify, or fail, as upstream's tests say."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509

from verifier.base._errors import VerificationError
from verifier.signatures.notation import (
    COSE_MEDIA_TYPE,
    JWS_MEDIA_TYPE,
    Level,
    NotationSignature,
    NotationTrust,
    StoreType,
    TargetArtifact,
    TrustedIdentity,
    load_certificates,
    verify_notation,
)
from verifier.signatures.notation._envelope import read_envelope

ANY = (TrustedIdentity.parse("*"),)
MOCK_DIGEST = "sha256:60043cf45eaebc4c0867fea485a039b598f52fd09fd5b07b0b2d2f88fad9d74e"
TIMESTAMP_DIGEST = "sha256:c0669ef34cdc14332c0f1ab0c2c01acb91d96014b172f1a76f3a39e63d1f0bda"
MOCK_IDENTITY = TrustedIdentity.parse("x509.subject:CN=Notation Test Root,O=Notary,L=Seattle,ST=WA,C=US")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def upstream(data_dir: Path) -> Path:
    return data_dir / "notation-go"


def _signature(path: Path) -> NotationSignature:
    data = path.read_bytes()
    return NotationSignature(data, JWS_MEDIA_TYPE if data.startswith(b"{") else COSE_MEDIA_TYPE, path.name)


def _certs(path: Path) -> tuple[x509.Certificate, ...]:
    return load_certificates(path.read_bytes(), location=str(path))


#: What notation-go's mock and timestamp envelopes sign (internal/mock/mocks.go ImageDescriptor's type, size).
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def _verify(
    path: Path, trust: NotationTrust, digest: str, *, media_type: str = DOCKER_MANIFEST, size: int = 528
) -> tuple[str, ...]:
    target = TargetArtifact(media_type, digest, size)
    return verify_notation(
        _signature(path), trust, descriptor=target, repository="r.example/app", now=NOW
    ).logged


@pytest.mark.parametrize("name", ["jws_signature.sig", "cose_signature.sig"])
def test_the_shared_vectors_verify_against_their_own_certificate(shared_fixtures: Path, name: str) -> None:
    path = shared_fixtures / "cosign" / "notation" / name
    target = shared_fixtures / "cosign" / "notation" / "target-manifest-sha256-19dbd2e4.json"
    digest = "sha256:" + hashlib.sha256(target.read_bytes()).hexdigest()
    leaf = read_envelope(path.read_bytes(), _signature(path).media_type).certificates[0]
    trust = NotationTrust(
        stores={"ca": (leaf,)},
        identities=(TrustedIdentity.parse("x509.subject: C=US, ST=WA, O=Notary, CN=alpine"),),
    )
    oci = json.loads(target.read_bytes())["mediaType"]
    size = target.stat().st_size
    assert _verify(path, trust, digest, media_type=oci, size=size) == ()
    with pytest.raises(VerificationError, match="the signature is for sha256:19dbd2e4"):
        _verify(path, trust, "sha256:" + "0" * 64, media_type=oci, size=size)


@pytest.mark.parametrize("level", ["strict", "permissive", "audit"])
@pytest.mark.parametrize("name", ["ca_valid_sig_env.json", "sa_valid_sig_env.json"])
def test_valid_mock_envelopes_verify_at_every_level(upstream: Path, name: str, level: Level) -> None:
    root = _certs(upstream / "ca-NotationTestRoot.pem")
    trust = NotationTrust(
        stores={"ca": root, "signingAuthority": root}, identities=(MOCK_IDENTITY,), level=level
    )
    assert _verify(upstream / name, trust, MOCK_DIGEST) == ()


@pytest.mark.parametrize("name", ["ca_expired_sig_env.json", "sa_expired_sig_env.json"])
def test_expired_mock_envelopes_fail_at_strict_and_are_logged_otherwise(upstream: Path, name: str) -> None:
    root = _certs(upstream / "ca-NotationTestRoot.pem")
    stores: dict[StoreType, tuple[x509.Certificate, ...]] = {"ca": root, "signingAuthority": root}
    with pytest.raises(VerificationError, match=r"expired at 2022-07-29T23:59:00\+00:00 \(expiry, enforced"):
        _verify(upstream / name, NotationTrust(stores=stores, identities=(MOCK_IDENTITY,)), MOCK_DIGEST)
    levels: tuple[Level, ...] = ("permissive", "audit")
    for level in levels:
        trust = NotationTrust(stores=stores, identities=(MOCK_IDENTITY,), level=level)
        assert "expiry, only logged" in _verify(upstream / name, trust, MOCK_DIGEST)[0]


def test_padded_base64_fails_integrity_at_every_level(upstream: Path) -> None:
    root = _certs(upstream / "ca-NotationTestRoot.pem")
    levels: tuple[Level, ...] = ("strict", "permissive", "audit")
    for level in levels:
        trust = NotationTrust(stores={"ca": root}, identities=(MOCK_IDENTITY,), level=level)
        with pytest.raises(VerificationError, match="not unpadded base64url"):
            _verify(upstream / "ca_invalid_sig_env.json", trust, MOCK_DIGEST)


@pytest.mark.parametrize("name", ["ca_plugin_sig_env.json", "sa_plugin_sig_env.json"])
def test_envelopes_that_need_a_verification_plugin_fail(upstream: Path, name: str) -> None:
    root = _certs(upstream / "ca-NotationTestRoot.pem")
    trust = NotationTrust(
        stores={"ca": root, "signingAuthority": root}, identities=(MOCK_IDENTITY,), level="audit"
    )
    with pytest.raises(
        VerificationError, match=r"requires a verification plugin \(io\.cncf\.notary\.verificationPlugin="
    ):
        _verify(upstream / name, trust, MOCK_DIGEST)


def _timestamp_trust(
    upstream: Path, envelope: Path, *, tsa: str | None = "tsa-globalsignRoot.cer"
) -> NotationTrust:
    # Upstream's timestamp tests check the authentic timestamp alone; the signing certificate is trusted here.
    leaf = read_envelope(envelope.read_bytes(), _signature(envelope).media_type).certificates[-1]
    stores: dict[StoreType, tuple[x509.Certificate, ...]] = {"ca": (leaf,)}
    if tsa:
        stores["tsa"] = _certs(upstream / tsa)
    return NotationTrust(stores=stores, identities=ANY)


@pytest.mark.parametrize(
    "name",
    [
        "jwsWithTimestamp.sig",
        "coseWithTimestamp.sig",
        "jwsExpiredWithTimestamp.sig",
        "coseExpiredWithTimestamp.sig",
    ],
)
def test_a_trusted_timestamp_covers_the_signing_certificate(upstream: Path, name: str) -> None:
    assert _verify(upstream / name, _timestamp_trust(upstream, upstream / name), TIMESTAMP_DIGEST) == ()


@pytest.mark.parametrize("name", ["jwsExpiredWithTimestamp.sig", "coseExpiredWithTimestamp.sig"])
def test_an_expired_certificate_without_a_tsa_store_fails(upstream: Path, name: str) -> None:
    with pytest.raises(
        VerificationError,
        match=r"no authentic timestamp covers the signing: 'CN=testTSA.*expired at 2024-06-18",
    ):
        _verify(upstream / name, _timestamp_trust(upstream, upstream / name, tsa=None), TIMESTAMP_DIGEST)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("withoutTimestamp.sig", "carries no timestamp countersignature"),
        ("timestampBeforeNotBefore.sig", "at the timestamp .* valid only from 2099"),
        ("timestampAfterNotAfter.sig", "at the timestamp .* expired at 2001"),
    ],
)
def test_timestamps_that_do_not_cover_the_certificate_fail(upstream: Path, name: str, reason: str) -> None:
    with pytest.raises(VerificationError, match=reason):
        _verify(upstream / name, _timestamp_trust(upstream, upstream / name), TIMESTAMP_DIGEST)


def test_a_timestamp_from_an_untrusted_tsa_fails(upstream: Path) -> None:
    path = upstream / "coseWithTimestamp.sig"
    trust = _timestamp_trust(upstream, path, tsa="tsa-DigiCertTSARootSHA384.cer")
    with pytest.raises(
        VerificationError, match="not signed over this signature by a TSA of the tsa trust store"
    ):
        _verify(path, trust, TIMESTAMP_DIGEST)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("TimeStampToken.p7s", "not signed over this signature"),  # a valid token over another signature
        ("TimeStampTokenWithInvalidTSTInfo.p7s", "does not decode|not signed over this signature"),
        ("TimeStampTokenWithoutCertificate.p7s", "not signed over this signature"),
    ],
)
def test_countersignatures_that_do_not_vouch_for_this_signature_fail(
    upstream: Path, tmp_path: Path, token: str, reason: str
) -> None:
    envelope = json.loads((upstream / "withoutTimestamp.sig").read_bytes())
    envelope["header"]["io.cncf.notary.timestampSignature"] = base64.b64encode(
        (upstream / token).read_bytes()
    ).decode()
    path = tmp_path / "with-token.sig"
    path.write_text(json.dumps(envelope))  # the unprotected header is outside the signature
    with pytest.raises(VerificationError, match=reason):
        _verify(path, _timestamp_trust(upstream, upstream / "withoutTimestamp.sig"), TIMESTAMP_DIGEST)
