"""A model-signing signature read: its Sigstore bundle, and the model manifest its in-toto statement signs.

The format is the OpenSSF Model Signing v1.0 one (``model_signing`` 1.x): a Sigstore bundle whose DSSE
envelope carries an in-toto statement of predicate type ``https://model_signing/signature/v1.0``; the
predicate lists every file (``resources``: name, algorithm, digest) and how they were hashed
(``serialization``); the one subject's digest is SHA-256 over the resources' digests in their order.

Only the ``files`` serialization with SHA-256 is accepted: a ``shards`` manifest's digests are of byte ranges,
never of a whole file, so counting one as a file's digest would accept what no one signed. Resource names are
read as upstream reads them (``PurePosixPath``), so ``a//b`` and ``a/b`` name one file. What upstream's bundle
model (``sigstore_models``) and manifest reader refuse is refused too: a media type no Sigstore bundle has,
verification material other than exactly one of ``publicKey``, ``x509CertificateChain`` and ``certificate``,
a subject without a ``name``, a serialization without ``allow_symlinks``. Which media type and material each
method takes is the method's (``_trust``).

A signature is parsed once however many rules, signers and rooms read it in one evaluation: the last few
parses (and refusals) are kept, keyed by the bundle's bytes.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any, Literal

from verifier.base import MAX_DOCUMENT_BYTES, InputError

__all__ = ["MODEL_SIGNING_PREDICATE", "PREDICATE_TYPE", "ModelSignature", "SigstoreBundle", "read_signature"]

#: The predicate type of a model-signing v1.0 signature.
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
MODEL_SIGNING_PREDICATE = PREDICATE_TYPE  # the name the verification room's front door gives it
_STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
_PAYLOAD_TYPE = "application/vnd.in-toto+json"
_HINT = "sign the model again with model_signing 1.x (`model_signing sign key|certificate|sigstore`)"
#: The media types of a Sigstore bundle (``sigstore_models``): what any of upstream's verifiers may read.
BUNDLE_MEDIA_TYPES = (
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
    "application/vnd.dev.sigstore.bundle.v0.3+json",
)
#: The verification material a bundle carries: exactly one of these (``sigstore_models``).
Material = Literal["publicKey", "x509CertificateChain", "certificate"]
_MATERIALS: tuple[Material, ...] = ("publicKey", "x509CertificateChain", "certificate")
#: Parses kept (each holds a bundle of at most 16 MiB): enough for the signatures one evaluation reads.
_KEPT = 4


@dataclass(frozen=True, slots=True)
class SigstoreBundle:
    """What a model signature's Sigstore bundle carries around its statement, as read (nothing verified)."""

    raw: bytes  # the whole Sigstore bundle, as read (keyless: its certificate and log entry are verified)
    media_type: str  # one of BUNDLE_MEDIA_TYPES
    material: Material  # the verification material the bundle carries
    logged: bool  # it carries transparency-log entries (a Sigstore keyless bundle)
    payload: bytes  # the DSSE payload: the in-toto statement's exact bytes
    signature: bytes  # the one DSSE signature upstream verifies (``signatures[0]``)
    key_hint: str | None  # ``verificationMaterial.publicKey.hint``: SHA-256 of the signing key's PEM
    chain: tuple[bytes, ...]  # DER certificates, leaf first (x509CertificateChain, or the one certificate)


@dataclass(frozen=True, slots=True)
class ModelSignature:
    """One model-signing signature, parsed (its signature not yet verified): its bundle and the model
    manifest its statement signs."""

    bundle: SigstoreBundle
    model_name: str
    root_digest: str  # the subject's SHA-256 (hex): over the resources' digests, in their order
    #: Every signed file: its name (POSIX, relative to the model; ``.`` for a one-file model) → SHA-256 hex.
    resources: Mapping[str, str]
    ignore_paths: tuple[str, ...]
    allow_symlinks: bool
    origin: str

    def covers(self, sha256_hex: str) -> tuple[str, ...]:
        """The names of the signed files whose digest is ``sha256_hex`` (empty: none)."""
        return tuple(sorted(name for name, digest in self.resources.items() if digest == sha256_hex))


def _object(value: Any, what: str, location: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{what} is not a JSON object", location=location, hint=_HINT)
    return value


def _b64(value: Any, what: str, location: str) -> bytes:
    if not isinstance(value, str):
        raise InputError(f"{what} is not base64 text", location=location, hint=_HINT)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{what} is not valid base64", location=location, hint=_HINT) from None


def read_signature(raw: bytes, location: str) -> ModelSignature:
    """Parse a model-signing signature file (``model.sig``); :class:`InputError` naming what is wrong.

    Checks what needs no key: the size (16 MiB at most, as a file read), the bundle's shape, the statement's
    type and predicate type, one named subject whose digest is that of the resources, the ``files``
    serialization with SHA-256 for every resource, and no file named twice. The same bytes at the same
    location are parsed once (the result, or the refusal, is kept).
    """
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise InputError(
            f"the model signature is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB",
            location=location,
            hint=_HINT,
        )
    parsed = _parsed(raw, location)
    if isinstance(parsed, InputError):
        raise InputError(parsed.message, location=parsed.location, hint=parsed.hint)
    return parsed


@functools.lru_cache(maxsize=_KEPT)
def _parsed(raw: bytes, location: str) -> ModelSignature | InputError:
    try:
        return _read(raw, location)
    except InputError as error:
        return error


def _read(raw: bytes, location: str) -> ModelSignature:
    try:
        document: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InputError("not a model signature: not JSON", location=location, hint=_HINT) from None
    bundle = _object(document, "the signature", location)
    media_type = bundle.get("mediaType")
    if media_type not in BUNDLE_MEDIA_TYPES:
        raise InputError(f"not a Sigstore bundle (mediaType {media_type!r})", location=location, hint=_HINT)
    envelope = _object(bundle.get("dsseEnvelope"), "dsseEnvelope", location)
    if envelope.get("payloadType") != _PAYLOAD_TYPE:
        raise InputError(
            f"the envelope's payloadType is {envelope.get('payloadType')!r}, not {_PAYLOAD_TYPE}",
            location=location,
        )
    payload = _b64(envelope.get("payload"), "dsseEnvelope.payload", location)
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise InputError("the envelope carries no signature", location=location, hint=_HINT)
    signature = _b64(
        _object(signatures[0], "signatures[0]", location).get("sig"), "signatures[0].sig", location
    )
    material = _object(bundle.get("verificationMaterial"), "verificationMaterial", location)
    present = [name for name in _MATERIALS if name in material]
    if len(present) != 1:
        raise InputError(
            "verificationMaterial needs exactly one of publicKey, x509CertificateChain and certificate "
            f"(found: {', '.join(present) or 'none'})",
            location=location,
            hint=_HINT,
        )
    hint = _object(material.get("publicKey", {}), "publicKey", location).get("hint") or None
    if hint is not None and not isinstance(hint, str):
        raise InputError("verificationMaterial.publicKey.hint is not text", location=location)
    entries = material.get("tlogEntries", [])
    if not isinstance(entries, list):
        raise InputError("verificationMaterial.tlogEntries is not a list", location=location)
    chain = _chain(material, location)
    return _with_statement(
        SigstoreBundle(raw, media_type, present[0], bool(entries), payload, signature, hint, chain), location
    )


def _chain(material: dict[str, Any], location: str) -> tuple[bytes, ...]:
    """The DER certificates of the verification material, leaf first (an x509 chain or one certificate)."""
    if "x509CertificateChain" in material:
        certificates = _object(material["x509CertificateChain"], "x509CertificateChain", location).get(
            "certificates"
        )
        if not isinstance(certificates, list) or not certificates:
            raise InputError("x509CertificateChain has no certificates", location=location)
        return tuple(
            _b64(_object(c, f"certificates[{i}]", location).get("rawBytes"), f"certificates[{i}]", location)
            for i, c in enumerate(certificates)
        )
    if "certificate" in material:
        single = _object(material["certificate"], "certificate", location)
        return (_b64(single.get("rawBytes"), "certificate.rawBytes", location),)
    return ()


def _with_statement(around: SigstoreBundle, location: str) -> ModelSignature:
    try:
        statement = _object(json.loads(around.payload), "the statement", location)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InputError("the envelope's payload is not JSON", location=location, hint=_HINT) from None
    if statement.get("_type") != _STATEMENT_TYPE:
        raise InputError(f"not an in-toto {_STATEMENT_TYPE} statement", location=location, hint=_HINT)
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise InputError(
            f"predicate type {statement.get('predicateType')!r} is not {PREDICATE_TYPE}",
            location=location,
            hint=_HINT,
        )
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1:
        raise InputError("a model signature has exactly one subject", location=location, hint=_HINT)
    subject = _object(subjects[0], "subject[0]", location)
    name = subject.get("name")
    if not isinstance(name, str):
        # Upstream reads subject[0]["name"] as the model's name: a signature without one is refused there.
        raise InputError("subject[0] has no name (the model's name)", location=location, hint=_HINT)
    root = _object(subject.get("digest"), "subject[0].digest", location).get("sha256")
    predicate = _object(statement.get("predicate"), "predicate", location)
    serialization = _object(predicate.get("serialization"), "predicate.serialization", location)
    method, hash_type = serialization.get("method"), serialization.get("hash_type")
    if "allow_symlinks" not in serialization:
        raise InputError("predicate.serialization has no allow_symlinks", location=location, hint=_HINT)
    if method != "files":
        # Shard digests cover byte ranges: none of them is a whole file's digest.
        raise InputError(
            f"serialization method {method!r} is not supported: only 'files' (one digest per whole file)",
            location=location,
            hint="sign the model with the default files serialization",
        )
    if hash_type != "sha256":
        raise InputError(
            f"hash type {hash_type!r} is not supported: only sha256", location=location, hint=_HINT
        )
    resources = predicate.get("resources")
    if not isinstance(resources, list):
        raise InputError("predicate.resources is not a list", location=location, hint=_HINT)
    files: dict[str, str] = {}
    root_hash = hashlib.sha256()
    for index, item in enumerate(resources):
        resource = _object(item, f"resources[{index}]", location)
        file, algorithm, digest = resource.get("name"), resource.get("algorithm"), resource.get("digest")
        if not isinstance(file, str) or not isinstance(digest, str):
            raise InputError(f"resources[{index}] has no name or digest", location=location)
        if algorithm != hash_type:
            # What is hashed on verification is hash_type: a resource of another algorithm never matches.
            raise InputError(
                f"resources[{index}] ({file}) is hashed with {algorithm!r}, not the manifest's {hash_type}",
                location=location,
            )
        try:
            value = bytes.fromhex(digest)
        except ValueError:
            raise InputError(f"resources[{index}] ({file}): digest is not hex", location=location) from None
        if len(value) != 32:
            raise InputError(f"resources[{index}] ({file}): not a SHA-256 digest", location=location)
        root_hash.update(value)
        key = str(PurePosixPath(file))
        if key in files:
            raise InputError(f"the file {key} is listed twice", location=location)
        files[key] = value.hex()
    if root != root_hash.hexdigest():
        raise InputError(
            "the manifest is inconsistent: the subject's digest is not that of the resources",
            location=location,
        )
    ignore = serialization.get("ignore_paths", [])
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise InputError("serialization.ignore_paths is not a list of paths", location=location)
    return ModelSignature(
        bundle=around,
        model_name=name,
        root_digest=root_hash.hexdigest(),
        resources=MappingProxyType(files),  # one parse is shared by every reader: none may change it
        ignore_paths=tuple(ignore),
        allow_symlinks=serialization.get("allow_symlinks") is True,
        origin=location,
    )
