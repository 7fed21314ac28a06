"""A Sigstore bundle (v0.1-v0.3) read into plain values, with every rule the bundle spec states.

Read by the protobuf JSON mapping (``sigstore_json``): what the schema makes optional may be absent, for
instance ``tlogEntries`` (``cosign --tlog-upload=false``; Go's encoder drops an empty list) or a v0.1 entry's
inclusion proof. What the spec requires is refused with the field's path:

* ``mediaType``: ``application/vnd.dev.sigstore.bundle+json;version=0.1|0.2|0.3`` or
  ``application/vnd.dev.sigstore.bundle.v0.3+json``; other versions are not supported;
* verification material: exactly one of ``publicKey``, ``x509CertificateChain`` (v0.1/v0.2, leaf first) or
  ``certificate`` (v0.3 has no chains);
* content: exactly one of ``messageSignature`` and ``dsseEnvelope``;
* log entries: v0.1 entries carry an inclusion promise (an inclusion proof without a checkpoint is dropped,
  as the spec allows); v0.2+ entries carry an inclusion proof with its checkpoint.

Only the signing certificate is kept from a chain: intermediates come from the trusted root, never from the
bundle (the spec lets verifiers require that). A chain that carries a root CA is refused, as protobuf-specs'
client policy says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from cryptography import x509

from verifier.base import VerificationError
from verifier.crypto import Envelope, EnvelopeSignature
from verifier.signatures._json import Fields, MalformedField
from verifier.signatures._rekor import InclusionProof, LogEntry

_VERSIONS: Final = {
    "application/vnd.dev.sigstore.bundle+json;version=0.1": "0.1",
    "application/vnd.dev.sigstore.bundle+json;version=0.2": "0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.3": "0.3",
    "application/vnd.dev.sigstore.bundle.v0.3+json": "0.3",
}
#: sigstore-go's limit on log entries per bundle.
MAX_TLOG_ENTRIES: Final = 32


@dataclass(frozen=True, slots=True)
class MessageSignature:
    """A signature over an artifact digest; ``digest_algorithm`` and ``digest`` are the bundle's
    (unauthenticated) record of that digest, empty when absent."""

    signature: bytes
    digest_algorithm: str
    digest: bytes


@dataclass(frozen=True, slots=True)
class Bundle:
    """The parts of a bundle that verification uses."""

    version: str  # "0.1", "0.2" or "0.3"
    certificate: x509.Certificate | None  # the signing certificate; None for a key-signed bundle
    tlog_entries: tuple[LogEntry, ...]
    timestamps: tuple[bytes, ...]  # RFC 3161 timestamp responses (DER)
    content: MessageSignature | Envelope

    @property
    def envelope(self) -> Envelope | None:
        """The DSSE envelope, for a DSSE bundle."""
        return self.content if isinstance(self.content, Envelope) else None

    @property
    def signature(self) -> bytes:
        """The signature that timestamps cover: the message signature, or the envelope's first one."""
        if isinstance(self.content, MessageSignature):
            return self.content.signature
        return self.content.signatures[0].sig if self.content.signatures else b""


def _only_one(fields: Fields, names: tuple[str, ...]) -> str:
    present = [name for name in names if fields.has(name)]
    if len(present) != 1:
        found = ", ".join(present) or "none"
        raise MalformedField(fields.path, f"needs exactly one of {', '.join(names)} (found: {found})")
    return present[0]


def _certificate(fields: Fields, version: str) -> x509.Certificate | None:
    kind = _only_one(fields, ("publicKey", "x509CertificateChain", "certificate"))
    if kind == "publicKey":
        return None
    if kind == "certificate":
        holder = fields.required_message("certificate")
    else:
        if version == "0.3":
            raise MalformedField(
                f"{fields.path}.x509CertificateChain", "not allowed in a v0.3 bundle (use certificate)"
            )
        certificates = fields.required_message("x509CertificateChain").messages("certificates")
        if not certificates:
            raise MalformedField(f"{fields.path}.x509CertificateChain.certificates", "empty")
        for holder in certificates[1:]:
            if _is_root_ca(_der_certificate(holder)):
                # protobuf-specs' client policy: a chain never carries a root (it would be trusted
                # only through the trusted root, and a bundle's own root is an invitation to misuse).
                raise MalformedField(
                    holder.path, "a root CA certificate, which a bundle's chain must not hold"
                )
        holder = certificates[0]
    return _der_certificate(holder)


def _der_certificate(holder: Fields) -> x509.Certificate:
    try:
        return x509.load_der_x509_certificate(holder.binary("rawBytes", required=True))
    except ValueError as error:
        raise MalformedField(f"{holder.path}.rawBytes", "not a DER certificate") from error


def _is_root_ca(certificate: x509.Certificate) -> bool:
    if certificate.issuer != certificate.subject:
        return False
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    return constraints.ca


def _entry(fields: Fields, version: str) -> LogEntry:
    kind_version = fields.required_message("kindVersion")
    promise = fields.message("inclusionPromise")
    proof_fields = fields.message("inclusionProof")
    if version == "0.1":
        if promise is None:
            raise MalformedField(f"{fields.path}.inclusionPromise", "missing (a v0.1 bundle must carry it)")
        if proof_fields is not None and not proof_fields.has("checkpoint"):
            proof_fields = None
    elif proof_fields is None:
        raise MalformedField(f"{fields.path}.inclusionProof", f"missing (a v{version} bundle must carry it)")
    proof = None
    if proof_fields is not None:
        proof = InclusionProof(
            log_index=proof_fields.int64("logIndex"),
            root_hash=proof_fields.binary("rootHash", required=True),
            tree_size=proof_fields.int64("treeSize", required=True),
            hashes=tuple(proof_fields.byte_list("hashes")),
            checkpoint=proof_fields.required_message("checkpoint").string("envelope", required=True),
        )
    return LogEntry(
        body=fields.binary("canonicalizedBody", required=True),
        log_index=fields.int64("logIndex"),
        log_id=fields.required_message("logId").binary("keyId", required=True),
        kind=kind_version.string("kind", required=True),
        version=kind_version.string("version", required=True),
        integrated_time=fields.int64("integratedTime"),
        signed_entry_timestamp=promise.binary("signedEntryTimestamp", required=True) if promise else None,
        inclusion_proof=proof,
    )


def _envelope(fields: Fields) -> Envelope:
    signatures = fields.messages("signatures")
    return Envelope(
        payload_type=fields.string("payloadType", required=True),
        payload=fields.binary("payload"),
        signatures=tuple(
            EnvelopeSignature(sig=item.binary("sig", required=True), keyid=item.string("keyid"))
            for item in signatures
        ),
    )


def _parse(document: object) -> Bundle:
    fields = Fields(document, "")
    media_type = fields.string("mediaType", required=True)
    version = _VERSIONS.get(media_type)
    if version is None:
        raise MalformedField("mediaType", f"{media_type!r} is not a supported bundle version (0.1-0.3)")
    material = fields.required_message("verificationMaterial")
    certificate = _certificate(material, version)
    entries = material.messages("tlogEntries")
    if len(entries) > MAX_TLOG_ENTRIES:
        raise MalformedField(f"{material.path}.tlogEntries", f"more than {MAX_TLOG_ENTRIES} entries")
    timestamp_data = material.message("timestampVerificationData")
    timestamps = tuple(
        item.binary("signedTimestamp", required=True)
        for item in (timestamp_data.messages("rfc3161Timestamps") if timestamp_data is not None else ())
    )
    content: MessageSignature | Envelope
    if _only_one(fields, ("messageSignature", "dsseEnvelope")) == "messageSignature":
        message = fields.required_message("messageSignature")
        digest = message.message("messageDigest")
        content = MessageSignature(
            signature=message.binary("signature", required=True),
            digest_algorithm=digest.string("algorithm") if digest else "",
            digest=digest.binary("digest") if digest else b"",
        )
    else:
        content = _envelope(fields.required_message("dsseEnvelope"))
    return Bundle(
        version=version,
        certificate=certificate,
        tlog_entries=tuple(_entry(entry, version) for entry in entries),
        timestamps=timestamps,
        content=content,
    )


def parse_bundle(raw: bytes | str) -> Bundle:
    """Read a bundle; :class:`VerificationError` naming the field when it breaks a rule of the spec."""
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise VerificationError("not a Sigstore bundle: the document is not JSON") from error
    except RecursionError as error:
        raise VerificationError("not a Sigstore bundle: the document is nested too deeply") from error
    try:
        return _parse(document)
    except MalformedField as error:
        where = f"field {error.path}" if error.path else "the document"
        raise VerificationError(
            f"not a Sigstore bundle (v0.1-v0.3): {where} {error.problem}",
            hint="the bundle is damaged or was not written by a Sigstore client",
        ) from error
