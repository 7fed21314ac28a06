"""Signed checkpoints: what seals a segment of the decision log.

A checkpoint says "records ``first_seq``…``last_seq`` of this log, after ``prev_hash``, end in ``head_hash``",
with the decision times of the first and last record and when it was sealed, signed with a key the operator
holds (any key :mod:`verifier.crypto._keys` signs with: ECDSA, Ed25519 or RSA). The signed bytes are the
canonical
JSON (RFC 8785) of the statement, so anyone can check one with the public key alone. Consecutive checkpoints
link: each one's ``prev_hash`` is the ``head_hash`` of the one before (the genesis hash for the first).

A checkpoint of format 3 (:data:`CHECKPOINT_TYPE`) also names change control's carried state before and
after its segment (``prev_carried_hash``, ``carried_hash``: :mod:`decisionlog._carried`), so that what
pruning carries forward is signed too and links from checkpoint to checkpoint as the records do. Format 1
(:data:`CHECKPOINT_TYPE_1`, written before the carried state existed) and format 2
(:data:`CHECKPOINT_TYPE_2`, whose carried hashes name a state that keyed workloads without their API group)
are read as they are; neither signs the carried state read now (:attr:`Checkpoint.signs_carried`), which is
then rebuilt from the records (docs/decision-log-storage.md, "Upgrading").

A checkpoint file (``trtguard audit seal`` and ``archive`` write them; ``audit verify --anchor`` reads them)
is ``{"checkpoint": statement, "signature": base64}``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from decisionlog._body_json import canonical_object, unique_json
from decisionlog._errors import DecisionLogError
from decisionlog._record import canonical_json, format_time
from verifier.crypto import PrivateKey, PublicKey

CHECKPOINT_TYPE: Final = "trtguard.dev/decision-log-checkpoint/v3"
CHECKPOINT_TYPE_2: Final = "trtguard.dev/decision-log-checkpoint/v2"
CHECKPOINT_TYPE_1: Final = "trtguard.dev/decision-log-checkpoint/v1"
_VERSIONS: Final = {CHECKPOINT_TYPE_1: 1, CHECKPOINT_TYPE_2: 2, CHECKPOINT_TYPE: 3}
_HASH = re.compile(r"[0-9a-f]{64}")
#: A checkpoint file is a few hundred bytes; anything far larger is not one.
MAX_FILE_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The signed statement about one sealed segment, with its signature."""

    first_seq: int
    last_seq: int
    prev_hash: str
    head_hash: str
    first_time: str
    last_time: str
    sealed_at: str
    key_id: str
    signature: bytes
    #: The carried state before ``first_seq`` and after ``last_seq`` (None in a format-1 checkpoint; of the
    #: earlier state, without API groups, in a format-2 one).
    prev_carried_hash: str | None = None
    carried_hash: str | None = None
    #: The format: 1, 2 or 3 (:data:`CHECKPOINT_TYPE`).
    version: int = 3

    @property
    def signs_carried(self) -> bool:
        """Whether ``prev_carried_hash`` and ``carried_hash`` are digests of the carried state as trtguard
        keeps it now (format 3): only then are they checked against it."""
        return self.version == 3

    @property
    def count(self) -> int:
        """Records in the segment."""
        return self.last_seq - self.first_seq + 1

    def statement(self) -> dict[str, Any]:
        """What is signed."""
        carried = (
            {}
            if self.carried_hash is None or self.prev_carried_hash is None
            else {"prev_carried_hash": self.prev_carried_hash, "carried_hash": self.carried_hash}
        )
        kind = {1: CHECKPOINT_TYPE_1, 2: CHECKPOINT_TYPE_2}.get(self.version, CHECKPOINT_TYPE)
        return {
            "type": kind if carried else CHECKPOINT_TYPE_1,
            **carried,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "count": self.count,
            "prev_hash": self.prev_hash,
            "head_hash": self.head_hash,
            "first_time": self.first_time,
            "last_time": self.last_time,
            "sealed_at": self.sealed_at,
            "key_id": self.key_id,
        }

    def signed_bytes(self) -> bytes:
        """The canonical JSON of :meth:`statement`: the bytes the signature covers."""
        return canonical_json(self.statement())

    def signature_text(self) -> str:
        """The signature in standard base64."""
        return base64.b64encode(self.signature).decode()

    def to_json(self) -> dict[str, Any]:
        """The checkpoint file's object."""
        return {"checkpoint": self.statement(), "signature": self.signature_text()}

    def verify(self, key: PublicKey) -> bool:
        """True when ``key`` signed this statement."""
        return key.key_id == self.key_id and key.verify(self.signature, self.signed_bytes())

    def summary(self) -> str:
        """One line for people."""
        return (
            f"seq {self.first_seq}…{self.last_seq} ({self.count} records, {self.first_time} to "
            f"{self.last_time}), head {self.head_hash[:16]}…, key {self.key_id[:16]}…"
        )


def sign(
    key: PrivateKey,
    *,
    first_seq: int,
    last_seq: int,
    prev_hash: str,
    head_hash: str,
    first_time: str,
    last_time: str,
    prev_carried_hash: str,
    carried_hash: str,
    now: datetime | None = None,
) -> Checkpoint:
    """A checkpoint of records ``first_seq``…``last_seq`` and of the carried state before and after them,
    signed with ``key``."""
    unsigned = Checkpoint(
        first_seq,
        last_seq,
        prev_hash,
        head_hash,
        first_time,
        last_time,
        format_time(now or datetime.now(UTC)),
        key.public_key().key_id,
        b"",
        prev_carried_hash,
        carried_hash,
    )
    return dataclasses.replace(unsigned, signature=key.sign(unsigned.signed_bytes()))


def parse(data: object, *, where: str) -> Checkpoint:
    """A checkpoint from its file object (or a stored row's ``statement`` and ``signature``)."""
    hint = "pass a checkpoint file written by `trtguard audit seal` or `trtguard audit archive`"
    if not isinstance(data, dict) or not isinstance(data.get("checkpoint"), dict):
        raise DecisionLogError("not a decision-log checkpoint", location=where, hint=hint)
    if unknown := sorted(set(data) - {"checkpoint", "signature"}):
        raise DecisionLogError(
            f"malformed checkpoint: members other than checkpoint and signature ({', '.join(unknown)})",
            location=where,
            hint=hint,
        )
    statement: dict[str, Any] = data["checkpoint"]
    version = _VERSIONS.get(str(statement.get("type")))
    if version is None:
        raise DecisionLogError(
            f"checkpoint type {statement.get('type')!r} is not {CHECKPOINT_TYPE} (or an earlier one, "
            f"{CHECKPOINT_TYPE_2} or {CHECKPOINT_TYPE_1})",
            location=where,
            hint=hint,
        )
    carried = version > 1
    try:
        checkpoint = Checkpoint(
            first_seq=_int(statement, "first_seq"),
            last_seq=_int(statement, "last_seq"),
            prev_hash=_hash(statement, "prev_hash"),
            head_hash=_hash(statement, "head_hash"),
            first_time=_text(statement, "first_time"),
            last_time=_text(statement, "last_time"),
            sealed_at=_text(statement, "sealed_at"),
            key_id=_hash(statement, "key_id"),
            signature=base64.b64decode(_text(data, "signature"), validate=True),
            prev_carried_hash=_hash(statement, "prev_carried_hash") if carried else None,
            carried_hash=_hash(statement, "carried_hash") if carried else None,
            version=version,
        )
    except (KeyError, TypeError, ValueError, binascii.Error) as error:
        raise DecisionLogError(f"malformed checkpoint: {error}", location=where, hint=hint) from None
    if checkpoint.statement() != statement:
        raise DecisionLogError(
            "malformed checkpoint: unknown fields or a count that does not match its seqs",
            location=where,
            hint=hint,
        )
    return checkpoint


def _int(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{key} must be a positive integer")
    return value


def _text(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value


def _hash(data: dict[str, Any], key: str) -> str:
    value = _text(data, key)
    if not _HASH.fullmatch(value):
        raise ValueError(f"{key} must be 64 lower-case hex digits")
    return value


def from_row(statement: str, signature: str, *, where: str) -> Checkpoint:
    """A checkpoint as stored in ``trtguard_checkpoints``: its statement exactly the canonical JSON stored."""
    data = canonical_object(statement, what="a stored checkpoint statement", where=where)
    return parse({"checkpoint": data, "signature": signature}, where=where)


def read_checkpoint_file(path: Path) -> Checkpoint:
    """A checkpoint file."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise DecisionLogError(f"cannot read the checkpoint: {error.strerror}", location=str(path)) from None
    if len(data) > MAX_FILE_BYTES:
        raise DecisionLogError("not a checkpoint file: too large", location=str(path))
    try:
        parsed = unique_json(data, what="the checkpoint file", where=str(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DecisionLogError(f"checkpoint file is not JSON: {error}", location=str(path)) from None
    return parse(parsed, where=str(path))


def write_checkpoint_file(checkpoint: Checkpoint, path: Path) -> None:
    """Write ``checkpoint`` to ``path`` (replacing it atomically)."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(checkpoint.to_json(), indent=2) + "\n")
    temporary.replace(path)
