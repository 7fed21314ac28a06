"""A test PKI for Notary Project signatures, made with ``cryptography``: a root CA, an optional intermediate
and code-signing leaves with the profile the Notary Project requires (the openssl steps that make the same
are in docs/signatures.md, "A test CA")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from verifier.crypto._keys import PrivateKey

NOW = datetime.now(UTC).replace(microsecond=0)
PrivateCrypto = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def subject(
    common_name: str, *, organization: str = "Example", state: str = "WA", unit: str | None = None
) -> x509.Name:
    """``C=US, ST=<state>, L=Seattle, O=<organization>[, OU=<unit>], CN=<common name>``."""
    attributes = [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, state),
        x509.NameAttribute(NameOID.LOCALITY_NAME, "Seattle"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
    ]
    if unit is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def new_key(kind: str = "ec-p256") -> PrivateCrypto:
    """``ec-p256``, ``ec-p384``, ``ec-p521``, ``rsa-2048``, ``rsa-3072`` or ``rsa-4096``."""
    family, size = kind.split("-")
    if family == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=int(size))
    curve = {"p256": ec.SECP256R1(), "p384": ec.SECP384R1(), "p521": ec.SECP521R1()}[size]
    return ec.generate_private_key(curve)


@dataclass
class Issued:
    """A certificate and its key."""

    certificate: x509.Certificate
    key: PrivateCrypto

    @property
    def signing_key(self) -> PrivateKey:
        return PrivateKey(self.key)

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def write(self, folder: Path, name: str) -> tuple[Path, Path]:
        """``name.crt`` and ``name.key`` (unencrypted PKCS#8) in ``folder``."""
        cert, key = folder / f"{name}.crt", folder / f"{name}.key"
        cert.write_bytes(self.pem())
        key.write_bytes(self.key_pem())
        return cert, key


def issue(
    name: x509.Name,
    *,
    issuer: Issued | None = None,
    ca: bool = False,
    path_length: int | None = None,
    key: PrivateCrypto | None = None,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    usages: list[x509.ObjectIdentifier] | None = None,
    key_usage_critical: bool = True,
) -> Issued:
    """A certificate for ``name``, self-signed when ``issuer`` is None; leaves get digitalSignature and
    codeSigning (``usages`` replaces the extended key usages)."""
    key = key or new_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.certificate.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or NOW - timedelta(days=1))
        .not_valid_after(not_after or NOW + timedelta(days=365))
    )
    if ca:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=path_length), critical=True
        )
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        usage = x509.KeyUsage(True, False, False, False, False, False, False, False, False)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage(usages if usages is not None else [ExtendedKeyUsageOID.CODE_SIGNING]),
            critical=False,
        )
    builder = builder.add_extension(usage, critical=key_usage_critical)
    signer = issuer.key if issuer else key
    algorithm = hashes.SHA256() if isinstance(signer, rsa.RSAPrivateKey) else hashes.SHA384()
    return Issued(builder.sign(signer, algorithm), key)


@dataclass
class Pki:
    """A root CA, an intermediate under it, and a leaf the intermediate issued."""

    root: Issued
    intermediate: Issued
    leaf: Issued

    @property
    def chain(self) -> list[x509.Certificate]:
        return [self.leaf.certificate, self.intermediate.certificate, self.root.certificate]

    def leaf_for(self, name: x509.Name, **options: object) -> Issued:
        return issue(name, issuer=self.intermediate, **options)  # type: ignore[arg-type]


def make_pki(
    leaf_key: str = "ec-p256", *, leaf_name: x509.Name | None = None, organization: str = "Example"
) -> Pki:
    """A fresh three-level PKI whose leaf has a key of kind ``leaf_key``."""
    # The CAs have been valid for a year, so that a leaf can have been valid (and have expired) in the past.
    since = NOW - timedelta(days=365)
    root = issue(
        subject("Test Root CA", organization=organization), ca=True, key=new_key("ec-p384"), not_before=since
    )
    intermediate = issue(
        subject("Test Signing CA", organization=organization),
        issuer=root,
        ca=True,
        path_length=0,
        key=new_key("ec-p384"),
        not_before=since,
    )
    leaf = issue(
        leaf_name or subject("Release Signer", organization=organization, unit="Builds"),
        issuer=intermediate,
        key=new_key(leaf_key),
    )
    return Pki(root, intermediate, leaf)
