"""Interop with the real ``model_signing`` library: signatures it makes, and the verdict its own verifier
gives, are trtguard's verdict too (key and certificate methods; tampered, added, missing and renamed files,
another key, the ignore-paths rules)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import model_signing
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.verifier.model_signing.conftest import resign, write_ca, write_key, write_leaf
from verifier.base import InputError, VerificationError
from verifier.model_signing import (
    ModelSigningCertificates,
    ModelSigningKey,
    ModelSigningTrust,
    verify_model,
)


def _hashing(model: Path, signature: Path, ignore: Iterable[str] = ()) -> model_signing.hashing.Config:
    """The hashing the CLI configures: the given paths and the signature file ignored, git paths too."""
    paths = [*ignore]
    if signature.is_relative_to(model):
        paths.append(str(signature.relative_to(model)))
    return model_signing.hashing.Config().set_ignored_paths(paths=paths, ignore_git_paths=True)


def sign_key(model: Path, signature: Path, key: Path, ignore: Iterable[str] = ()) -> None:
    config = model_signing.signing.Config().use_elliptic_key_signer(private_key=key)
    config.set_hashing_config(_hashing(model, signature, ignore)).sign(model, signature)


def upstream_key(model: Path, signature: Path, public: Path) -> bool:
    """``model_signing``'s own verdict with a public key."""
    config = model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public)
    try:
        config.set_hashing_config(_hashing(model, signature)).verify(model, signature)
    except (ValueError, KeyError):  # KeyError: a statement without a field upstream reads
        return False
    return True


def ours(model: Path, signature: Path, trusted: dict[str, ModelSigningTrust]) -> bool:
    try:
        verify_model(model, signature, trusted)
    except (InputError, VerificationError):  # a signature upstream cannot read is refused as one
        return False
    return True


def _key(public: Path) -> dict[str, ModelSigningTrust]:
    return {"publisher": ModelSigningKey.from_pem(public.read_bytes())}


def _tamper(model: Path) -> None:
    (model / "weights.onnx").write_bytes(b"\x08\x07other weights")


def _add(model: Path) -> None:
    (model / "extra.bin").write_bytes(b"not signed")


def _remove(model: Path) -> None:
    (model / "sub" / "config.json").unlink()


def _rename(model: Path) -> None:
    (model / "weights.onnx").rename(model / "weights2.onnx")


def _git_file(model: Path) -> None:
    (model / ".git" / "index").write_bytes(b"git's own")
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
def test_key_method_verdicts_match_upstream(model: Path, tmp_path: Path, change: str) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = model / "model.sig"  # inside the model: ignored when signing and verifying
    sign_key(model, signature, tmp_path / "publisher.pem")
    mutate, expected = CHANGES[change]
    mutate(model)
    public = tmp_path / "publisher.pub"
    assert upstream_key(model, signature, public) is expected
    assert ours(model, signature, _key(public)) is expected


def test_another_key_is_refused_as_upstream_refuses_it(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    write_key(tmp_path / "other.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    assert upstream_key(model, signature, tmp_path / "other.pub") is False
    with pytest.raises(VerificationError, match=r"signed by 0 of the 1 required distinct keys.*another key"):
        verify_model(model, signature, _key(tmp_path / "other.pub"))


def test_paths_the_signer_ignored_are_ignored_on_verification(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem", ignore=["README.md", "sub"])
    (model / "README.md").write_text("edited\n")
    (model / "sub" / "notes.txt").write_text("added under an ignored folder\n")
    public = tmp_path / "publisher.pub"
    assert upstream_key(model, signature, public) is True
    assert ours(model, signature, _key(public)) is True
    _add(model)  # outside the ignored paths
    assert upstream_key(model, signature, public) is False
    assert ours(model, signature, _key(public)) is False


def test_a_one_file_model_p384(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem", ec.SECP384R1())
    onnx = model / "weights.onnx"
    signature = tmp_path / "weights.sig"
    sign_key(onnx, signature, tmp_path / "publisher.pem")
    public = tmp_path / "publisher.pub"
    assert upstream_key(onnx, signature, public) is True
    assert ours(onnx, signature, _key(public)) is True
    _tamper(model)
    assert upstream_key(onnx, signature, public) is False
    assert ours(onnx, signature, _key(public)) is False


def test_the_message_names_what_differs(model: Path, tmp_path: Path) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    _rename(model)
    with pytest.raises(VerificationError) as caught:
        verify_model(model, signature, _key(tmp_path / "publisher.pub"))
    assert "files not signed: weights2.onnx" in caught.value.message
    assert "signed files missing: weights.onnx" in caught.value.message


def _certificates(tmp_path: Path, *cas: str) -> dict[str, ModelSigningTrust]:
    return {ca: ModelSigningCertificates.from_pem((tmp_path / f"{ca}.pem").read_bytes(), ca) for ca in cas}


def sign_certificate(model: Path, signature: Path, key: Path, leaf: Path, ca: Path) -> None:
    config = model_signing.signing.Config().use_certificate_signer(
        private_key=key, signing_certificate=leaf, certificate_chain=[ca]
    )
    config.set_hashing_config(_hashing(model, signature)).sign(model, signature)


def upstream_certificate(model: Path, signature: Path, ca: Path) -> bool:
    config = model_signing.verifying.Config().use_certificate_verifier(certificate_chain=[ca])
    try:
        config.set_hashing_config(_hashing(model, signature)).verify(model, signature)
    except Exception:
        return False
    return True


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_certificate_method_verdicts_match_upstream(model: Path, tmp_path: Path, change: str) -> None:
    key = write_key(tmp_path / "publisher.pem")
    write_leaf(tmp_path / "leaf.pem", key, write_ca(tmp_path / "ca.pem", "publisher CA"))
    signature = model / "model.sig"
    sign_certificate(model, signature, tmp_path / "publisher.pem", tmp_path / "leaf.pem", tmp_path / "ca.pem")
    mutate, expected = CHANGES[change]
    mutate(model)
    assert upstream_certificate(model, signature, tmp_path / "ca.pem") is expected
    assert ours(model, signature, _certificates(tmp_path, "ca")) is expected


def test_a_certificate_of_another_ca_is_refused_as_upstream_refuses_it(model: Path, tmp_path: Path) -> None:
    key = write_key(tmp_path / "publisher.pem")
    write_leaf(tmp_path / "leaf.pem", key, write_ca(tmp_path / "ca.pem", "publisher CA"))
    write_ca(tmp_path / "other.pem", "another CA")
    signature = tmp_path / "model.sig"
    sign_certificate(model, signature, tmp_path / "publisher.pem", tmp_path / "leaf.pem", tmp_path / "ca.pem")
    assert upstream_certificate(model, signature, tmp_path / "other.pem") is False
    with pytest.raises(VerificationError, match="does not chain to a trusted one"):
        verify_model(model, signature, _certificates(tmp_path, "other"))
    # A signature made with a key only is no certificate signature.
    sign_key(model, signature, tmp_path / "publisher.pem")
    assert ours(model, signature, _certificates(tmp_path, "ca")) is False


def test_one_leaf_key_through_two_cas_is_one_signer(model: Path, tmp_path: Path) -> None:
    key = write_key(tmp_path / "publisher.pem")
    write_leaf(tmp_path / "leaf.pem", key, write_ca(tmp_path / "ca1.pem", "CA one"))
    signature = tmp_path / "model.sig"
    sign_certificate(
        model, signature, tmp_path / "publisher.pem", tmp_path / "leaf.pem", tmp_path / "ca1.pem"
    )
    trusted = _certificates(tmp_path, "ca1")
    trusted["same key"] = ModelSigningKey.from_pem((tmp_path / "publisher.pub").read_bytes())
    assert verify_model(model, signature, trusted).distinct_keys == 1
    with pytest.raises(VerificationError, match="signed by 1 of the 2 required distinct keys"):
        verify_model(model, signature, trusted, threshold=2)


def test_the_copy_of_a_model_elsewhere_verifies(model: Path, tmp_path: Path) -> None:
    """The model's name is informative only (upstream): a copy under another folder name still verifies."""
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    copy = tmp_path / "copy"
    shutil.copytree(model, copy)
    assert upstream_key(copy, signature, tmp_path / "publisher.pub") is True
    assert ours(copy, signature, _key(tmp_path / "publisher.pub")) is True


def _edit(signature: Path, change: Callable[[dict[str, Any]], None]) -> None:
    bundle = json.loads(signature.read_bytes())
    change(bundle)
    signature.write_text(json.dumps(bundle))


def _media_type(value: str) -> Callable[[dict[str, Any]], None]:
    def change(bundle: dict[str, Any]) -> None:
        bundle["mediaType"] = value

    return change


def _no_public_key(bundle: dict[str, Any]) -> None:
    del bundle["verificationMaterial"]["publicKey"]


def _chain_beside_key(bundle: dict[str, Any]) -> None:
    bundle["verificationMaterial"]["x509CertificateChain"] = {"certificates": [{"rawBytes": "AAAA"}]}


KEY_BUNDLES: dict[str, Callable[[dict[str, Any]], None]] = {
    "media type v0.1": _media_type("application/vnd.dev.sigstore.bundle+json;version=0.1"),
    "media type v0.3 (alternative spelling)": _media_type(
        "application/vnd.dev.sigstore.bundle+json;version=0.3"
    ),
    "media type v0.3.1": _media_type("application/vnd.dev.sigstore.bundle.v0.3.1+json"),
    "no publicKey": _no_public_key,
    "x509CertificateChain beside publicKey": _chain_beside_key,
}


@pytest.mark.parametrize("change", sorted(KEY_BUNDLES))
def test_bundle_shapes_upstream_refuses_under_the_key_method_are_refused(
    model: Path, tmp_path: Path, change: str
) -> None:
    write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    _edit(signature, KEY_BUNDLES[change])
    public = tmp_path / "publisher.pub"
    assert upstream_key(model, signature, public) is False
    assert ours(model, signature, _key(public)) is False


def _drop_subject_name(statement: dict[str, Any]) -> None:
    del statement["subject"][0]["name"]


def _drop_allow_symlinks(statement: dict[str, Any]) -> None:
    del statement["predicate"]["serialization"]["allow_symlinks"]


@pytest.mark.parametrize(
    "change", [_drop_subject_name, _drop_allow_symlinks], ids=["no name", "no allow_symlinks"]
)
def test_statements_upstream_cannot_read_are_refused(
    model: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    key = write_key(tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    sign_key(model, signature, tmp_path / "publisher.pem")
    resign(signature, key, change)
    public = tmp_path / "publisher.pub"
    assert upstream_key(model, signature, public) is False
    with pytest.raises(InputError, match=r"subject\[0\] has no name|serialization has no allow_symlinks"):
        verify_model(model, signature, _key(public))


def _as_one_certificate(bundle: dict[str, Any]) -> None:
    material = bundle["verificationMaterial"]
    material["certificate"] = material.pop("x509CertificateChain")["certificates"][0]


def _certificate_beside_chain(bundle: dict[str, Any]) -> None:
    material = bundle["verificationMaterial"]
    material["certificate"] = material["x509CertificateChain"]["certificates"][0]


def _hint_beside_chain(bundle: dict[str, Any]) -> None:
    bundle["verificationMaterial"]["publicKey"] = {"hint": "ab" * 32}


CERTIFICATE_BUNDLES: dict[str, Callable[[dict[str, Any]], None]] = {
    "one certificate (the keyless layout)": _as_one_certificate,
    "certificate beside x509CertificateChain": _certificate_beside_chain,
    "publicKey beside x509CertificateChain": _hint_beside_chain,
    "media type v0.2": _media_type("application/vnd.dev.sigstore.bundle+json;version=0.2"),
}


@pytest.mark.parametrize("change", sorted(CERTIFICATE_BUNDLES))
def test_bundle_shapes_upstream_refuses_under_the_certificate_method_are_refused(
    model: Path, tmp_path: Path, change: str
) -> None:
    key = write_key(tmp_path / "publisher.pem")
    write_leaf(tmp_path / "leaf.pem", key, write_ca(tmp_path / "ca.pem", "publisher CA"))
    signature = tmp_path / "model.sig"
    sign_certificate(model, signature, tmp_path / "publisher.pem", tmp_path / "leaf.pem", tmp_path / "ca.pem")
    _edit(signature, CERTIFICATE_BUNDLES[change])
    assert upstream_certificate(model, signature, tmp_path / "ca.pem") is False
    assert ours(model, signature, _certificates(tmp_path, "ca")) is False


def _intermediate(
    path: Path, ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate]
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """An intermediate CA certificate issued by ``ca``, at ``path`` (PEM), with its key."""
    ca_key, ca_certificate = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC) - timedelta(minutes=3)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "intermediate")]))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=20))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key, certificate


def test_only_a_self_signed_root_is_a_trust_anchor_as_upstream(model: Path, tmp_path: Path) -> None:
    """OpenSSL's store (upstream) builds no partial chain: an intermediate or the leaf itself, trusted
    alone, anchors nothing; the intermediate beside its root completes the chain, as in upstream."""
    key = write_key(tmp_path / "publisher.pem")
    intermediate = _intermediate(tmp_path / "intermediate.pem", write_ca(tmp_path / "root.pem", "root CA"))
    write_leaf(tmp_path / "leaf.pem", key, intermediate)
    signature = tmp_path / "model.sig"
    sign_certificate(
        model, signature, tmp_path / "publisher.pem", tmp_path / "leaf.pem", tmp_path / "intermediate.pem"
    )
    for anchor in ("intermediate", "leaf"):
        assert upstream_certificate(model, signature, tmp_path / f"{anchor}.pem") is False, anchor
        with pytest.raises(VerificationError, match="no trusted certificate is a self-signed root"):
            verify_model(model, signature, _certificates(tmp_path, anchor))
    assert upstream_certificate(model, signature, tmp_path / "root.pem") is True
    assert ours(model, signature, _certificates(tmp_path, "root")) is True
    # The chain given without its intermediate: the trusted intermediate beside the root completes it.
    sign_certificate(
        model, signature, tmp_path / "publisher.pem", tmp_path / "leaf.pem", tmp_path / "root.pem"
    )
    both = tmp_path / "both.pem"
    both.write_bytes((tmp_path / "intermediate.pem").read_bytes() + (tmp_path / "root.pem").read_bytes())
    assert upstream_certificate(model, signature, tmp_path / "root.pem") is False
    assert upstream_certificate(model, signature, both) is True
    assert ours(model, signature, _certificates(tmp_path, "root")) is False
    assert ours(model, signature, _certificates(tmp_path, "both")) is True
