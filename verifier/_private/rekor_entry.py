"""Offline checks of Rekor (v1) transparency log entries: the signed entry timestamp and the entry body.

What is checked without a network call:

* the SignedEntryTimestamp (SET, the log's signed inclusion promise): an ECDSA/Ed25519 signature by the log
  key selected by the entry's log id, over the RFC 8785 canonical JSON of ``{body, integratedTime, logID,
  logIndex}``; the integrated time must fall inside the log key's validity window;
* the entry body agrees with what was verified: ``hashedrekord`` 0.0.1 (artifact hash, signature, public key
  or certificate) or ``dsse`` 0.0.1 (payload hash, signature, verifier).

Merkle inclusion proofs and checkpoints are not checked here: the SET is the log's own signed promise and is
what cosign checks offline for classic signatures (keyless Sigstore bundles go through sigstore-python,
which checks proofs as well).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import rfc8785
from cryptography import x509

from verifier.errors import VerificationError
from verifier.keys import InvalidKey, PublicKey


@dataclass(frozen=True, slots=True)
class RekorLog:
    """A transparency log key that the policy trusts."""

    log_id: bytes  # SHA-256 of the key's SubjectPublicKeyInfo DER
    key: PublicKey
    valid_from: datetime | None = None
    valid_until: datetime | None = None

    @classmethod
    def from_key(cls, key: PublicKey) -> RekorLog:
        """A log known only by its public key (``rekor.pub``), valid at all times."""
        return cls(log_id=bytes.fromhex(key.key_id), key=key)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """The parts of a Rekor v1 entry that offline verification uses."""

    body_b64: str  # canonicalized body, base64, exactly as the log signed it
    integrated_time: int
    log_index: int
    log_id: bytes
    signed_entry_timestamp: bytes

    @property
    def body(self) -> dict[str, Any]:
        """The decoded entry body (a Rekor ``ProposedEntry``)."""
        try:
            document = json.loads(base64.b64decode(self.body_b64, validate=True))
        except (binascii.Error, ValueError) as error:
            raise VerificationError("the Rekor entry body is not base64 JSON") from error
        if not isinstance(document, dict):
            raise VerificationError("the Rekor entry body is not a JSON object")
        return document

    @property
    def signed_at(self) -> datetime:
        """The integrated time as an aware UTC datetime."""
        return datetime.fromtimestamp(self.integrated_time, tz=UTC)


#: A check of an entry's body against what was verified; raises VerificationError.
EntryCheck = Callable[[LogEntry], None]


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise VerificationError(f"{what} is missing or not a string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise VerificationError(f"{what} is not valid base64") from error


def entry_from_cosign_bundle(text: str) -> LogEntry:
    """Parse the ``dev.sigstore.cosign/bundle`` annotation of a classic signature."""
    try:
        document = json.loads(text)
        payload = document["Payload"]
        entry = LogEntry(
            body_b64=payload["body"],
            integrated_time=payload["integratedTime"],
            log_index=payload["logIndex"],
            log_id=bytes.fromhex(payload["logID"]),
            signed_entry_timestamp=_b64(document["SignedEntryTimestamp"], "SignedEntryTimestamp"),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise VerificationError("the Rekor bundle annotation is malformed") from error
    if not isinstance(entry.body_b64, str) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in (entry.integrated_time, entry.log_index)
    ):
        raise VerificationError("the Rekor bundle annotation has fields of the wrong type")
    return entry


def verify_set(entry: LogEntry, logs: Sequence[RekorLog]) -> RekorLog:
    """Check the entry's SignedEntryTimestamp with the trusted log it names; return that log."""
    log = next((candidate for candidate in logs if candidate.log_id == entry.log_id), None)
    if log is None:
        raise VerificationError(
            f"the Rekor entry was logged by an unknown log (log id {entry.log_id.hex()[:16]}…)",
            hint="add that log's key to the trusted root or the configured Rekor keys",
        )
    signed_at = entry.signed_at
    if (log.valid_from is not None and signed_at < log.valid_from) or (
        log.valid_until is not None and signed_at > log.valid_until
    ):
        raise VerificationError(
            f"the Rekor entry's time {signed_at.isoformat()} is outside the log key's validity window"
        )
    canonical = rfc8785.dumps(
        {
            "body": entry.body_b64,
            "integratedTime": entry.integrated_time,
            "logID": entry.log_id.hex(),
            "logIndex": entry.log_index,
        }
    )
    if not log.key.verify(entry.signed_entry_timestamp, canonical):
        raise VerificationError("the Rekor signed entry timestamp (SET) does not verify with the log key")
    return log


def _same_verifier(pem_b64: Any, key: PublicKey, certificate: x509.Certificate | None) -> bool:
    """True when the PEM in the entry is ``certificate`` (keyless) or a key/cert holding ``key``."""
    pem = _b64(pem_b64, "the Rekor entry's public key")
    if b"-----BEGIN CERTIFICATE-----" in pem:
        try:
            logged = x509.load_pem_x509_certificate(pem)
        except ValueError:
            return False
        if certificate is not None:
            return logged == certificate
        try:
            return PublicKey.from_crypto(logged.public_key()).key_id == key.key_id
        except InvalidKey:
            return False
    if certificate is not None:
        return False
    try:
        return PublicKey.from_pem(pem).key_id == key.key_id
    except InvalidKey:
        return False


def _field(document: Any, *path: str) -> Any:
    """``document[path[0]][path[1]]…``, or None where a level is missing or not an object."""
    for key in path:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def _kind(body: dict[str, Any], kind: str) -> None:
    found = (body.get("kind"), body.get("apiVersion"))
    if found != (kind, "0.0.1"):
        raise VerificationError(f"the Rekor entry is {found[0]}/{found[1]}, expected {kind}/0.0.1")


def check_hashedrekord(
    entry: LogEntry,
    *,
    sha256_hex: str,
    signature: bytes,
    key: PublicKey,
    certificate: x509.Certificate | None = None,
) -> None:
    """The ``hashedrekord`` 0.0.1 body must record this artifact hash, signature and signer."""
    body = entry.body
    _kind(body, "hashedrekord")
    if _field(body, "spec", "data", "hash", "algorithm") != "sha256" or (
        _field(body, "spec", "data", "hash", "value") != sha256_hex
    ):
        raise VerificationError("the Rekor entry records a different artifact hash")
    if _b64(_field(body, "spec", "signature", "content"), "the Rekor entry's signature") != signature:
        raise VerificationError("the Rekor entry records a different signature")
    if not _same_verifier(_field(body, "spec", "signature", "publicKey", "content"), key, certificate):
        raise VerificationError("the Rekor entry records a different signing key or certificate")


def check_dsse(
    entry: LogEntry,
    *,
    payload: bytes,
    signature: bytes,
    key: PublicKey,
    certificate: x509.Certificate | None = None,
) -> None:
    """The ``dsse`` 0.0.1 body must record this payload hash and this signature by this signer."""
    body = entry.body
    _kind(body, "dsse")
    if _field(body, "spec", "payloadHash", "algorithm") != "sha256" or (
        _field(body, "spec", "payloadHash", "value") != hashlib.sha256(payload).hexdigest()
    ):
        raise VerificationError("the Rekor entry records a different DSSE payload hash")
    logged_signatures = _field(body, "spec", "signatures")
    for logged in logged_signatures if isinstance(logged_signatures, list) else ():
        if (
            isinstance(logged, dict)
            and _b64(logged.get("signature"), "the Rekor entry's signature") == signature
            and _same_verifier(logged.get("verifier"), key, certificate)
        ):
            return
    raise VerificationError("the Rekor entry does not record this signature by this signer")
