"""OpenPGP signature packets built by hand (RFC 9580 §5.2), for what ``gpg`` will not write: a signature whose
issuer subpackets name another key than the one that made it, or none (issue 25, D2).

The signing key is a real ``gpg`` Ed25519 key: its secret (exported unprotected by ``gpg``) is read from the
secret-key packet, and the signature is an ordinary v4 EdDSA binary signature over the data, with the hashed
and unhashed subpackets the caller chooses.
"""

from __future__ import annotations

import hashlib
import struct
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.gpg import GnuPG

_EDDSA_LEGACY, _SHA256, _BINARY = 22, 8, 0x00
_CREATED, _ISSUER_KEY_ID, _ISSUER_FINGERPRINT = 2, 16, 33


def _packets(data: bytes) -> list[tuple[int, bytes]]:
    """(tag, body) of each packet of a binary OpenPGP stream (new and old formats, definite lengths)."""
    found, offset = [], 0
    while offset < len(data):
        header = data[offset]
        if header & 0x40:  # new format
            tag, offset = header & 0x3F, offset + 1
            first = data[offset]
            if first < 192:
                length, offset = first, offset + 1
            elif first < 224:
                length, offset = ((first - 192) << 8) + data[offset + 1] + 192, offset + 2
            else:
                length, offset = struct.unpack(">I", data[offset + 1 : offset + 5])[0], offset + 5
        else:
            tag, kind, offset = (header >> 2) & 0x0F, header & 0x03, offset + 1
            size = {0: 1, 1: 2, 2: 4}[kind]
            length = int.from_bytes(data[offset : offset + size], "big")
            offset += size
        found.append((tag, data[offset : offset + length]))
        offset += length
    return found


def _mpi(value: bytes) -> bytes:
    value = value.lstrip(b"\0")
    bits = (len(value) - 1) * 8 + value[0].bit_length() if value else 0
    return struct.pack(">H", bits) + value


def _read_mpi(body: bytes, offset: int) -> tuple[bytes, int]:
    bits = struct.unpack(">H", body[offset : offset + 2])[0]
    size = (bits + 7) // 8
    return body[offset + 2 : offset + 2 + size], offset + 2 + size


def ed25519_secret(gpg: GnuPG, fingerprint: str) -> Ed25519PrivateKey:
    """The Ed25519 signing key of the primary key ``fingerprint`` (made by ``gpg --quick-gen-key … ed25519``
    without a passphrase)."""
    exported = gpg.run("--export-secret-keys", fingerprint, at=datetime.now().astimezone()).stdout
    for tag, body in _packets(exported):
        if tag not in (5, 7) or body[0] != 4 or body[5] != _EDDSA_LEGACY:
            continue
        oid_length = body[6]
        _, end = _read_mpi(body, 7 + oid_length)  # the public point
        public = body[:end]
        mine = hashlib.sha1(b"\x99" + struct.pack(">H", len(public)) + public).hexdigest().upper()  # noqa: S324
        if mine != fingerprint.upper():
            continue
        if body[end] != 0:
            raise ValueError("the secret key is protected")
        seed, _ = _read_mpi(body, end + 1)
        return Ed25519PrivateKey.from_private_bytes(seed.rjust(32, b"\0"))
    raise ValueError(f"no unprotected Ed25519 secret key {fingerprint} in gpg's export")


def _subpacket(kind: int, value: bytes) -> bytes:
    return bytes([len(value) + 1, kind]) + value


def issuer_subpackets(fingerprint: str | None = None, key_id: str | None = None) -> bytes:
    """An issuer fingerprint (v4) and/or issuer key ID subpacket, for the hashed or unhashed area."""
    found = b""
    if fingerprint is not None:
        found += _subpacket(_ISSUER_FINGERPRINT, b"\x04" + bytes.fromhex(fingerprint))
    if key_id is not None:
        found += _subpacket(_ISSUER_KEY_ID, bytes.fromhex(key_id))
    return found


def sign_detached(
    key: Ed25519PrivateKey, data: bytes, *, created: datetime, hashed: bytes = b"", unhashed: bytes = b""
) -> bytes:
    """A binary v4 EdDSA detached signature over ``data`` made with ``key``; ``hashed`` and ``unhashed`` are
    subpackets (:func:`issuer_subpackets`) added after the creation time and in the unhashed area."""
    hashed = _subpacket(_CREATED, struct.pack(">I", int(created.timestamp()))) + hashed
    head = bytes([4, _BINARY, _EDDSA_LEGACY, _SHA256]) + struct.pack(">H", len(hashed)) + hashed
    digest = hashlib.sha256(data + head + b"\x04\xff" + struct.pack(">I", len(head))).digest()
    signature = key.sign(digest)
    body = head + struct.pack(">H", len(unhashed)) + unhashed + digest[:2]
    body += _mpi(signature[:32]) + _mpi(signature[32:])
    if len(body) < 192:
        return bytes([0xC2, len(body)]) + body
    length = len(body) - 192
    return bytes([0xC2, (length >> 8) + 192, length & 0xFF]) + body
