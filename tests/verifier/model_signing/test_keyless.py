"""Keyless (Sigstore) model signatures: sigstore/model-transparency's own test signatures (data, SOURCES.md
in tests/data/model-transparency), verified offline against the pinned production trusted root; each verdict
is the one ``model_signing``'s own verifier (sigstore-python underneath) gives with the same trust
configuration: intact, a tampered, added, missing or renamed file, another identity or issuer, another
Sigstore instance's root, and the ignore-paths rules."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import model_signing
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.conftest import DATA
from tests.verifier.model_signing.conftest import write_key
from verifier.base import InputError, VerificationError
from verifier.model_signing import (
    ModelSigningCertificates,
    ModelSigningKeyless,
    ModelSigningTrust,
    read_signature,
    signing_key,
    verify_model,
)
from verifier.signatures import KeylessIdentity, TrustRoot

UPSTREAM = DATA / "model-transparency"
IDENTITY = "stefanb@us.ibm.com"
ISSUER = "https://sigstore.verify.ibm.com/oauth2"
VERSIONS = ("v1.0.1-sigstore", "v1.1.0-sigstore")


@pytest.fixture(params=VERSIONS)
def signed(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A copy of one upstream signed model folder (its ``model.sig`` inside, as upstream keeps it)."""
    folder = tmp_path / str(request.param)
    shutil.copytree(UPSTREAM / str(request.param), folder)
    return folder


def _trust_config(tmp_path: Path, root: str) -> Path:
    """The client trust configuration ``model_signing`` verifies with offline: ``root`` and a signing
    configuration (which verification never reads)."""
    config = {
        "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
        "trustedRoot": json.loads((UPSTREAM / root).read_text()),
        "signingConfig": json.loads((UPSTREAM / "signing_config.v0.2.json").read_text()),
    }
    path = tmp_path / f"{root}.trust-config.json"
    path.write_text(json.dumps(config))
    return path


def upstream(
    model: Path,
    tmp_path: Path,
    *,
    ignore: Iterable[str] = ("ignore-me",),
    identity: str = IDENTITY,
    issuer: str = ISSUER,
    root: str = "trusted_root.json",
) -> bool:
    """``model_signing verify sigstore`` as upstream's own test runs it (``--ignore-paths ignore-me``)."""
    config = model_signing.verifying.Config().use_sigstore_verifier(
        identity=identity, oidc_issuer=issuer, trust_config=_trust_config(tmp_path, root)
    )
    hashing = model_signing.hashing.Config().set_ignored_paths(
        paths=[*(model / p for p in ignore), model / "model.sig"], ignore_git_paths=True
    )
    try:
        config.set_hashing_config(hashing).verify(model, model / "model.sig")
    except Exception:  # upstream raises ValueError, sigstore's VerificationError, …
        return False
    return True


def keyless(
    identity: str = IDENTITY, issuer: str = ISSUER, root: str = "trusted_root.json"
) -> dict[str, ModelSigningTrust]:
    trust_root = TrustRoot.from_file(UPSTREAM / root)
    return {"ibm": ModelSigningKeyless(KeylessIdentity(issuer=issuer, subject=identity), trust_root)}


def ours(
    model: Path, trusted: dict[str, ModelSigningTrust] | None = None, ignore: Iterable[str] = ("ignore-me",)
) -> bool:
    try:
        verify_model(
            model, model / "model.sig", trusted or keyless(), ignore_paths=[model / p for p in ignore]
        )
    except VerificationError:
        return False
    return True


def _tamper(model: Path) -> None:
    (model / "signme-1").write_bytes(b"tampered")


def _add(model: Path) -> None:
    (model / "signme-3").write_bytes(b"not signed")


def _remove(model: Path) -> None:
    (model / "signme-2").unlink()


def _rename(model: Path) -> None:
    (model / "signme-1").rename(model / "signme-one")


def _git_file(model: Path) -> None:
    (model / ".gitignore").write_text("*.tmp\n")


def _nothing(model: Path) -> None:
    pass


CHANGES: dict[str, tuple[Callable[[Path], None], bool]] = {
    "intact": (_nothing, True),
    "tampered file": (_tamper, False),
    "added file": (_add, False),
    "missing file": (_remove, False),
    "renamed file": (_rename, False),
    "git paths changed": (_git_file, True),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_keyless_verdicts_match_upstream(signed: Path, tmp_path: Path, change: str) -> None:
    mutate, expected = CHANGES[change]
    mutate(signed)
    assert upstream(signed, tmp_path) is expected
    assert ours(signed) is expected


def test_the_identity_that_signed_is_counted(signed: Path) -> None:
    verified = verify_model(signed, signed / "model.sig", keyless(), ignore_paths=[signed / "ignore-me"])
    assert verified.signers == ("ibm",)
    assert verified.distinct_keys == 1
    assert set(verified.signature.resources) == {"signme-1", "signme-2"}


@pytest.mark.parametrize(
    ("identity", "issuer"),
    [
        ("someone@us.ibm.com", ISSUER),
        (IDENTITY, "https://accounts.google.com"),
    ],
    ids=["another identity", "another issuer"],
)
def test_another_identity_or_issuer_is_refused_as_upstream_refuses_it(
    signed: Path, tmp_path: Path, identity: str, issuer: str
) -> None:
    assert upstream(signed, tmp_path, identity=identity, issuer=issuer) is False
    with pytest.raises(VerificationError, match=r"signed by 0 of the 1 required distinct keys"):
        verify_model(
            signed, signed / "model.sig", keyless(identity, issuer), ignore_paths=[signed / "ignore-me"]
        )


def test_the_root_of_another_sigstore_instance_is_refused_as_upstream_refuses_it(
    signed: Path, tmp_path: Path
) -> None:
    root = "staging-trusted_root.json"
    assert upstream(signed, tmp_path, root=root) is False
    assert ours(signed, keyless(root=root)) is False


def test_an_unsigned_file_counts_unless_ignored_as_upstream_counts_it(tmp_path: Path) -> None:
    """1.0.1 records no ignored paths: ``ignore-me`` must be ignored by the verifier, as upstream's test
    does. 1.1.0 records ``ignore-me`` among the paths its signer ignored."""
    for version in VERSIONS:
        folder = tmp_path / version
        shutil.copytree(UPSTREAM / version, folder)
        assert upstream(folder, tmp_path, ignore=()) is ours(folder, ignore=()), version
    assert ours(tmp_path / "v1.0.1-sigstore", ignore=()) is False
    assert ours(tmp_path / "v1.1.0-sigstore", ignore=()) is True


def _edit_bundle(signature: Path, change: Callable[[dict[str, object]], None]) -> None:
    bundle = json.loads(signature.read_bytes())
    change(bundle)
    signature.write_text(json.dumps(bundle))


def test_a_bundle_without_its_log_entry_or_with_another_signature_is_refused(
    signed: Path, tmp_path: Path
) -> None:
    signature = signed / "model.sig"
    original = signature.read_bytes()

    def no_entry(bundle: dict[str, object]) -> None:
        material = bundle["verificationMaterial"]
        assert isinstance(material, dict)
        material["tlogEntries"] = []

    def flipped(bundle: dict[str, object]) -> None:
        envelope = bundle["dsseEnvelope"]
        assert isinstance(envelope, dict)
        sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
        sig[-1] ^= 1
        envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()

    for change in (no_entry, flipped):
        signature.write_bytes(original)
        _edit_bundle(signature, change)
        assert upstream(signed, tmp_path) is False, change.__name__
        assert ours(signed) is False, change.__name__


def test_a_key_signature_is_no_keyless_one(model: Path, tmp_path: Path) -> None:
    """A keyless signer counts a Fulcio certificate of its identity only, never a key's signature."""
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    model_signing.signing.Config().use_elliptic_key_signer(private_key=tmp_path / "publisher.pem").sign(
        model, signature
    )
    with pytest.raises(VerificationError, match="carries no certificate"):
        verify_model(model, signature, keyless())


def test_one_keyless_signature_is_one_signer_whichever_signers_it_matches(signed: Path) -> None:
    """Two keyless signers (the identity, and a pattern it matches) verify one signature: one signing key,
    the Fulcio leaf's, counted as a certificate-method signature counts its leaf (so one signature is never
    a keyless signer and a certificateChain signer at once), and a threshold of 2 is not met."""
    trust_root = TrustRoot.from_file(UPSTREAM / "trusted_root.json")
    trusted: dict[str, ModelSigningTrust] = {
        "ibm": ModelSigningKeyless(KeylessIdentity(issuer=ISSUER, subject=IDENTITY), trust_root),
        "ibm-any": ModelSigningKeyless(
            KeylessIdentity(issuer=ISSUER, subject_regex=r".*@us\.ibm\.com"), trust_root
        ),
    }
    ignore = [signed / "ignore-me"]
    verified = verify_model(signed, signed / "model.sig", trusted, ignore_paths=ignore)
    assert verified.signers == ("ibm", "ibm-any")
    assert verified.distinct_keys == 1
    with pytest.raises(VerificationError, match="signed by 1 of the 2 required distinct keys"):
        verify_model(signed, signed / "model.sig", trusted, threshold=2, ignore_paths=ignore)
    signature = read_signature((signed / "model.sig").read_bytes(), "model.sig")
    leaf = x509.load_der_x509_certificate(signature.bundle.chain[0]).public_key()
    spki = leaf.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert signing_key(signature, trusted["ibm"]) == f"key:{hashlib.sha256(spki).hexdigest()}"


def _fulcio_pems(tmp_path: Path) -> Path:
    """Every Fulcio CA certificate of the production trusted root, as one PEM file."""
    root = json.loads((UPSTREAM / "trusted_root.json").read_text())
    path = tmp_path / "fulcio.pem"
    path.write_bytes(
        b"".join(
            x509.load_der_x509_certificate(base64.b64decode(c["rawBytes"])).public_bytes(
                serialization.Encoding.PEM
            )
            for authority in root["certificateAuthorities"]
            for c in authority["certChain"]["certificates"]
        )
    )
    return path


def test_a_sigstore_fulcio_ca_is_no_certificate_chain(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a Sigstore Fulcio CA") as caught:
        ModelSigningCertificates.from_pem(_fulcio_pems(tmp_path).read_bytes(), "fulcio.pem")
    assert "keyless" in (caught.value.hint or "")


def _leaf_in_chain(bundle: dict[str, object]) -> None:
    material = bundle["verificationMaterial"]
    assert isinstance(material, dict)
    material["x509CertificateChain"] = {"certificates": [material.pop("certificate")]}


def _leaf_in_chain_unlogged(bundle: dict[str, object]) -> None:
    _leaf_in_chain(bundle)
    material = bundle["verificationMaterial"]
    assert isinstance(material, dict)
    del material["tlogEntries"], material["timestampVerificationData"]


@pytest.mark.parametrize(
    ("change", "upstream_verdict", "why"),
    [
        (None, False, "carries certificate, not x509CertificateChain"),
        (_leaf_in_chain, True, "carries transparency-log entries"),
        (_leaf_in_chain_unlogged, True, "is a Fulcio one"),
    ],
    ids=["as signed", "leaf moved into x509CertificateChain", "and its log entry dropped"],
)
def test_a_keyless_signature_is_no_certificate_method_one(
    signed: Path,
    tmp_path: Path,
    change: Callable[[dict[str, object]], None] | None,
    upstream_verdict: bool,
    why: str,
) -> None:
    """Fulcio's CAs trusted as a certificate chain (past the load-time refusal) would admit any Sigstore
    identity's signature with no identity, issuer, log or SCT checked. As signed, upstream's certificate
    verifier refuses it too; moved into x509CertificateChain, upstream accepts it, trtguard does not."""
    fulcio = _fulcio_pems(tmp_path)
    if change is not None:
        _edit_bundle(signed / "model.sig", change)
    config = model_signing.verifying.Config().use_certificate_verifier(certificate_chain=[fulcio])
    hashing = model_signing.hashing.Config().set_ignored_paths(
        paths=[signed / "ignore-me", signed / "model.sig"], ignore_git_paths=True
    )
    try:
        config.set_hashing_config(hashing).verify(signed, signed / "model.sig")
        verdict = True
    except Exception:  # upstream raises AttributeError on a bundle without a chain
        verdict = False
    assert verdict is upstream_verdict
    anchors = ModelSigningCertificates(tuple(x509.load_pem_x509_certificates(fulcio.read_bytes())))
    with pytest.raises(VerificationError, match=why):
        verify_model(signed, signed / "model.sig", {"fulcio": anchors}, ignore_paths=[signed / "ignore-me"])
