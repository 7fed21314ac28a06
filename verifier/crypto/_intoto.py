"""in-toto attestation Statement v1 (and reading v0.1, which has the same fields).

Spec: https://github.com/in-toto/attestation/tree/main/spec/v1 (statement.md, resource_descriptor.md,
digest_set.md). A Statement binds a predicate to its subjects by digest; it travels in a DSSE envelope with
payload type ``application/vnd.in-toto+json``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from verifier.base import InputError, VerificationError, hash_file, parse_sha256
from verifier.crypto._dsse import Envelope, sign_envelope
from verifier.crypto._keys import PrivateKey

__all__ = [
    "PAYLOAD_TYPE",
    "STATEMENT_TYPE",
    "ResourceDescriptor",
    "Statement",
    "StatementTooDeep",
    "claimed_by_envelope",
    "claimed_by_statement",
    "sign_statement",
    "statement_for_file",
    "statement_from_envelope",
]

#: DSSE payload type of in-toto statements.
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
#: ``_type`` written by this module.
STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
# v0.1 (still written by older cosign releases) differs only in the `_type` value for our purposes.
_READABLE_TYPES: Final = frozenset({STATEMENT_TYPE, "https://in-toto.io/Statement/v0.1"})
# digest_set.md v1.1: the named algorithms are hex; those of fixed size have these lengths (git objects are
# SHA-1 or SHA-256); shake128, shake256, blake2b, blake2s and gost have a size of the producer's choice.
_HEX_LENGTHS: Final[dict[str, tuple[int, ...]]] = {
    **dict.fromkeys(("sha224", "sha512_224", "sha3_224"), (56,)),
    **dict.fromkeys(("sha256", "sha512_256", "sha3_256", "sm3", "dirHash1"), (64,)),
    **dict.fromkeys(("sha384", "sha3_384"), (96,)),
    **dict.fromkeys(("sha512", "sha3_512"), (128,)),
    **dict.fromkeys(("sha1", "ripemd160"), (40,)),
    "md5": (32,),
    **dict.fromkeys(("gitCommit", "gitTree", "gitBlob", "gitTag"), (40, 64)),
    **dict.fromkeys(("shake128", "shake256", "blake2b", "blake2s", "gost"), ()),
}
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


class ResourceDescriptor(BaseModel):
    """An in-toto ResourceDescriptor; as a subject it needs a digest."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", defer_build=True)

    name: str | None = None
    uri: str | None = None
    digest: dict[str, str] = Field(default_factory=dict)
    content: str | None = None
    download_location: str | None = Field(default=None, alias="downloadLocation")
    media_type: str | None = Field(default=None, alias="mediaType")
    annotations: dict[str, Any] | None = None

    @field_validator("digest")
    @classmethod
    def _hex_digests(cls, value: dict[str, str]) -> dict[str, str]:
        normalised = {}
        for algorithm, text in value.items():
            lengths = _HEX_LENGTHS.get(algorithm)
            if lengths is not None and (
                _HEX.fullmatch(text) is None or (lengths and len(text) not in lengths)
            ):
                size = " or ".join(str(n) for n in lengths) or "an even number of"
                raise ValueError(f"digest {algorithm} must be {size} hexadecimal characters")
            # Hex digests compare case-insensitively; other algorithms' values are kept as given.
            normalised[algorithm] = text.lower() if lengths is not None else text
        return normalised


class Statement(BaseModel):
    """An in-toto Statement: subjects (by digest), a predicate type URI and the predicate."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", defer_build=True)

    type_: str = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor] = Field(min_length=1)
    predicate_type: str = Field(alias="predicateType", min_length=1)
    predicate: dict[str, Any] = Field(default_factory=dict)

    @field_validator("type_")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in _READABLE_TYPES:
            raise ValueError(f"unsupported statement type {value!r}; expected {STATEMENT_TYPE}")
        return value

    @model_validator(mode="after")
    def _subjects_have_digests(self) -> Statement:
        for index, subject in enumerate(self.subject):
            if not subject.digest:
                raise ValueError(f"subject[{index}] has no digest")
        return self

    def to_json(self) -> bytes:
        """Compact JSON with the spec's field names (``_type``, ``predicateType``); unset fields left out."""
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    def subject_digests(self) -> frozenset[str]:
        """Every subject's SHA-256 as ``sha256:<hex>``."""
        return frozenset(f"sha256:{s.digest['sha256']}" for s in self.subject if "sha256" in s.digest)

    def require_subject(self, digest: str) -> ResourceDescriptor:
        """The subject whose SHA-256 is ``digest`` (``sha256:<hex>`` or bare hex).

        Raises :class:`VerificationError` naming the digests the statement does cover.
        """
        hex_value = parse_sha256(digest)
        for subject in self.subject:
            if subject.digest.get("sha256") == hex_value:
                return subject
        covered = ", ".join(sorted(self.subject_digests())) or "no sha256 digest"
        raise VerificationError(
            f"subject digest mismatch: the statement covers {covered}, not sha256:{hex_value}",
            hint="the attestation was made for a different artifact; attest this one",
        )


class StatementTooDeep(InputError):
    """The statement is nested deeper than the JSON parser goes: it cannot be read, nor its signature
    checked, but it may be signed evidence (see :func:`claimed_by_statement`)."""


_CLAIMED_TYPE: Final = re.compile(rb'"predicateType"\s*:\s*"([^"\\]{1,1000})"')
_CLAIMED_SHA256: Final = re.compile(rb'"sha256"\s*:\s*"([0-9a-f]{64})"')
_ENVELOPE_PAYLOAD: Final = re.compile(rb'"payload"\s*:\s*"([A-Za-z0-9+/=_-]*)')


def claimed_by_statement(text: bytes) -> tuple[str | None, frozenset[str] | None]:
    """What the (start of the) text of a statement that cannot be parsed claims to be: its predicate type
    and the sha256 digests it names, each None when not found. Unverified: only for saying which rules a
    document that could not be checked might have counted for (a digest named anywhere counts, so that
    more rules cannot tell, never fewer)."""
    found = _CLAIMED_TYPE.search(text)
    predicate_type = found.group(1).decode("utf-8", "replace") if found else None
    digests = frozenset(f"sha256:{m.group(1).decode()}" for m in _CLAIMED_SHA256.finditer(text))
    return predicate_type, digests or None


def claimed_by_envelope(prefix: bytes) -> tuple[str | None, frozenset[str] | None]:
    """:func:`claimed_by_statement` of the statement in a DSSE envelope of which only ``prefix`` was read
    (a file over the size limit): the part of its base64 payload that the prefix holds."""
    found = _ENVELOPE_PAYLOAD.search(prefix)
    if found is None:
        return None, None
    encoded = found.group(1)
    encoded = encoded[: len(encoded) - len(encoded) % 4]
    try:
        text = base64.b64decode(encoded.replace(b"-", b"+").replace(b"_", b"/"))
    except (binascii.Error, ValueError):
        return None, None
    return claimed_by_statement(text)


def statement_from_envelope(envelope: Envelope, *, location: str | None = None) -> Statement:
    """The in-toto Statement carried by ``envelope``.

    Raises :class:`VerificationError` when the payload type is not ``application/vnd.in-toto+json`` and
    :class:`InputError` when the payload is not a valid statement. Does not verify signatures.
    """
    if envelope.payload_type != PAYLOAD_TYPE:
        raise VerificationError(
            f"payload type is {envelope.payload_type!r}, expected {PAYLOAD_TYPE!r}",
            location=location,
            hint="this envelope does not carry an in-toto statement",
        )
    try:
        document = json.loads(envelope.payload)
        return Statement.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'statement'}: {e['msg']}" for e in error.errors()
        )
        raise InputError(f"invalid in-toto statement: {problems}", location=location) from error
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError("the in-toto statement is not JSON", location=location) from error
    except RecursionError as error:
        raise StatementTooDeep("the in-toto statement is nested too deeply", location=location) from error


def statement_for_file(
    path: Path, predicate_type: str, predicate: dict[str, Any], *, name: str | None = None
) -> Statement:
    """A Statement v1 whose one subject is the file at ``path`` (name and streamed SHA-256)."""
    try:
        digest = hash_file(path)
    except OSError as error:
        raise InputError(f"cannot read subject file: {error.strerror}", location=str(path)) from error
    subject = ResourceDescriptor(name=name or path.name, digest={"sha256": digest.sha256})
    return Statement(subject=[subject], predicate_type=predicate_type, predicate=predicate)


def sign_statement(statement: Statement, key: PrivateKey) -> Envelope:
    """A DSSE envelope (payload type ``application/vnd.in-toto+json``) of ``statement`` signed by ``key``."""
    return sign_envelope(PAYLOAD_TYPE, statement.to_json(), key)
