"""Fulcio signing certificates of keyless signatures (classic and bundles): chain, SCT, profile, identity.

Done with ``cryptography``, at a signed time that the caller has already verified (a Rekor integrated time
proven by its SET, or an RFC 3161 timestamp):

1. the chain is built to a Fulcio CA of the trusted root that was valid at the signing time, and validated
   at that time;
2. an embedded SCT verifies with a CT log key of the trusted root that was valid when the SCT was issued
   (RFC 6962 §3.2, precertificate entry; sigstore-go skips SCTs outside the key's validity period too);
3. key usage ``digitalSignature`` and extended key usage ``codeSigning`` (the Fulcio profile).

The certificate comes from the signature and is read before its chain is checked (the identity rules run
first), so extensions that do not parse are a verification failure, not an exception.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat import asn1
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
)
from cryptography.x509.verification import (
    VerificationError as X509VerificationError,
)

from verifier.base import VerificationError
from verifier.signatures._rekor import RekorLog
from verifier.signatures._trust import CertificateAuthority

_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_SIGSTORE_OTHERNAME = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.7")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _extensions(certificate: x509.Certificate) -> x509.Extensions:
    """The certificate's extensions; cryptography parses them on first access and raises on malformed ones."""
    try:
        return certificate.extensions
    except (ValueError, x509.DuplicateExtension, x509.UnsupportedGeneralNameType) as error:
        raise VerificationError(f"the signing certificate's extensions do not parse ({error})") from error


def verify_chain(
    leaf: x509.Certificate,
    intermediates: Sequence[x509.Certificate],
    authorities: Sequence[CertificateAuthority],
    signed_at: datetime,
) -> list[x509.Certificate]:
    """The validated chain ``[leaf, issuer, …, root]`` to a CA valid at ``signed_at``."""
    # Client verifiers want the clientAuth EKU by default; Fulcio leaves carry codeSigning, checked below.
    ca_policy = ExtensionPolicy.webpki_defaults_ca().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    ee_policy = ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    failures = []
    for authority in authorities:
        if not authority.covers(signed_at):
            continue
        verifier = (
            PolicyBuilder()
            .store(Store(list(authority.certificates)))
            .time(signed_at)
            .extension_policies(ca_policy=ca_policy, ee_policy=ee_policy)
            .build_client_verifier()
        )
        try:
            return list(verifier.verify(leaf, list(intermediates)).chain)
        except (X509VerificationError, x509.UnsupportedGeneralNameType) as error:
            failures.append(str(error))
    detail = f" ({failures[0]})" if failures else " (no CA of the trusted root was valid then)"
    raise VerificationError(
        f"the signing certificate does not chain to a trusted Fulcio CA at {signed_at.isoformat()}{detail}",
        hint="check that the trusted root in the trust configuration is the one the signer used",
    )


def check_profile(leaf: x509.Certificate) -> None:
    """Fulcio leaf profile: digitalSignature key usage and the codeSigning extended key usage."""
    extensions = _extensions(leaf)
    try:
        usage = extensions.get_extension_for_class(x509.KeyUsage).value
        extended = extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound as error:
        raise VerificationError("the signing certificate lacks key usage extensions") from error
    if not usage.digital_signature or ExtendedKeyUsageOID.CODE_SIGNING not in extended:
        raise VerificationError("the signing certificate is not a code-signing certificate")


def verify_sct(leaf: x509.Certificate, issuer: x509.Certificate, ct_logs: Sequence[RekorLog]) -> None:
    """At least one SCT embedded in ``leaf`` must verify with a trusted CT log key valid at the SCT's time."""
    try:
        scts = _extensions(leaf).get_extension_for_class(x509.PrecertificateSignedCertificateTimestamps).value
    except x509.ExtensionNotFound as error:
        raise VerificationError("the signing certificate has no embedded SCT") from error
    issuer_key_hash = hashlib.sha256(
        issuer.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    ).digest()
    tbs = leaf.tbs_precertificate_bytes
    by_id = {log.log_id: log for log in ct_logs}
    for sct in scts:
        log = by_id.get(sct.log_id)
        if log is None or sct.entry_type != x509.certificate_transparency.LogEntryType.PRE_CERTIFICATE:
            continue
        timestamp = sct.timestamp if sct.timestamp.tzinfo else sct.timestamp.replace(tzinfo=UTC)
        if not log.covers(timestamp):
            continue  # a retired CT log key vouches for nothing issued after it was retired
        millis = (timestamp - _EPOCH) // timedelta(milliseconds=1)
        extensions = sct.extension_bytes
        # RFC 6962 §3.2 digitally-signed struct: v1, certificate_timestamp, timestamp, precert_entry, …
        signed = (
            bytes([0, 0])
            + millis.to_bytes(8, "big")
            + (1).to_bytes(2, "big")
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + len(extensions).to_bytes(2, "big")
            + extensions
        )
        if log.key.verify(sct.signature, signed):
            return
    raise VerificationError("no SCT in the signing certificate verifies with a trusted CT log key")


def certificate_identity(leaf: x509.Certificate) -> tuple[str | None, tuple[str, ...]]:
    """The OIDC issuer (Fulcio extension, v2 preferred over v1) and the subject alternative names;
    :class:`VerificationError` when the extensions do not parse."""
    issuer = None
    extensions = _extensions(leaf)
    try:
        value = extensions.get_extension_for_oid(_ISSUER_V2).value
        issuer = asn1.decode_der(str, value.value)  # type: ignore[attr-defined]
    except (x509.ExtensionNotFound, ValueError):
        try:
            value = extensions.get_extension_for_oid(_ISSUER_V1).value
            issuer = value.value.decode()  # type: ignore[attr-defined]
        except (x509.ExtensionNotFound, UnicodeDecodeError):
            issuer = None
    try:
        san = extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return issuer, ()
    names: list[str] = list(san.get_values_for_type(x509.RFC822Name))
    names += san.get_values_for_type(x509.UniformResourceIdentifier)
    for other in san.get_values_for_type(x509.OtherName):
        if other.type_id == _SIGSTORE_OTHERNAME:
            try:
                names.append(asn1.decode_der(str, other.value))
            except ValueError:
                continue
    return issuer, tuple(names)
