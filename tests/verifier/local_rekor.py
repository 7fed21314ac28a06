"""A transparency log made here, for tests: real keys, a real Merkle tree, signed checkpoints and SETs.

``LocalLog`` writes what a Rekor v1 instance returns, in the Sigstore bundle's form (``tlogEntries`` items):
the entry body, the SET over ``{body, integratedTime, logID, logIndex}`` (RFC 8785), and an RFC 6962
inclusion proof to a tree of several entries with a checkpoint signed as Rekor v1 signs it. ``trusted_root``
writes a ``trusted_root.json`` naming the log, so the command line can be pointed at it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import rfc8785

from verifier.keys import PrivateKey


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def merkle_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 Merkle tree hash over leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + merkle_root(leaves[:split]) + merkle_root(leaves[split:])).digest()


def audit_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 audit path of leaf ``index``, leaf to root."""
    if len(leaves) == 1:
        return []
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    if index < split:
        return [*audit_path(index, leaves[:split]), merkle_root(leaves[split:])]
    return [*audit_path(index - split, leaves[split:]), merkle_root(leaves[:split])]


class LocalLog:
    """A Rekor v1-style log signed by ``key``; entries land among ``filler`` other entries."""

    def __init__(
        self, key: PrivateKey, *, host: str = "rekor.local", tree_id: int = 42, filler: int = 6
    ) -> None:
        self.key = key
        self.host = host
        self.origin = f"{host} - {tree_id}"
        self.leaves = [_leaf(b"other entry %d" % i) for i in range(filler)]

    @property
    def log_id(self) -> bytes:
        return bytes.fromhex(self.key.public_key().key_id)

    def checkpoint(self, size: int, root: bytes) -> str:
        note = f"{self.origin}\n{size}\n{b64(root)}\n"
        hint = hashlib.sha256(self.key.public_key().to_der()).digest()[:4]
        return f"{note}\n\u2014 {self.host} {b64(hint + self.key.sign(note.encode()))}\n"

    def entry(
        self,
        body: dict[str, Any],
        *,
        integrated_time: int = 1_700_000_000,
        promise: bool = True,
        proof: bool = True,
    ) -> dict[str, Any]:
        """Append ``body`` (a Rekor ``ProposedEntry``) and return its bundle ``tlogEntries`` item."""
        raw = json.dumps(body, separators=(",", ":")).encode()
        index = len(self.leaves)
        self.leaves.append(_leaf(raw))
        self.leaves.append(_leaf(b"a later entry %d" % index))  # the entry is not the last leaf
        entry: dict[str, Any] = {
            "logIndex": str(1000 + index),  # a global index, as a sharded Rekor v1 reports it
            "logId": {"keyId": b64(self.log_id)},
            "kindVersion": {"kind": body["kind"], "version": body["apiVersion"]},
            "integratedTime": str(integrated_time),
            "canonicalizedBody": b64(raw),
        }
        if promise:
            signed = rfc8785.dumps(
                {
                    "body": b64(raw),
                    "integratedTime": integrated_time,
                    "logID": self.log_id.hex(),
                    "logIndex": 1000 + index,
                }
            )
            entry["inclusionPromise"] = {"signedEntryTimestamp": b64(self.key.sign(signed))}
        if proof:
            root = merkle_root(self.leaves)
            entry["inclusionProof"] = {
                "logIndex": str(index),
                "rootHash": b64(root),
                "treeSize": str(len(self.leaves)),
                "hashes": [b64(node) for node in audit_path(index, self.leaves)],
                "checkpoint": {"envelope": self.checkpoint(len(self.leaves), root)},
            }
        return entry

    def trusted_root(self, *, start: str = "2020-01-01T00:00:00Z", end: str | None = None) -> dict[str, Any]:
        """A ``trusted_root.json`` whose only content is this log."""
        valid_for = {"start": start} | ({"end": end} if end else {})
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [
                {
                    "baseUrl": f"https://{self.host}",
                    "hashAlgorithm": "SHA2_256",
                    "publicKey": {
                        "rawBytes": b64(self.key.public_key().to_der()),
                        "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                        "validFor": valid_for,
                    },
                    "logId": {"keyId": b64(self.log_id)},
                }
            ],
        }


def hashedrekord(digest: bytes, signature: bytes, public_pem: bytes) -> dict[str, Any]:
    """A ``hashedrekord`` 0.0.1 body: the artifact's SHA-256, the signature and the signer's PEM."""
    return {
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
            "signature": {"content": b64(signature), "publicKey": {"content": b64(public_pem)}},
        },
    }


def dsse_entry(payload: bytes, signatures: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """A ``dsse`` 0.0.1 body: the payload's SHA-256 and each (signature, verifier PEM)."""
    return {
        "apiVersion": "0.0.1",
        "kind": "dsse",
        "spec": {
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
            "signatures": [{"signature": b64(sig), "verifier": b64(pem)} for sig, pem in signatures],
        },
    }
