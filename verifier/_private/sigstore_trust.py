"""A Sigstore trusted root read from a file: Fulcio CAs, Rekor logs and CT logs, never fetched.

Accepts a ``trusted_root.json`` (``application/vnd.dev.sigstore.trustedroot+json;version=0.1``) or a client
trust config (``application/vnd.dev.sigstore.clienttrustconfig.v0.1+json``) that embeds one. There is no TUF
here on purpose: the root is pinned by whoever writes the trust configuration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path

import sigstore.errors
from cryptography import x509
from pydantic import ValidationError
from sigstore.models import ClientTrustConfig
from sigstore.models import TrustedRoot as SigstoreTrustedRoot
from sigstore.verify import Verifier
from sigstore_models.trustroot.v1 import TransparencyLogInstance
from sigstore_models.trustroot.v1 import TrustedRoot as TrustedRootModel

from verifier._private.files import read_limited
from verifier._private.rekor_entry import RekorLog
from verifier.errors import InputError
from verifier.keys import InvalidKey, PublicKey

_CLIENT_TRUST_CONFIG = "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json"
_MAX_SIZE = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """One Fulcio CA: its chain (intermediates then root) and the window in which it issued certificates."""

    certificates: tuple[x509.Certificate, ...]
    valid_from: datetime
    valid_until: datetime | None

    def covers(self, moment: datetime) -> bool:
        """True when ``moment`` lies inside the CA's validity window."""
        return self.valid_from <= moment and (self.valid_until is None or moment <= self.valid_until)


def _logs(instances: list[TransparencyLogInstance], location: str) -> tuple[RekorLog, ...]:
    logs = []
    for instance in instances:
        raw = instance.public_key.raw_bytes
        if raw is None:
            continue
        try:
            key = PublicKey.from_der(raw)
        except InvalidKey as error:
            raise InputError(
                f"log {instance.base_url} has a key trtguard cannot use: {error.message}", location=location
            ) from error
        valid = instance.public_key.valid_for
        logs.append(
            RekorLog(
                log_id=instance.log_id.key_id,
                key=key,
                valid_from=valid.start if valid else None,
                valid_until=valid.end if valid else None,
            )
        )
    return tuple(logs)


class TrustRoot:
    """Pinned Sigstore trust material for offline verification of keyless signatures and log entries."""

    def __init__(self, model: TrustedRootModel, sigstore_root: SigstoreTrustedRoot, *, location: str) -> None:
        self._sigstore_root = sigstore_root
        self.location = location
        #: Rekor logs (v1 and v2 instances), keyed by log id when used.
        self.rekor_logs: tuple[RekorLog, ...] = _logs(model.tlogs, location)
        #: Certificate Transparency logs that sign the SCTs embedded in Fulcio certificates.
        self.ct_logs: tuple[RekorLog, ...] = _logs(model.ctlogs, location)
        self.certificate_authorities: tuple[CertificateAuthority, ...] = tuple(
            CertificateAuthority(
                certificates=tuple(
                    x509.load_der_x509_certificate(c.raw_bytes) for c in authority.cert_chain.certificates
                ),
                valid_from=authority.valid_for.start,
                valid_until=authority.valid_for.end,
            )
            for authority in model.certificate_authorities
        )
        if not self.certificate_authorities or not self.rekor_logs:
            raise InputError(
                "the trusted root has no certificate authority or no transparency log",
                location=location,
                hint="use a complete trusted_root.json (Fulcio CAs, Rekor logs, CT logs)",
            )

    @classmethod
    def from_file(cls, path: Path) -> TrustRoot:
        """Load ``trusted_root.json`` or a client trust config; :class:`InputError` when it is unusable."""
        return cls.from_bytes(read_limited(path, _MAX_SIZE, "the trusted root"), location=str(path))

    @classmethod
    def from_bytes(cls, raw: bytes, *, location: str) -> TrustRoot:
        """:meth:`from_file` for bytes already read (the policy loader hashes the same bytes it loads)."""
        try:
            document = json.loads(raw)
            if isinstance(document, dict) and document.get("mediaType") == _CLIENT_TRUST_CONFIG:
                sigstore_root = ClientTrustConfig.from_json(raw.decode()).trusted_root
                # JSON mode: the strict models take RFC 3339 strings for times only from JSON text.
                model = TrustedRootModel.from_json(json.dumps(document["trustedRoot"]))
            else:
                model = TrustedRootModel.from_json(raw)
                sigstore_root = SigstoreTrustedRoot(model)
            return cls(model, sigstore_root, location=location)
        except (ValueError, ValidationError, KeyError, sigstore.errors.Error) as error:
            # ValueError also covers a certificate of the root that does not parse.
            raise InputError(
                "not a Sigstore trusted root",
                location=location,
                hint="expected trusted_root.json (mediaType application/vnd.dev.sigstore.trustedroot+json;"
                "version=0.1) or a client trust config that embeds one",
            ) from error

    @cached_property
    def verifier(self) -> Verifier:
        """sigstore-python's verifier over this root; it makes no network call while verifying."""
        return Verifier(trusted_root=self._sigstore_root)

    def __repr__(self) -> str:
        return f"TrustRoot({self.location})"
