"""Proof that an entry is in a transparency log: the Merkle inclusion proof and the signed checkpoint.

* Inclusion: RFC 9162 §2.1.3.2 over RFC 6962 hashing (leaf ``SHA-256(0x00 || entry)``, node
  ``SHA-256(0x01 || left || right)``), from the leaf up to the root hash.
* Checkpoint: a signed note (C2SP ``signed-note``, ``tlog-checkpoint``): the note text (origin, tree size,
  base64 root hash, optional extension lines), a blank line, then ``— <name> <base64(key hint || signature)>``
  lines. The first line whose name and key hint are the log's must verify; later lines of the same key are
  not verified again (golang.org/x/mod/sumdb/note skips them too), so a note of repeated lines costs one
  verification; lines of other signers (witnesses) are ignored.

Key hints (the first four bytes of the key id): Rekor v1 signs as ``SHA-256(SubjectPublicKeyInfo)``; Rekor v2
follows C2SP, ``SHA-256(name || 0x0A || type || key)`` for Ed25519 (type 0x01, raw key) and RSA (type 0xFF
with ``PKIX-RSA-PKCS#1v1.5``, SPKI), and the SPKI hash for ECDSA. Rekor v2 also names itself: the origin
and the signature name must both be the log's host name.

Both parts were written for trtguard (sigstore-python keeps its versions private); the tests check them
against the public conformance suite and hand-built trees.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from verifier.base import VerificationError
from verifier.crypto import PublicKey

_SIGNATURE_PREFIX: Final = "\u2014 "
_MAX_SIGNATURE_LINES: Final = 100
_MAX_PROOF_HASHES: Final = 64  # a tree of 2^64 leaves: anything longer is not a proof
# ASCII digits only (str.isdigit admits superscripts that int() refuses), no leading zero, below 2^64.
_TREE_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")


def leaf_hash(entry: bytes) -> bytes:
    """RFC 6962 leaf hash."""
    return hashlib.sha256(b"\x00" + entry).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root hash that ``proof`` leads to from ``leaf`` at ``index`` in a tree of ``size`` leaves.

    Raises :class:`VerificationError` when the proof cannot belong to such a tree (index out of range,
    wrong number of hashes, a hash that is not 32 bytes).
    """
    if not 0 <= index < size:
        raise VerificationError(f"the inclusion proof's index {index} is outside a tree of {size} entries")
    if len(proof) > _MAX_PROOF_HASHES or any(len(node) != 32 for node in proof):
        raise VerificationError("the inclusion proof's hashes are not 32-byte SHA-256 values")
    node_index, last = index, size - 1
    computed = leaf
    for sibling in proof:
        if last == 0:
            raise VerificationError("the inclusion proof has more hashes than the tree has levels")
        if node_index & 1 or node_index == last:
            computed = _node(sibling, computed)
            if not node_index & 1:
                while node_index & 1 == 0 and node_index != 0:
                    node_index >>= 1
                    last >>= 1
        else:
            computed = _node(computed, sibling)
        node_index >>= 1
        last >>= 1
    if last != 0:
        raise VerificationError("the inclusion proof has fewer hashes than the tree has levels")
    return computed


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The signed tree head: which log (origin), how many entries, and the root hash over them."""

    origin: str
    size: int
    root_hash: bytes


def key_hint(key: PublicKey, name: str, *, rekor_v2: bool) -> bytes:
    """The four-byte key hint with which ``key`` (named ``name``) signs checkpoints."""
    spki = key.to_der()
    if rekor_v2:
        public = key.crypto
        if isinstance(public, ed25519.Ed25519PublicKey):
            raw = public.public_bytes_raw()
            return hashlib.sha256(name.encode() + b"\n\x01" + raw).digest()[:4]
        if isinstance(public, rsa.RSAPublicKey):
            return hashlib.sha256(name.encode() + b"\n\xffPKIX-RSA-PKCS#1v1.5" + spki).digest()[:4]
    return hashlib.sha256(spki).digest()[:4]


def _parse_note(text: str) -> tuple[str, list[tuple[str, bytes, bytes]]]:
    """The note text (with its final newline) and the signature lines as (name, hint, signature)."""
    if text.count("\n\n") != 1:
        raise VerificationError("the checkpoint is not a signed note (one blank line before the signatures)")
    body, signature_block = text.split("\n\n")
    if not signature_block.endswith("\n"):
        raise VerificationError("the checkpoint's signature lines do not end with a newline")
    lines = signature_block[:-1].split("\n")
    if len(lines) > _MAX_SIGNATURE_LINES:
        raise VerificationError(f"the checkpoint carries more than {_MAX_SIGNATURE_LINES} signatures")
    signatures = []
    for line in lines:
        parts = line.removeprefix(_SIGNATURE_PREFIX).split(" ")
        if not line.startswith(_SIGNATURE_PREFIX) or len(parts) != 2 or not parts[0]:
            raise VerificationError("the checkpoint has a malformed signature line")
        try:
            blob = base64.b64decode(parts[1], validate=True)
        except (binascii.Error, ValueError) as error:
            raise VerificationError("a checkpoint signature is not valid base64") from error
        if len(blob) < 5:
            raise VerificationError("a checkpoint signature is too short")
        signatures.append((parts[0], blob[:4], blob[4:]))
    return body + "\n", signatures


def _parse_checkpoint(note: str) -> Checkpoint:
    lines = note[:-1].split("\n")
    if len(lines) < 3 or not lines[0]:
        raise VerificationError("the checkpoint needs an origin, a tree size and a root hash")
    if _TREE_SIZE.fullmatch(lines[1]) is None or int(lines[1]) >= 2**64:
        raise VerificationError(f"the checkpoint's tree size {lines[1][:40]!r} is not a decimal number")
    try:
        root_hash = base64.b64decode(lines[2], validate=True)
    except (binascii.Error, ValueError) as error:
        raise VerificationError("the checkpoint's root hash is not valid base64") from error
    if len(root_hash) != 32:
        raise VerificationError("the checkpoint's root hash is not a SHA-256 value")
    return Checkpoint(origin=lines[0], size=int(lines[1]), root_hash=root_hash)


def verify_checkpoint(text: str, key: PublicKey, *, name: str | None, rekor_v2: bool) -> Checkpoint:
    """Check the log's signature on the checkpoint ``text``; return the tree head it signs.

    ``name`` is the log's host name (from the trusted root's ``baseUrl``); Rekor v2 checkpoints must carry
    it as their origin and signature name. Rekor v1 names its signatures after the server's host name,
    which a trusted root does not record, so there only the key hint selects the log's line.
    """
    if rekor_v2 and not name:
        raise VerificationError(
            "the log has no baseUrl in the trusted root, so its Rekor v2 checkpoint cannot be checked",
            hint="add the log's baseUrl to the trusted root",
        )
    note, signatures = _parse_note(text)
    checkpoint = _parse_checkpoint(note)
    if rekor_v2 and checkpoint.origin != name:
        raise VerificationError(f"the checkpoint is for log {checkpoint.origin!r}, not {name!r}")
    hint = key_hint(key, name or "", rekor_v2=rekor_v2)
    ours = next(
        (
            signature
            for signer, signer_hint, signature in signatures
            if signer_hint == hint and (not rekor_v2 or signer == name)
        ),
        None,
    )
    if ours is None:
        raise VerificationError("the checkpoint carries no signature by the log's key")
    if not key.verify(ours, note.encode()):
        raise VerificationError("the checkpoint's signature does not verify with the log key")
    return checkpoint
