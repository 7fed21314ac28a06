"""Offline verification of one transparency log (Rekor v1 or v2) entry: :func:`verify_entry`.

Every signature path (key-signed and keyless Sigstore bundles, classic cosign signatures) checks its log
entries here, the same way:

1. the log: the entry names a log of the trusted root (or a configured ``rekor.pub``) by its id;
2. the body: the entry records exactly what was verified, the artifact hash (``hashedrekord`` 0.0.1/0.0.2)
   or the DSSE payload (``dsse`` 0.0.1, ``intoto`` 0.0.2, ``hashedrekord`` 0.0.2 over the PAE), and this
   signature by this key or certificate;
3. the inclusion promise (SET), when present or required: the log's signature over the RFC 8785 canonical
   JSON of ``{body, integratedTime, logID, logIndex}``; only then is the integrated time a signed time;
4. the inclusion proof, when present or required: the Merkle path from the entry to a root hash, and the log's
   signature on the checkpoint that carries that root hash (``sigstore_inclusion``);
5. the log key's validity window (inclusive) contains every signed time known for the entry; an entry with no
   signed time at all is accepted only from a log key that has no end.

An entry that carries neither promise nor proof is refused: it proves nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlsplit

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from verifier.base import VerificationError
from verifier.crypto import Envelope, InvalidKey, PublicKey, pae
from verifier.signatures._inclusion import leaf_hash, root_from_inclusion_proof, verify_checkpoint
from verifier.signatures._json import Fields, MalformedField

#: Entry kinds written by Rekor v2 (rekor-tiles); they carry no integrated time and no promise.
REKOR_V2_KINDS: Final = frozenset({("hashedrekord", "0.0.2"), ("dsse", "0.0.2")})
_V2_HASHES: Final = {"SHA2_256": hashlib.sha256, "SHA2_384": hashlib.sha384, "SHA2_512": hashlib.sha512}


@dataclass(frozen=True, slots=True)
class RekorLog:
    """A transparency log (or CT log) key that the policy trusts, and when it was valid (inclusive)."""

    log_id: bytes  # SHA-256 of the key's SubjectPublicKeyInfo DER (Rekor v2: the C2SP key id)
    key: PublicKey
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    base_url: str = ""

    @classmethod
    def from_key(cls, key: PublicKey) -> RekorLog:
        """A log known only by its public key (``rekor.pub``), valid at all times."""
        return cls(log_id=bytes.fromhex(key.key_id), key=key)

    def covers(self, moment: datetime) -> bool:
        """True when ``moment`` lies inside the key's validity window."""
        return (self.valid_from is None or self.valid_from <= moment) and (
            self.valid_until is None or moment <= self.valid_until
        )

    @property
    def host(self) -> str | None:
        """The host name of ``base_url``: the name a Rekor v2 log signs its checkpoints with."""
        return urlsplit(self.base_url).hostname if self.base_url else None


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """The Merkle path of an entry and the checkpoint (signed tree head) it ends in."""

    log_index: int  # index in the tree the proof is for (Rekor v1 shards: not the global index)
    root_hash: bytes
    tree_size: int
    hashes: tuple[bytes, ...]
    checkpoint: str


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One transparency log entry as a bundle (or a classic signature's annotation) carries it."""

    body: bytes  # the canonicalized body, exactly as the log hashed and signed it
    log_index: int
    log_id: bytes
    kind: str
    version: str
    integrated_time: int = 0  # 0: absent (Rekor v2)
    signed_entry_timestamp: bytes | None = None
    inclusion_proof: InclusionProof | None = None

    @property
    def rekor_v2(self) -> bool:
        """True for entries of a Rekor v2 (tile-based) log."""
        return (self.kind, self.version) in REKOR_V2_KINDS


@dataclass(frozen=True, slots=True)
class LoggedSignature:
    """What an entry must record: ``signature`` by ``key`` (or ``certificate``) over the artifact whose
    SHA-256 is ``artifact_sha256`` (a message signature), or over the PAE of ``envelope`` (DSSE)."""

    signature: bytes
    key: PublicKey
    certificate: x509.Certificate | None = None
    artifact_sha256: bytes | None = None
    envelope: Envelope | None = None


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise VerificationError(f"{what} is missing or not a string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise VerificationError(f"{what} is not valid base64") from error


def entry_from_cosign_bundle(text: str) -> LogEntry:
    """Parse the ``dev.sigstore.cosign/bundle`` annotation of a classic signature (SET only, no proof)."""
    try:
        document = json.loads(text)
        payload = document["Payload"]
        body_b64, integrated_time, log_index = payload["body"], payload["integratedTime"], payload["logIndex"]
        log_id = bytes.fromhex(payload["logID"])
        signed_entry_timestamp = _b64(document["SignedEntryTimestamp"], "SignedEntryTimestamp")
    except (ValueError, KeyError, TypeError) as error:
        raise VerificationError("the Rekor bundle annotation is malformed") from error
    except RecursionError as error:
        raise VerificationError("the Rekor bundle annotation is nested too deeply") from error
    if not isinstance(body_b64, str) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in (integrated_time, log_index)
    ):
        raise VerificationError("the Rekor bundle annotation has fields of the wrong type")
    body = _b64(body_b64, "the Rekor entry body")
    kind, version = _kind_version(_decode_body(body))
    return LogEntry(
        body=body,
        log_index=log_index,
        log_id=log_id,
        kind=kind,
        version=version,
        integrated_time=integrated_time,
        signed_entry_timestamp=signed_entry_timestamp,
    )


def _decode_body(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise VerificationError("the Rekor entry body is not JSON") from error
    except RecursionError as error:
        raise VerificationError("the Rekor entry body is nested too deeply") from error
    if not isinstance(document, dict):
        raise VerificationError("the Rekor entry body is not a JSON object")
    return document


def _kind_version(body: dict[str, Any]) -> tuple[str, str]:
    kind, version = body.get("kind"), body.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(version, str):
        raise VerificationError("the Rekor entry body names no kind and apiVersion")
    return kind, version


def _field(document: Any, *path: str) -> Any:
    """``document[path[0]][path[1]]…``, or None where a level is missing or not an object."""
    for key in path:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def _same_verifier(pem: bytes, logged: LoggedSignature) -> bool:
    """True when the PEM recorded in a Rekor v1 entry is the certificate (keyless) or holds the key."""
    if b"-----BEGIN CERTIFICATE-----" in pem:
        try:
            recorded = x509.load_pem_x509_certificate(pem)
        except ValueError:
            return False
        if logged.certificate is not None:
            return recorded == logged.certificate
        try:
            return PublicKey.from_certificate(recorded).key_id == logged.key.key_id
        except InvalidKey:
            return False
    if logged.certificate is not None:
        return False
    try:
        return PublicKey.from_pem(pem).key_id == logged.key.key_id
    except InvalidKey:
        return False


def _check_hashedrekord_v1(body: dict[str, Any], logged: LoggedSignature) -> None:
    if logged.artifact_sha256 is None:
        raise VerificationError("the Rekor entry is a hashedrekord, but the bundle carries a DSSE envelope")
    algorithm = _field(body, "spec", "data", "hash", "algorithm")
    if algorithm != "sha256":
        raise VerificationError(
            f"the Rekor entry records a {algorithm!r} artifact hash; trtguard binds sha256 digests only"
        )
    if _field(body, "spec", "data", "hash", "value") != logged.artifact_sha256.hex():
        raise VerificationError("the Rekor entry records a different artifact hash")
    if _b64(_field(body, "spec", "signature", "content"), "the Rekor entry's signature") != logged.signature:
        raise VerificationError("the Rekor entry records a different signature")
    pem = _b64(_field(body, "spec", "signature", "publicKey", "content"), "the Rekor entry's public key")
    if not _same_verifier(pem, logged):
        raise VerificationError("the Rekor entry records a different signing key or certificate")


def _check_payload_hash(found: Any, envelope: Envelope) -> None:
    if _field(found, "algorithm") != "sha256" or (
        _field(found, "value") != hashlib.sha256(envelope.payload).hexdigest()
    ):
        raise VerificationError("the Rekor entry records a different DSSE payload hash")


def _check_dsse_v1(body: dict[str, Any], logged: LoggedSignature, envelope: Envelope) -> None:
    _check_payload_hash(_field(body, "spec", "payloadHash"), envelope)
    recorded = _field(body, "spec", "signatures")
    for item in recorded if isinstance(recorded, list) else ():
        if (
            isinstance(item, dict)
            and _b64(item.get("signature"), "the Rekor entry's signature") == logged.signature
            and _same_verifier(_b64(item.get("verifier"), "the Rekor entry's verifier"), logged)
        ):
            return
    raise VerificationError("the Rekor entry does not record this signature by this signer")


def _check_intoto_v2(body: dict[str, Any], logged: LoggedSignature, envelope: Envelope) -> None:
    # intoto 0.0.2 stores the envelope's base64 signature base64-encoded once more.
    _check_payload_hash(_field(body, "spec", "content", "payloadHash"), envelope)
    recorded = _field(body, "spec", "content", "envelope", "signatures")
    for item in recorded if isinstance(recorded, list) else ():
        if not isinstance(item, dict):
            continue
        signature_text = _b64(item.get("sig"), "the Rekor entry's signature")
        if signature_text == base64.b64encode(logged.signature) and _same_verifier(
            _b64(item.get("publicKey"), "the Rekor entry's public key"), logged
        ):
            return
    raise VerificationError("the Rekor entry does not record this signature by this signer")


def _check_hashedrekord_v2(body: dict[str, Any], logged: LoggedSignature) -> None:
    try:
        spec = Fields(body, "").required_message("spec").required_message("hashedRekordV002")
        data = spec.required_message("data")
        algorithm, digest = data.string("algorithm"), data.binary("digest", required=True)
        signature = spec.required_message("signature")
        content = signature.binary("content", required=True)
        verifier = signature.required_message("verifier")
        certificate = verifier.message("x509Certificate")
        public_key = verifier.message("publicKey")
        recorded_verifier = (certificate or public_key or verifier).binary("rawBytes", required=True)
    except MalformedField as error:
        raise VerificationError(f"the Rekor entry field {error.path} is unusable: {error.problem}") from error
    hash_function = _V2_HASHES.get(algorithm)
    if hash_function is None:
        raise VerificationError(f"the Rekor entry records a digest of unknown algorithm {algorithm!r}")
    if logged.envelope is not None:
        expected = hash_function(pae(logged.envelope.payload_type, logged.envelope.payload)).digest()
        if digest != expected:
            raise VerificationError("the Rekor entry records a different DSSE envelope (PAE digest)")
    else:
        if algorithm != "SHA2_256":
            raise VerificationError(
                f"the Rekor entry records a {algorithm} artifact digest; trtguard binds sha256 digests only"
            )
        if digest != logged.artifact_sha256:
            raise VerificationError("the Rekor entry records a different artifact hash")
    if content != logged.signature:
        raise VerificationError("the Rekor entry records a different signature")
    if logged.certificate is not None:
        same = certificate is not None and recorded_verifier == logged.certificate.public_bytes(
            serialization.Encoding.DER
        )
    else:
        same = public_key is not None and recorded_verifier == logged.key.to_der()
    if not same:
        raise VerificationError("the Rekor entry records a different signing key or certificate")


def _check_body(entry: LogEntry, logged: LoggedSignature) -> None:
    # The body is not yet authenticated here: what it names is quoted (repr) in messages, so that control
    # characters or an unpaired surrogate (a "\ud800" escape) cannot reach a terminal or a UTF-8 log as is.
    body = _decode_body(entry.body)
    named = "/".join(_kind_version(body))
    if _kind_version(body) != (entry.kind, entry.version):
        raise VerificationError(
            f"the Rekor entry body is {named!r}, but the bundle says {entry.kind}/{entry.version}"
        )
    envelope = logged.envelope
    match (entry.kind, entry.version, envelope):
        case ("hashedrekord", "0.0.1", _):
            _check_hashedrekord_v1(body, logged)
        case ("hashedrekord", "0.0.2", _):
            _check_hashedrekord_v2(body, logged)
        case ("dsse", "0.0.1", Envelope()):
            _check_dsse_v1(body, logged, envelope)
        case ("intoto", "0.0.2", Envelope()):
            _check_intoto_v2(body, logged, envelope)
        case _:
            expected = (
                "hashedrekord/0.0.1 or hashedrekord/0.0.2"
                if envelope is None
                else "dsse/0.0.1, intoto/0.0.2 or hashedrekord/0.0.2"
            )
            raise VerificationError(f"the Rekor entry is {named!r}, expected {expected}")


def _find_log(log_id: bytes, logs: Sequence[RekorLog]) -> RekorLog:
    log = next((candidate for candidate in logs if candidate.log_id == log_id), None)
    if log is None:
        raise VerificationError(
            f"the Rekor entry was logged by an unknown log (log id {log_id.hex()[:16]}…)",
            hint="add that log's key to the trusted root or the configured Rekor keys",
        )
    return log


def _verify_promise(entry: LogEntry, log: RekorLog, signed_entry_timestamp: bytes) -> datetime:
    if entry.rekor_v2 or entry.integrated_time <= 0:
        raise VerificationError("the Rekor entry has a signed entry timestamp but no integrated time")
    try:
        canonical = rfc8785.dumps(
            {
                "body": base64.b64encode(entry.body).decode(),
                "integratedTime": entry.integrated_time,
                "logID": entry.log_id.hex(),
                "logIndex": entry.log_index,
            }
        )
    except rfc8785.CanonicalizationError as error:
        # RFC 8785 writes numbers as IEEE doubles: beyond 2^53 a value has no canonical form a log signed.
        raise VerificationError(
            "the Rekor entry's integrated time or log index is too large for a signed entry timestamp"
        ) from error
    if not log.key.verify(signed_entry_timestamp, canonical):
        raise VerificationError("the Rekor signed entry timestamp (SET) does not verify with the log key")
    return datetime.fromtimestamp(entry.integrated_time, tz=UTC)


def _verify_proof(entry: LogEntry, log: RekorLog, proof: InclusionProof) -> None:
    checkpoint = verify_checkpoint(proof.checkpoint, log.key, name=log.host, rekor_v2=entry.rekor_v2)
    if (checkpoint.size, checkpoint.root_hash) != (proof.tree_size, proof.root_hash):
        raise VerificationError("the checkpoint signs another tree head than the inclusion proof's")
    if entry.rekor_v2 and proof.log_index != entry.log_index:
        raise VerificationError("the inclusion proof is for another log index than the entry's")
    root = root_from_inclusion_proof(proof.log_index, proof.tree_size, leaf_hash(entry.body), proof.hashes)
    if root != proof.root_hash:
        raise VerificationError("the inclusion proof does not lead to the checkpoint's root hash")


def verify_entry(
    entry: LogEntry,
    logs: Sequence[RekorLog],
    logged: LoggedSignature,
    *,
    require_promise: bool,
    require_proof: bool,
    signed_times: Sequence[datetime] = (),
) -> datetime | None:
    """Verify ``entry`` against the trusted ``logs``: it must record ``logged``, and its promise and proof
    (each required as asked, each checked when present) must verify with the log's key.

    ``signed_times`` are other verified times of the signature (RFC 3161 timestamps); the log key must have
    been valid at each of them and at the promised integrated time. Returns the integrated time when a
    verified promise signs it (else None); raises :class:`VerificationError`.
    """
    log = _find_log(entry.log_id, logs)
    if entry.log_index < 0:
        raise VerificationError(f"the Rekor entry's log index {entry.log_index} is negative")
    _check_body(entry, logged)
    promise, proof = entry.signed_entry_timestamp, entry.inclusion_proof
    if promise is None and (require_promise or proof is None):
        raise VerificationError("the Rekor entry has no signed entry timestamp (inclusion promise)")
    if proof is None and require_proof:
        raise VerificationError("the Rekor entry has no inclusion proof")
    promised_time = _verify_promise(entry, log, promise) if promise is not None else None
    if proof is not None:
        _verify_proof(entry, log, proof)
    times = [*([promised_time] if promised_time is not None else []), *signed_times]
    for moment in times:
        if not log.covers(moment):
            raise VerificationError(
                f"the log key was not valid at {moment.isoformat()} (the entry's signed time)",
                hint="the trusted root lists when each log key was in use",
            )
    if not times and log.valid_until is not None:
        raise VerificationError(
            "the Rekor entry has no signed time, and its log key is retired: when it was logged is unknown",
            hint="a signed entry timestamp or an RFC 3161 timestamp dates the entry",
        )
    return promised_time
