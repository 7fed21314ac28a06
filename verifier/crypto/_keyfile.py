"""cosign's encrypted private key file: scrypt + NaCl secretbox around a PKCS#8 DER key.

Layout (cosign ``pkg/cosign/keys.go`` and go-securesystemslib ``encrypted``): a PEM block whose body is the
JSON ``{"kdf": {"name": "scrypt", "params": {"N", "r", "p"}, "salt"}, "cipher": {"name": "nacl/secretbox",
"nonce"}, "ciphertext"}``, byte fields in standard base64 with padding (Go's ``encoding/json``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from typing import Final

import nacl.exceptions
import nacl.secret
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifier.base import InputError
from verifier.crypto._der import der_header

SIGSTORE_LABEL: Final = "ENCRYPTED SIGSTORE PRIVATE KEY"
COSIGN_LABEL: Final = "ENCRYPTED COSIGN PRIVATE KEY"
LABELS: Final = (SIGSTORE_LABEL, COSIGN_LABEL)

# The parameter sets go-securesystemslib accepts ("legacy", "standard", "OWASP"). Anything else is refused
# before deriving: a key file must not be able to make us spend gigabytes of memory or minutes of CPU.
_ALLOWED_SCRYPT: Final = frozenset({(1 << 15, 8, 1), (1 << 16, 8, 1), (1 << 17, 8, 1)})
_WRITE_N: Final = 1 << 16  # cosign >= 2.2 writes N=2^16
_SALT_SIZE: Final = 32
_NONCE_SIZE: Final = nacl.secret.SecretBox.NONCE_SIZE


class WrongPassword(InputError):
    """The password does not open the encrypted key file."""


class _Kdf(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    name: str
    params: dict[str, int]
    salt: str


class _Cipher(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    name: str
    nonce: str


class _KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    kdf: _Kdf
    cipher: _Cipher
    ciphertext: str = Field(min_length=1)


def _b64(value: str, field: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InputError(f"encrypted key field {field} is not valid base64") from error


def _derive(password: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    # hashlib.scrypt defaults to OpenSSL's 32 MiB limit, below what N=2^15, r=8 already needs.
    maxmem = 128 * r * (n + p + 2) + (1 << 20)
    return hashlib.scrypt(password, salt=salt, n=n, r=r, p=p, dklen=32, maxmem=maxmem)


def decrypt(body: bytes, password: bytes) -> bytes:
    """Return the PKCS#8 DER key inside a cosign key file's PEM body (already base64-decoded).

    Raises :class:`InputError` for a malformed file or refused parameters, :class:`WrongPassword` when the
    box does not open.
    """
    try:
        document = json.loads(body)
        key_file = _KeyFile.model_validate(document)
    except (ValueError, ValidationError, RecursionError) as error:
        raise InputError(
            "encrypted key file body is not the cosign JSON layout",
            hint="expected {kdf, cipher, ciphertext} as written by `cosign generate-key-pair`",
        ) from error
    if key_file.kdf.name != "scrypt":
        raise InputError(
            f"unsupported key derivation {key_file.kdf.name!r}", hint="cosign key files use scrypt"
        )
    if key_file.cipher.name != "nacl/secretbox":
        raise InputError(
            f"unsupported cipher {key_file.cipher.name!r}", hint="cosign key files use nacl/secretbox"
        )
    params = key_file.kdf.params
    triple = (params.get("N"), params.get("r"), params.get("p"))
    if set(params) != {"N", "r", "p"} or triple not in _ALLOWED_SCRYPT:
        raise InputError(
            f"scrypt parameters {params} are not accepted",
            hint="cosign accepts only N in {32768, 65536, 131072} with r=8, p=1",
        )
    salt = _b64(key_file.kdf.salt, "kdf.salt")
    nonce = _b64(key_file.cipher.nonce, "cipher.nonce")
    ciphertext = _b64(key_file.ciphertext, "ciphertext")
    if len(nonce) != _NONCE_SIZE:
        raise InputError(f"secretbox nonce is {len(nonce)} bytes, expected {_NONCE_SIZE}")
    n, r, p = (int(v) for v in triple if v is not None)
    box_key = _derive(password, salt, n, r, p)
    try:
        return nacl.secret.SecretBox(box_key).decrypt(ciphertext, nonce)
    except nacl.exceptions.CryptoError as error:
        raise WrongPassword(
            "wrong password for the encrypted private key",
            hint="check --password-file, TRTGUARD_PASSWORD or COSIGN_PASSWORD",
        ) from error


def encrypt(pkcs8_der: bytes, password: bytes) -> bytes:
    """The JSON body of a cosign key file that wraps ``pkcs8_der`` (scrypt N=2^16, r=8, p=1)."""
    salt = os.urandom(_SALT_SIZE)
    nonce = os.urandom(_NONCE_SIZE)
    box_key = _derive(password, salt, _WRITE_N, 8, 1)
    # .ciphertext is the Poly1305 tag followed by the encrypted bytes: Go's secretbox.Seal output sans nonce.
    ciphertext = nacl.secret.SecretBox(box_key).encrypt(pkcs8_der, nonce).ciphertext
    document = {
        "kdf": {
            "name": "scrypt",
            "params": {"N": _WRITE_N, "r": 8, "p": 1},
            "salt": base64.b64encode(salt).decode(),
        },
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(ciphertext).decode(),
    }
    return json.dumps(document, separators=(",", ":")).encode()


def is_pkcs8(der: bytes) -> bool:
    """True when ``der`` has the PKCS#8 PrivateKeyInfo shape: SEQUENCE { INTEGER, SEQUENCE (algorithm), ... }.

    cryptography's DER loader also accepts SEC1 and PKCS#1 structures; cosign (Go's ParsePKCS8PrivateKey)
    does not, so neither do we. SEC1 has an OCTET STRING where PKCS#8 has the algorithm SEQUENCE.
    """
    try:
        tag, body, length = der_header(der, 0)
        if tag != 0x30 or body + length != len(der):
            return False
        tag, version_at, version_len = der_header(der, body)
        if tag != 0x02:
            return False
        tag, _, _ = der_header(der, version_at + version_len)
    except ValueError:
        return False
    return tag == 0x30
