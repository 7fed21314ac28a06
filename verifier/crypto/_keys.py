"""Public and private keys: PEM public keys, cosign encrypted key files, key generation.

Key and signature rules follow cosign (sigstore ``cryptoutils.ValidatePubKey``): ECDSA on P-256, P-384 or
P-521 with the hash chosen by the curve, or SHA-256 (what sigstore-python and sigstore-go verify a signing
certificate's key with, whatever its curve: a P-384 Fulcio certificate signs SHA-256 digests), and an ASN.1
DER signature; Ed25519; RSA with a 2048-, 3072- or
4096-bit modulus, PKCS#1 v1.5 with SHA-256. Public keys are read from ``PUBLIC KEY`` (SubjectPublicKeyInfo)
or ``RSA PUBLIC KEY`` (PKCS#1) PEM blocks, as cryptoutils reads them. One difference: RSA-PSS signatures
(SHA-256) are also accepted when verifying, where cosign accepts PKCS#1 v1.5 only. A key's id is the
lower-case hex SHA-256 of its SubjectPublicKeyInfo DER.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import TYPE_CHECKING, Any, Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from verifier.base import InputError

if TYPE_CHECKING:
    # X.509 and the cosign key-file format (nacl, scrypt) load when a certificate or a private key is read:
    # checking with public keys needs neither (start-up time, issue 15).
    from cryptography import x509

    from verifier.crypto._keyfile import WrongPassword

__all__ = [
    "InvalidKey",
    "PrivateKey",
    "PublicKey",
    "WrongPassword",
    "encrypt_private_key",
    "generate_private_key",
    "load_private_key",
]

_PublicCrypto = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey
_PrivateCrypto = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey

_CURVE_HASHES: Final[dict[str, type[hashes.HashAlgorithm]]] = {
    "secp256r1": hashes.SHA256,
    "secp384r1": hashes.SHA384,
    "secp521r1": hashes.SHA512,
}
_RSA_SIZES: Final = (2048, 3072, 4096)
_PEM_BLOCK = re.compile(
    rb"-----BEGIN (?P<label>[A-Z0-9 ]+)-----\r?\n(?P<body>[A-Za-z0-9+/=\s]*?)-----END (?P=label)-----"
)
_PUBLIC_KEY_BEGIN = re.compile(rb"-----BEGIN ((?:RSA )?PUBLIC KEY)-----")
_PLAIN_PKCS8_LABEL: Final = "PRIVATE KEY"


def _ecdsa_hashes(curve: ec.EllipticCurve) -> tuple[hashes.HashAlgorithm, ...]:
    """The hashes an ECDSA signature by a key on ``curve`` may be over: the curve's own, then SHA-256.

    Accepting both is safe: each is collision-resistant, and a signature over one hash's value cannot pass
    as a signature over another's without a preimage (the value is the message's hash, computed here).
    """
    own = _hash_for_curve(curve)
    return (own,) if own.name == "sha256" else (own, hashes.SHA256())


def _verify_ecdsa(
    key: ec.EllipticCurvePublicKey, signature: bytes, data: bytes, algorithm: hashes.HashAlgorithm | Prehashed
) -> bool:
    try:
        key.verify(signature, data, ec.ECDSA(algorithm))
    except InvalidSignature:
        return False
    return True


class InvalidKey(InputError):
    """A key file or key text that cannot be used: malformed, unsupported algorithm, weak parameters."""


def _hash_for_curve(curve: ec.EllipticCurve) -> hashes.HashAlgorithm:
    hash_type = _CURVE_HASHES.get(curve.name)
    if hash_type is None:
        raise InvalidKey(
            f"unsupported elliptic curve {curve.name}",
            hint="use an ECDSA key on P-256, P-384 or P-521, an Ed25519 key or an RSA key",
        )
    return hash_type()


def _verify_rsa(
    key: rsa.RSAPublicKey,
    signature: bytes,
    data: bytes,
    hash_algorithm: hashes.HashAlgorithm,
    *,
    prehashed: bool,
) -> bool:
    """PKCS#1 v1.5 (cosign's RSA scheme), then RSA-PSS with the salt length read from the signature."""
    algorithm: hashes.HashAlgorithm | Prehashed = Prehashed(hash_algorithm) if prehashed else hash_algorithm
    schemes = (
        padding.PKCS1v15(),
        padding.PSS(mgf=padding.MGF1(hash_algorithm), salt_length=padding.PSS.AUTO),
    )
    for scheme in schemes:
        try:
            key.verify(signature, data, scheme, algorithm)
        except InvalidSignature:
            continue
        return True
    return False


def _public_key_block(raw: bytes) -> bytes | None:
    """The first complete ``PUBLIC KEY`` or ``RSA PUBLIC KEY`` PEM block in ``raw``.

    Linear in the input: a lazy ``BEGIN.*?END`` pattern rescans to the end for every unterminated BEGIN, which
    made a Rekor entry body of repeated BEGIN lines cost minutes. A label whose END is missing after one
    BEGIN is missing after every later one, so each label is searched for at most once in vain.
    """
    unterminated: set[bytes] = set()
    for begin in _PUBLIC_KEY_BEGIN.finditer(raw):
        label = begin[1]
        if label in unterminated:
            continue
        end_marker = b"-----END " + label + b"-----"
        end = raw.find(end_marker, begin.end())
        if end < 0:
            unterminated.add(label)
            continue
        return raw[begin.start() : end + len(end_marker)]
    return None


def _check_supported(key: _PublicCrypto) -> str:
    """The scheme name of ``key``; raises :class:`InvalidKey` for curves and sizes we do not accept."""
    if isinstance(key, ec.EllipticCurvePublicKey):
        _hash_for_curve(key.curve)
        return f"ecdsa-{key.curve.name}"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "ed25519"
    # cosign measures the modulus in whole bytes (Go's rsa.PublicKey.Size), so a 2047-bit modulus is 2048.
    size = (key.key_size + 7) // 8 * 8
    if size not in _RSA_SIZES:
        verdict = (
            "too small"
            if size < _RSA_SIZES[0]
            else "too large"
            if size > _RSA_SIZES[-1]
            else "not a size cosign accepts"
        )
        raise InvalidKey(
            f"RSA key of {key.key_size} bits is {verdict} (cosign accepts 2048, 3072 or 4096 bits)",
            hint="use an RSA key of 2048, 3072 or 4096 bits",
        )
    return f"rsa-{size}"


class PublicKey:
    """A verification key: ECDSA (P-256/384/521), Ed25519 or RSA."""

    __slots__ = ("_key", "algorithm", "key_id")

    def __init__(self, key: _PublicCrypto) -> None:
        if not isinstance(key, ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey):
            raise InvalidKey(
                f"unsupported public key type {type(key).__name__}",
                hint="use an ECDSA (P-256, P-384, P-521), Ed25519 or RSA key",
            )
        self._key = key
        #: Scheme name, e.g. ``ecdsa-secp256r1``, ``ed25519``, ``rsa-3072``.
        self.algorithm: str = _check_supported(key)
        #: Lower-case hex SHA-256 of the SubjectPublicKeyInfo DER.
        self.key_id: str = hashlib.sha256(self.to_der()).hexdigest()

    @classmethod
    def from_pem(cls, data: bytes | str) -> PublicKey:
        """Load a ``PUBLIC KEY`` (SubjectPublicKeyInfo) or ``RSA PUBLIC KEY`` (PKCS#1) PEM block; text before
        the block is skipped."""
        raw = data.encode() if isinstance(data, str) else data
        # Only a public key block: cryptography would read the first block of any kind.
        block = _public_key_block(raw)
        if block is None:
            raise InvalidKey(
                "no '-----BEGIN PUBLIC KEY-----' (or 'RSA PUBLIC KEY') block found",
                hint="give a PEM public key, e.g. the .pub file written by `trtguard keygen` or cosign",
            )
        try:
            key = serialization.load_pem_public_key(block)
        except (ValueError, UnsupportedAlgorithm) as error:
            raise InvalidKey(
                "the public key PEM block does not parse",
                hint="the key text is damaged or truncated; copy the .pub file again",
            ) from error
        return cls(key)  # type: ignore[arg-type]  # other key types are refused in __init__

    @classmethod
    def from_der(cls, data: bytes) -> PublicKey:
        """Load a SubjectPublicKeyInfo (or PKCS#1 RSA) DER key."""
        try:
            key = serialization.load_der_public_key(data)
        except (ValueError, UnsupportedAlgorithm) as error:
            raise InvalidKey("the public key DER does not parse") from error
        return cls(key)  # type: ignore[arg-type]  # other key types are refused in __init__

    @classmethod
    def from_certificate(cls, certificate: x509.Certificate) -> PublicKey:
        """The key ``certificate`` certifies; :class:`InvalidKey` when it is malformed or of an unsupported
        algorithm (a certificate from a signature is untrusted input until its chain is checked)."""
        try:
            key = certificate.public_key()
        except (ValueError, UnsupportedAlgorithm) as error:
            raise InvalidKey(f"the certificate's public key is unusable ({error})") from error
        return cls(key)  # type: ignore[arg-type]  # other key types are refused in __init__

    @classmethod
    def from_crypto(cls, key: object) -> PublicKey:
        """Wrap a ``cryptography`` public key object (from a certificate, for instance)."""
        return cls(key)  # type: ignore[arg-type]  # checked in __init__

    @property
    def crypto(self) -> _PublicCrypto:
        """The ``cryptography`` key object, for code that needs the key's own parameters."""
        return self._key

    @property
    def hash_algorithm(self) -> hashes.HashAlgorithm | None:
        """The hash the signature scheme uses over the data; ``None`` for Ed25519 (no pre-hash)."""
        if isinstance(self._key, ec.EllipticCurvePublicKey):
            return _hash_for_curve(self._key.curve)
        if isinstance(self._key, rsa.RSAPublicKey):
            return hashes.SHA256()
        return None

    def to_der(self) -> bytes:
        """SubjectPublicKeyInfo DER."""
        return self._key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def to_pem(self) -> bytes:
        """``-----BEGIN PUBLIC KEY-----`` PEM (SubjectPublicKeyInfo)."""
        return self._key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def verify(self, signature: bytes, data: bytes) -> bool:
        """True when ``signature`` is a valid signature by this key over ``data``."""
        key = self._key
        if isinstance(key, ec.EllipticCurvePublicKey):
            return any(_verify_ecdsa(key, signature, data, own) for own in _ecdsa_hashes(key.curve))
        try:
            if isinstance(key, ed25519.Ed25519PublicKey):
                key.verify(signature, data)
            else:
                return _verify_rsa(key, signature, data, hashes.SHA256(), prehashed=False)
        except InvalidSignature:
            return False
        return True

    def verify_digest(self, signature: bytes, digest: bytes, algorithm: hashes.HashAlgorithm) -> bool:
        """True when ``signature`` signs the pre-computed ``digest`` (ECDSA and RSA only).

        ``algorithm`` must be the scheme's own hash (see :attr:`hash_algorithm`); Ed25519 signs the message
        itself and cannot be checked against a digest, so it always answers False.
        """
        key = self._key
        if isinstance(key, ec.EllipticCurvePublicKey):
            own = next((h for h in _ecdsa_hashes(key.curve) if h.name == algorithm.name), None)
            if own is None or len(digest) != own.digest_size:
                return False
            return _verify_ecdsa(key, signature, digest, Prehashed(own))
        own = self.hash_algorithm
        if own is None or own.name != algorithm.name or len(digest) != own.digest_size:
            return False
        if isinstance(key, rsa.RSAPublicKey):
            return _verify_rsa(key, signature, digest, own, prehashed=True)
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublicKey) and other.key_id == self.key_id

    def __hash__(self) -> int:
        return hash(self.key_id)

    def __repr__(self) -> str:
        return f"PublicKey({self.algorithm}, key_id={self.key_id[:16]}…)"


class PrivateKey:
    """A signing key: ECDSA (P-256/384/521), Ed25519 or RSA (PKCS#1 v1.5, SHA-256)."""

    __slots__ = ("_key", "_public")

    def __init__(self, key: _PrivateCrypto) -> None:
        if not isinstance(key, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey):
            raise InvalidKey(
                f"unsupported private key type {type(key).__name__}",
                hint="use an ECDSA (P-256, P-384, P-521), Ed25519 or RSA key",
            )
        self._key = key
        self._public = PublicKey(key.public_key())

    def sign(self, data: bytes) -> bytes:
        """Sign ``data`` with the key's scheme (ECDSA signatures are ASN.1 DER)."""
        key = self._key
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return key.sign(data, ec.ECDSA(_hash_for_curve(key.curve)))
        if isinstance(key, ed25519.Ed25519PrivateKey):
            return key.sign(data)
        return key.sign(data, padding.PKCS1v15(), hashes.SHA256())

    def public_key(self) -> PublicKey:
        """The matching public key."""
        return self._public

    @property
    def crypto(self) -> _PrivateCrypto:
        """The ``cryptography`` key object, for signature schemes :meth:`sign` does not make (Notary PSS)."""
        return self._key

    def to_pkcs8_der(self) -> bytes:
        """The unencrypted PKCS#8 DER form (what cosign's key file encrypts)."""
        return self._key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def __repr__(self) -> str:
        return f"PrivateKey({self._public.algorithm}, key_id={self._public.key_id[:16]}…)"


def generate_private_key() -> PrivateKey:
    """A new ECDSA P-256 key (cosign's default)."""
    return PrivateKey(ec.generate_private_key(ec.SECP256R1()))


def _pem_block(data: bytes) -> tuple[str, bytes]:
    match = _PEM_BLOCK.search(data)
    if match is None:
        raise InvalidKey(
            "no PEM private key block found",
            hint="give a cosign key file (ENCRYPTED SIGSTORE PRIVATE KEY) or a PKCS#8 PEM private key",
        )
    try:
        body = base64.b64decode(b"".join(match["body"].split()), validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidKey("the PEM block body is not valid base64") from error
    return match["label"].decode(), body


def __getattr__(name: str) -> Any:
    if name == "WrongPassword":  # re-exported, loaded on first use (see TYPE_CHECKING above)
        from verifier.crypto._keyfile import WrongPassword  # noqa: PLC0415

        return WrongPassword
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _from_pkcs8(der: bytes) -> PrivateKey:
    from verifier.crypto import _keyfile as cosign_keyfile  # noqa: PLC0415 - see TYPE_CHECKING above

    if not cosign_keyfile.is_pkcs8(der):
        raise InvalidKey(
            "the private key is not PKCS#8 (SEC1 or PKCS#1 structures are refused, as cosign does)",
            hint="convert it with `openssl pkcs8 -topk8 -nocrypt`",
        )
    try:
        key = serialization.load_der_private_key(der, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise InvalidKey("the PKCS#8 private key does not parse") from error
    return PrivateKey(key)  # type: ignore[arg-type]  # other key types are refused in __init__


def load_private_key(data: bytes, password: bytes) -> PrivateKey:
    """Load a cosign encrypted key file (either PEM label) or an unencrypted PKCS#8 PEM private key.

    ``password`` is ignored for unencrypted keys. Raises :class:`WrongPassword` when the password does not
    open the file and :class:`InvalidKey` (or another :class:`InputError`) for anything malformed.
    """
    from verifier.crypto import _keyfile as cosign_keyfile  # noqa: PLC0415 - see TYPE_CHECKING above

    label, body = _pem_block(data)
    if label in cosign_keyfile.LABELS:
        return _from_pkcs8(cosign_keyfile.decrypt(body, password))
    if label == _PLAIN_PKCS8_LABEL:
        return _from_pkcs8(body)
    raise InvalidKey(
        f"unsupported private key PEM label {label!r}",
        hint=(
            "expected 'ENCRYPTED SIGSTORE PRIVATE KEY', 'ENCRYPTED COSIGN PRIVATE KEY' or 'PRIVATE KEY' "
            "(PKCS#8); convert other formats with `openssl pkcs8 -topk8 -nocrypt`"
        ),
    )


def encrypt_private_key(key: PrivateKey, password: bytes) -> bytes:
    """The cosign key file (``ENCRYPTED SIGSTORE PRIVATE KEY``, scrypt N=2^16, r=8, p=1) for ``key``."""
    from verifier.crypto import _keyfile as cosign_keyfile  # noqa: PLC0415 - see TYPE_CHECKING above

    body = base64.b64encode(cosign_keyfile.encrypt(key.to_pkcs8_der(), password)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    label = cosign_keyfile.SIGSTORE_LABEL
    return (f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n").encode()
