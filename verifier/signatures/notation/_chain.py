"""The certificate chain of a Notary Project signature: its shape, certificate profile and validity times.

As notation-core-go's ``ValidateCodeSigningCertChain``: the chain runs leaf first, each certificate issued by
the next, and ends in a self-signed root (a single self-signed leaf is allowed); the leaf is not a CA, has a
critical key usage with digitalSignature only (non-repudiation allowed) and no anyExtendedKeyUsage,
serverAuth, clientAuth, emailProtection, timeStamping or OCSPSigning extended key usage (the signature
specification forbids anyExtendedKeyUsage; notation-core-go does not check it: the specification wins);
each CA has basic constraints with ``ca: true``, a path length that admits the certificates below it, and a
critical key usage with keyCertSign. Validity times are checked separately (:func:`invalid_at`), at
whatever time the signing scheme and the timestamps make authentic.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.x509.oid import ExtendedKeyUsageOID

from verifier.base import VerificationError

__all__ = ["check_chain", "invalid_at", "subject_text"]

_EXCLUDED_USAGES = {
    ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE: "anyExtendedKeyUsage",
    ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",
    ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth",
    ExtendedKeyUsageOID.EMAIL_PROTECTION: "emailProtection",
    ExtendedKeyUsageOID.TIME_STAMPING: "timeStamping",
    ExtendedKeyUsageOID.OCSP_SIGNING: "OCSPSigning",
}


def subject_text(certificate: x509.Certificate) -> str:
    """The subject as RFC 4514 text, for messages."""
    return certificate.subject.rfc4514_string()


def _extension(
    certificate: x509.Certificate, kind: type[x509.ExtensionType]
) -> x509.Extension[x509.ExtensionType] | None:
    try:
        return certificate.extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None
    except (ValueError, x509.DuplicateExtension) as error:
        raise VerificationError(
            f"the extensions of {subject_text(certificate)!r} do not parse ({error})"
        ) from error


def _key_usage(certificate: x509.Certificate) -> x509.KeyUsage:
    found = _extension(certificate, x509.KeyUsage)
    if found is None:
        raise VerificationError(f"certificate {subject_text(certificate)!r} has no key usage extension")
    if not found.critical:
        raise VerificationError(f"the key usage of {subject_text(certificate)!r} is not marked critical")
    assert isinstance(found.value, x509.KeyUsage)  # noqa: S101  (get_extension_for_class's type)
    return found.value


def _check_leaf(certificate: x509.Certificate) -> None:
    constraints = _extension(certificate, x509.BasicConstraints)
    if (
        constraints is not None
        and isinstance(constraints.value, x509.BasicConstraints)
        and constraints.value.ca
    ):
        raise VerificationError(f"the signing certificate {subject_text(certificate)!r} is a CA certificate")
    usage = _key_usage(certificate)
    if not usage.digital_signature:
        raise VerificationError(f"the key usage of {subject_text(certificate)!r} lacks digitalSignature")
    extra = [
        name
        for name, present in (
            ("keyEncipherment", usage.key_encipherment),
            ("dataEncipherment", usage.data_encipherment),
            ("keyAgreement", usage.key_agreement),
            ("keyCertSign", usage.key_cert_sign),
            ("cRLSign", usage.crl_sign),
            ("encipherOnly", usage.key_agreement and usage.encipher_only),
            ("decipherOnly", usage.key_agreement and usage.decipher_only),
        )
        if present
    ]
    if extra:
        raise VerificationError(
            f"the key usage of {subject_text(certificate)!r} must be digitalSignature only, "
            f"not {', '.join(extra)}"
        )
    extended = _extension(certificate, x509.ExtendedKeyUsage)
    if extended is not None and isinstance(extended.value, x509.ExtendedKeyUsage):
        refused = [name for oid, name in _EXCLUDED_USAGES.items() if oid in extended.value]
        if refused:
            raise VerificationError(
                f"the extended key usage of {subject_text(certificate)!r} must not contain "
                f"{', '.join(refused)}"
            )


def _check_ca(certificate: x509.Certificate, below: int) -> None:
    constraints = _extension(certificate, x509.BasicConstraints)
    value = constraints.value if constraints is not None else None
    if not (isinstance(value, x509.BasicConstraints) and value.ca):
        raise VerificationError(
            f"{subject_text(certificate)!r} issues a certificate but is not a CA (basic constraints)"
        )
    if value.path_length is not None and value.path_length < below:
        raise VerificationError(
            f"the path length {value.path_length} of {subject_text(certificate)!r} does not admit the "
            f"{below} CA certificate(s) below it"
        )
    if not _key_usage(certificate).key_cert_sign:
        raise VerificationError(f"the key usage of CA {subject_text(certificate)!r} lacks keyCertSign")


def _issued_by(certificate: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def check_chain(chain: Sequence[x509.Certificate]) -> None:
    """Raise :class:`VerificationError` unless ``chain`` (leaf first) has the shape and profile above."""
    if len(chain) > 10:
        raise VerificationError(
            f"the certificate chain has {len(chain)} certificates; at most 10 are checked"
        )
    root = chain[-1]
    if not _issued_by(root, root):
        raise VerificationError(f"the last certificate {subject_text(root)!r} is not a self-signed root")
    for index, certificate in enumerate(chain[:-1]):
        if _issued_by(certificate, certificate):
            what = "leaf" if index == 0 else "intermediate"
            raise VerificationError(f"the {what} certificate {subject_text(certificate)!r} is self-signed")
        if not _issued_by(certificate, chain[index + 1]):
            raise VerificationError(
                f"{subject_text(certificate)!r} is not issued by {subject_text(chain[index + 1])!r}"
            )
    _check_leaf(chain[0])
    for index, certificate in enumerate(chain[1:], start=1):
        _check_ca(certificate, index - 1)


def invalid_at(chain: Sequence[x509.Certificate], moment: datetime) -> str | None:
    """Why the chain was not valid at ``moment`` (a certificate outside its validity period), or None."""
    for certificate in chain:
        if moment < certificate.not_valid_before_utc:
            start = certificate.not_valid_before_utc.isoformat()
            return f"{subject_text(certificate)!r} is valid only from {start}"
        if moment > certificate.not_valid_after_utc:
            return f"{subject_text(certificate)!r} expired at {certificate.not_valid_after_utc.isoformat()}"
    return None
