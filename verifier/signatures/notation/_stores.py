"""Trust-store certificate files, read and checked by store type as Notation checks them when it loads them.

A file holds one or more certificates: PEM blocks, or DER certificates one after another (what
notation-core-go's ``ReadCertificateFile`` reads). What each store type may hold
(``specs/trust-store-trust-policy.md``: stores hold root certificates; notation-go's
``truststore.GetCertificates``):

* ``ca`` and ``signingAuthority``: a CA certificate (basic constraints ``ca: true``), or a self-signed signing
  certificate (what ``notation cert generate-test`` makes). A leaf issued by someone else is refused: trusting
  it would pin one signer's certificate without the CA that vouches for it, and it could never be a chain's
  anchor the way Notation anchors chains.
* ``tsa``: a root CA certificate: a CA, self-issued (issuer = subject) and self-signed. An intermediate or a
  self-signed non-CA certificate is refused.

A store that breaks these rules is refused whole, when the policy loads (exit 2, naming the file and the
certificate), rather than left to fail (or pass) at admission.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm

from verifier.base import InputError
from verifier.crypto import der_header

__all__ = [
    "CERTIFICATE_ERRORS",
    "MAX_CERTIFICATES",
    "StoreType",
    "check_store",
    "load_certificates",
    "parsed",
]

StoreType = Literal["ca", "signingAuthority", "tsa"]
#: Certificates one trust-store file may hold (real ones hold one to a few).
MAX_CERTIFICATES: Final = 100


def _split_der(data: bytes) -> list[bytes]:
    """DER certificates written one after another, each a SEQUENCE (ValueError for anything else)."""
    found, offset = [], 0
    while offset < len(data):
        tag, start, length = der_header(data, offset)
        if tag != 0x30:
            raise ValueError(f"byte {offset} does not start a DER certificate (tag 0x{tag:02x})")
        found.append(data[offset : start + length])
        offset = start + length
        if len(found) > MAX_CERTIFICATES:
            raise ValueError(f"more than {MAX_CERTIFICATES} certificates")
    return found


#: What loading a malformed certificate, or :func:`parsed` on one, raises.
CERTIFICATE_ERRORS: Final = (
    ValueError,
    x509.InvalidVersion,
    x509.DuplicateExtension,
    x509.UnsupportedGeneralNameType,
)


def parsed(certificate: x509.Certificate) -> x509.Certificate:
    """``certificate`` with the fields the checks read parsed now: cryptography parses them when first read,
    and a malformed one would otherwise raise wherever that is (``ValueError`` and others)."""
    certificate.subject.rfc4514_string()
    certificate.issuer.rfc4514_string()
    _ = certificate.extensions
    return certificate


def load_certificates(
    data: bytes, *, location: str, store: StoreType | None = None
) -> tuple[x509.Certificate, ...]:
    """Every certificate of a certificate file: PEM with one or more blocks, or one or more DER certificates.

    With ``store`` the certificates must also be ones a trust store of that type may hold
    (:func:`check_store`). Raises :class:`InputError` naming ``location``.
    """
    try:
        if b"-----BEGIN CERTIFICATE-----" in data:
            found = tuple(x509.load_pem_x509_certificates(data))
        else:
            found = tuple(x509.load_der_x509_certificate(der) for der in _split_der(data))
        for certificate in found:
            parsed(certificate)
    except CERTIFICATE_ERRORS as error:
        raise InputError(
            f"not a certificate file (PEM or DER): {error}",
            location=location,
            hint="a trust store holds CA certificates in PEM or DER",
        ) from None
    if not found:
        raise InputError("the file holds no certificate", location=location)
    if len(found) > MAX_CERTIFICATES:
        raise InputError(f"the file holds more than {MAX_CERTIFICATES} certificates", location=location)
    if store is not None:
        check_store(store, found, location=location)
    return found


def _is_ca(certificate: x509.Certificate) -> bool:
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    except (ValueError, x509.DuplicateExtension) as error:
        raise ValueError(f"its extensions do not parse ({error})") from None
    return constraints.ca


def _self_signed(certificate: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(certificate)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def _problem(store: StoreType, certificate: x509.Certificate) -> str | None:
    try:
        ca = _is_ca(certificate)
    except ValueError as error:
        return str(error)
    if store == "tsa":
        if not ca:
            return "is not a CA certificate; a tsa store holds TSA root certificates"
        if certificate.issuer != certificate.subject:
            return (
                f"is not a root: its issuer ({certificate.issuer.rfc4514_string()}) is not its subject; a "
                "tsa store holds TSA root certificates"
            )
        if not _self_signed(certificate):
            return "is not a root: it is not self-signed; a tsa store holds TSA root certificates"
        return None
    if not ca and not _self_signed(certificate):
        return (
            f"is neither a CA certificate nor a self-signed signing certificate; a {store} store holds root "
            "certificates (trust the CA that issued it instead)"
        )
    return None


def check_store(store: StoreType, certificates: Sequence[x509.Certificate], *, location: str) -> None:
    """Raise :class:`InputError` unless every one of ``certificates`` may be in a ``store`` trust store."""
    for certificate in certificates:
        problem = _problem(store, certificate)
        if problem is not None:
            raise InputError(
                f"the certificate {certificate.subject.rfc4514_string()!r} in this {store} trust store "
                f"{problem}",
                location=location,
                hint="Notation refuses such a trust store too",
            )
