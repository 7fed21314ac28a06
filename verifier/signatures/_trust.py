"""A Sigstore trusted root read from a file: Fulcio CAs, Rekor logs, CT logs and TSAs, never fetched.

Accepts a ``trusted_root.json`` (``application/vnd.dev.sigstore.trustedroot+json;version=0.1``) or a client
trust config (``application/vnd.dev.sigstore.clienttrustconfig.v0.1+json``) that embeds one. There is no TUF
here on purpose: the root is pinned by whoever writes the trust configuration.

It is read field by field with the protobuf JSON rules (``sigstore_json``), so what the schema makes
optional may be absent (a CA subject without ``commonName``, a log without ``baseUrl``, as
sigstore/scaffolding writes for private deployments). What verification relies on is required and named
when missing: every certificate and key, each log's id, and the start of a transparency log key's validity
period (a missing start is refused rather than read as "valid since ever").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Final

from cryptography import x509

from verifier.base import InputError, read_limited
from verifier.crypto import InvalidKey, PublicKey
from verifier.signatures._json import Fields, MalformedField
from verifier.signatures._rekor import RekorLog

_CLIENT_TRUST_CONFIG: Final = "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json"
_TRUSTED_ROOT_PREFIX: Final = "application/vnd.dev.sigstore.trustedroot"
_MAX_SIZE: Final = 4 * 1024 * 1024
# The trusted roots sigstore-python ships as its TUF bootstrap, by instance.
_PUBLIC_GOOD: Final = {
    "production": "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev",
    "staging": "https%3A%2F%2Ftuf-repo-cdn.sigstage.dev",
}
_HINT: Final = (
    "expected trusted_root.json (mediaType application/vnd.dev.sigstore.trustedroot+json;version=0.1) "
    "or a client trust config that embeds one"
)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A Fulcio CA or a timestamp authority: its chain (leaf or intermediates first, root last) and the
    window in which it issued (both ends inclusive; ``None`` is unbounded)."""

    certificates: tuple[x509.Certificate, ...]
    valid_from: datetime | None
    valid_until: datetime | None

    def covers(self, moment: datetime) -> bool:
        """True when ``moment`` lies inside the authority's validity window."""
        return (self.valid_from is None or self.valid_from <= moment) and (
            self.valid_until is None or moment <= self.valid_until
        )


def _window(parent: Fields, *, required: bool) -> tuple[datetime | None, datetime | None]:
    """``parent.validFor`` as (start, end); a period without a start is refused, never read as unbounded."""
    fields = parent.message("validFor")
    if fields is None:
        if required:
            raise MalformedField(f"{parent.path}.validFor", "missing: a log key needs a validity period")
        return None, None
    start = fields.timestamp("start")
    if start is None:
        raise MalformedField(f"{fields.path}.start", "missing: a validity period must have a start")
    end = fields.timestamp("end")
    if end is not None and end < start:
        raise MalformedField(f"{fields.path}.end", "before the start")
    return start, end


def _logs(root: Fields, name: str, *, validity_required: bool) -> tuple[RekorLog, ...]:
    logs = []
    for instance in root.messages(name):
        key_fields = instance.required_message("publicKey")
        raw = key_fields.binary("rawBytes")
        if not raw:
            continue  # a log without a key can verify nothing; the schema allows it
        try:
            key = PublicKey.from_der(raw)
        except InvalidKey as error:
            raise MalformedField(f"{key_fields.path}.rawBytes", error.message) from error
        valid_from, valid_until = _window(key_fields, required=validity_required)
        logs.append(
            RekorLog(
                log_id=instance.required_message("logId").binary("keyId", required=True),
                key=key,
                valid_from=valid_from,
                valid_until=valid_until,
                base_url=instance.string("baseUrl"),
            )
        )
    return tuple(logs)


def _authorities(root: Fields, name: str) -> tuple[CertificateAuthority, ...]:
    authorities = []
    for authority in root.messages(name):
        chain = authority.required_message("certChain")
        certificates = []
        for certificate in chain.messages("certificates"):
            der = certificate.binary("rawBytes", required=True)
            try:
                certificates.append(x509.load_der_x509_certificate(der))
            except ValueError as error:
                raise MalformedField(f"{certificate.path}.rawBytes", "not a DER certificate") from error
        if not certificates:
            raise MalformedField(f"{chain.path}.certificates", "empty")
        valid_from, valid_until = _window(authority, required=False)
        authorities.append(
            CertificateAuthority(
                certificates=tuple(certificates), valid_from=valid_from, valid_until=valid_until
            )
        )
    return tuple(authorities)


class TrustRoot:
    """Pinned Sigstore trust material for offline verification of keyless signatures and log entries."""

    def __init__(self, root: Fields, *, location: str, fingerprint: str) -> None:
        self.location = location
        #: SHA-256 of the document it was read from: two copies of one root are one root.
        self.fingerprint = fingerprint
        #: Rekor logs (v1 and v2 instances), looked up by log id.
        self.rekor_logs: tuple[RekorLog, ...] = _logs(root, "tlogs", validity_required=True)
        #: Certificate Transparency logs that sign the SCTs embedded in Fulcio certificates.
        self.ct_logs: tuple[RekorLog, ...] = _logs(root, "ctlogs", validity_required=False)
        #: Fulcio CAs that issue signing certificates.
        self.certificate_authorities: tuple[CertificateAuthority, ...] = _authorities(
            root, "certificateAuthorities"
        )
        #: RFC 3161 timestamp authorities.
        self.timestamp_authorities: tuple[CertificateAuthority, ...] = _authorities(
            root, "timestampAuthorities"
        )
        if not (self.rekor_logs or self.certificate_authorities or self.timestamp_authorities):
            raise InputError(
                "the trusted root has no transparency log, certificate authority or timestamp authority",
                location=location,
                hint="use a complete trusted_root.json (Fulcio CAs, Rekor logs, CT logs, TSAs)",
            )

    @classmethod
    def from_file(cls, path: Path) -> TrustRoot:
        """Load ``trusted_root.json`` or a client trust config; :class:`InputError` when it is unusable."""
        return cls.from_bytes(read_limited(path, "the trusted root", limit=_MAX_SIZE), location=str(path))

    @classmethod
    def from_bytes(cls, raw: bytes, *, location: str) -> TrustRoot:
        """:meth:`from_file` for bytes already read (the policy loader hashes the same bytes it loads)."""
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise InputError(
                "not a Sigstore trusted root: not JSON", location=location, hint=_HINT
            ) from error
        except RecursionError as error:
            raise InputError(
                "not a Sigstore trusted root: nested too deeply", location=location, hint=_HINT
            ) from error
        try:
            fields = Fields(document, "")
            if fields.string("mediaType") == _CLIENT_TRUST_CONFIG:
                fields = fields.required_message("trustedRoot")
            media_type = fields.string("mediaType")
            if not media_type.startswith(_TRUSTED_ROOT_PREFIX):
                raise InputError(
                    f"not a Sigstore trusted root (mediaType {media_type!r})", location=location, hint=_HINT
                )
            return cls(fields, location=location, fingerprint=hashlib.sha256(raw).hexdigest())
        except MalformedField as error:
            raise InputError(
                f"the trusted root field {error.path} is unusable: {error.problem}",
                location=location,
                hint="fix or regenerate the trusted root; a field the schema requires for verification "
                "cannot be left out",
            ) from error

    @classmethod
    def public_good(cls, instance: str = "production") -> TrustRoot:
        """The Sigstore public-good (``production`` or ``staging``) trusted root as shipped inside the
        installed sigstore-python: a snapshot read offline, as current as that release (no TUF update)."""
        folder = resources.files("sigstore") / "_store" / _PUBLIC_GOOD[instance]
        source = folder / "trusted_root.json"
        try:
            raw = source.read_bytes()
        except OSError as error:
            raise InputError(
                f"the installed sigstore-python carries no {instance} trusted root",
                location=str(source),
                hint="pass --trusted-root FILE",
            ) from error
        return cls.from_bytes(raw, location=f"Sigstore public-good {instance} root (sigstore-python)")

    def __repr__(self) -> str:
        return f"TrustRoot({self.location})"
