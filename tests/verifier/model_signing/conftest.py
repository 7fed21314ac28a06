"""Models, keys and certificates for the model-signing tests; signatures are made by the real library."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from verifier.crypto._dsse import pae


def write_key(path: Path, curve: ec.EllipticCurve | None = None) -> ec.EllipticCurvePrivateKey:
    """A new EC private key at ``path`` (PEM) and its public key at ``path.pub``."""
    key = ec.generate_private_key(curve or ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.with_suffix(".pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def write_ca(path: Path, common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA certificate at ``path`` (PEM), with its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC) - timedelta(minutes=5)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key, certificate


def write_leaf(
    path: Path, key: ec.EllipticCurvePrivateKey, ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate]
) -> None:
    """A code-signing certificate for ``key`` issued by ``ca``, at ``path`` (PEM)."""
    ca_key, ca_certificate = ca
    now = datetime.now(UTC) - timedelta(minutes=1)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name("publisher"))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=10))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A model folder: weights, a config in a subfolder, and git paths beside them."""
    root = tmp_path / "model"
    (root / "sub").mkdir(parents=True)
    (root / "weights.onnx").write_bytes(b"\x08\x07onnx weights")
    (root / "sub" / "config.json").write_text('{"layers": 2}')
    (root / "README.md").write_text("a model\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def resign(
    signature: Path, key: ec.EllipticCurvePrivateKey, change: Callable[[dict[str, Any]], None]
) -> None:
    """Change the statement of ``signature`` with ``change``, fix its subject digest and sign it again with
    ``key``: an attacker holding a trusted key crafting what the library would not write."""
    bundle = json.loads(signature.read_bytes())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    change(statement)
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in statement["predicate"]["resources"]))
    statement["subject"][0]["digest"]["sha256"] = root.hexdigest()
    payload = json.dumps(statement).encode()
    sig = key.sign(pae("application/vnd.in-toto+json", payload), ec.ECDSA(hashes.SHA256()))
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
    bundle["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(sig).decode()
    signature.write_text(json.dumps(bundle))
