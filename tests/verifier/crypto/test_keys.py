"""verifier.crypto._keys: public keys, signature schemes and cosign encrypted key files
(_private/cosign_keyfile)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nacl.secret
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.x509.oid import NameOID

from verifier.base._errors import InputError
from verifier.crypto import _keyfile as cosign_keyfile
from verifier.crypto import _keys as keys
from verifier.crypto._keys import InvalidKey, PrivateKey, PublicKey, WrongPassword

# Passwords published with the fixtures (SOURCES.md §3.1).
FIXTURE_KEYS = [
    ("policy-controller-cosign", b"", "ENCRYPTED COSIGN PRIVATE KEY", 1 << 15),
    ("zarf-cosign", b"test", "ENCRYPTED SIGSTORE PRIVATE KEY", 1 << 16),
]


def _pem(label: str, body: bytes) -> bytes:
    text = base64.b64encode(body).decode()
    lines = "\n".join(text[i : i + 64] for i in range(0, len(text), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n".encode()


def _key_file_json(pem: bytes) -> Any:
    return json.loads(base64.b64decode(b"".join(pem.splitlines()[1:-1])))


# --- cosign key files ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "password", "label", "n"), FIXTURE_KEYS)
def test_fixture_key_files_load_and_match_their_public_keys(
    shared_fixtures: Path, name: str, password: bytes, label: str, n: int
) -> None:
    folder = shared_fixtures / "cosign" / "keys"
    data = (folder / f"{name}.key").read_bytes()
    assert data.startswith(f"-----BEGIN {label}-----".encode())
    assert _key_file_json(data)["kdf"]["params"]["N"] == n

    key = keys.load_private_key(data, password)
    public = PublicKey.from_pem((folder / f"{name}.pub").read_bytes())
    assert key.public_key() == public
    assert public.verify(key.sign(b"payload"), b"payload")
    assert not public.verify(key.sign(b"payload"), b"other payload")


@pytest.mark.parametrize(("name", "password", "label", "n"), FIXTURE_KEYS)
def test_fixture_key_files_refuse_a_wrong_password(
    shared_fixtures: Path, name: str, password: bytes, label: str, n: int
) -> None:
    data = (shared_fixtures / "cosign" / "keys" / f"{name}.key").read_bytes()
    with pytest.raises(WrongPassword) as raised:
        keys.load_private_key(data, b"wrongpassword")
    assert "wrong password" in raised.value.message
    assert "TRTGUARD_PASSWORD" in (raised.value.hint or "")


def test_generated_key_round_trips_through_the_cosign_format() -> None:
    key = keys.generate_private_key()
    assert key.public_key().algorithm == "ecdsa-secp256r1"
    pem = keys.encrypt_private_key(key, b"s3cret")

    lines = pem.decode().splitlines()
    assert lines[0] == "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"
    assert lines[-1] == "-----END ENCRYPTED SIGSTORE PRIVATE KEY-----"
    assert all(len(line) <= 64 for line in lines[1:-1])
    document = _key_file_json(pem)
    assert document["kdf"] == {
        "name": "scrypt",
        "params": {"N": 65536, "r": 8, "p": 1},
        "salt": document["kdf"]["salt"],
    }
    assert len(base64.b64decode(document["kdf"]["salt"])) == 32
    assert document["cipher"]["name"] == "nacl/secretbox"
    assert len(base64.b64decode(document["cipher"]["nonce"])) == 24
    # secretbox output = 16-byte Poly1305 tag + the PKCS#8 DER
    assert len(base64.b64decode(document["ciphertext"])) == len(key.to_pkcs8_der()) + 16

    loaded = keys.load_private_key(pem, b"s3cret")
    assert loaded.public_key() == key.public_key()
    with pytest.raises(WrongPassword):
        keys.load_private_key(pem, b"s3cret ")


def test_two_encryptions_use_fresh_salt_and_nonce() -> None:
    key = keys.generate_private_key()
    first = _key_file_json(keys.encrypt_private_key(key, b"pw"))
    second = _key_file_json(keys.encrypt_private_key(key, b"pw"))
    assert first["kdf"]["salt"] != second["kdf"]["salt"]
    assert first["cipher"]["nonce"] != second["cipher"]["nonce"]


def test_empty_password_is_a_password() -> None:
    key = keys.generate_private_key()
    pem = keys.encrypt_private_key(key, b"")
    assert keys.load_private_key(pem, b"").public_key() == key.public_key()
    with pytest.raises(WrongPassword):
        keys.load_private_key(pem, b"x")


def _rewrite(pem: bytes, change: Callable[[Any], object]) -> bytes:
    document = _key_file_json(pem)
    change(document)
    label = pem.decode().splitlines()[0].removeprefix("-----BEGIN ").removesuffix("-----")
    return _pem(label, json.dumps(document).encode())


@pytest.mark.parametrize(
    "params",
    [
        {"N": 1 << 20, "r": 8, "p": 1},
        {"N": 1 << 16, "r": 16, "p": 1},
        {"N": 1 << 16, "r": 8, "p": 4},
        {"N": 1 << 14, "r": 8, "p": 1},
        {"N": 1 << 16, "r": 8},
        {"N": 1 << 16, "r": 8, "p": 1, "x": 1},
    ],
)
def test_scrypt_parameters_outside_the_allow_list_are_refused_before_deriving(
    monkeypatch: pytest.MonkeyPatch, params: dict[str, int]
) -> None:
    pem = _rewrite(
        keys.encrypt_private_key(keys.generate_private_key(), b"pw"), lambda d: d["kdf"].update(params=params)
    )

    def no_scrypt(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("scrypt must not run for refused parameters")

    monkeypatch.setattr(hashlib, "scrypt", no_scrypt)
    with pytest.raises(InputError, match="scrypt parameters") as raised:
        keys.load_private_key(pem, b"pw")
    assert "N in {32768, 65536, 131072}" in (raised.value.hint or "")


def test_scrypt_n_2_17_is_accepted() -> None:
    key = keys.generate_private_key()
    salt, nonce = b"s" * 32, b"n" * 24
    box_key = hashlib.scrypt(b"pw", salt=salt, n=1 << 17, r=8, p=1, dklen=32, maxmem=256 * 1024 * 1024)
    ciphertext = nacl.secret.SecretBox(box_key).encrypt(key.to_pkcs8_der(), nonce).ciphertext
    document = {
        "kdf": {
            "name": "scrypt",
            "params": {"N": 1 << 17, "r": 8, "p": 1},
            "salt": base64.b64encode(salt).decode(),
        },
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(ciphertext).decode(),
    }
    pem = _pem("ENCRYPTED COSIGN PRIVATE KEY", json.dumps(document).encode())
    assert keys.load_private_key(pem, b"pw").public_key() == key.public_key()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["kdf"].update(name="argon2"), "unsupported key derivation"),
        (lambda d: d["cipher"].update(name="aes-gcm"), "unsupported cipher"),
        (lambda d: d["cipher"].update(nonce=base64.b64encode(b"short").decode()), "nonce is 5 bytes"),
        (lambda d: d.update(ciphertext="!!not base64!!"), "not valid base64"),
        (lambda d: d.pop("cipher"), "not the cosign JSON layout"),
        (lambda d: d["kdf"]["params"].update(N="65536"), "not the cosign JSON layout"),
    ],
)
def test_malformed_key_files_give_clear_errors(
    change: Callable[[dict[str, Any]], None], message: str
) -> None:
    pem = _rewrite(keys.encrypt_private_key(keys.generate_private_key(), b"pw"), change)
    with pytest.raises(InputError, match=message):
        keys.load_private_key(pem, b"pw")


def test_key_file_body_that_is_not_json_is_refused() -> None:
    with pytest.raises(InputError, match="not the cosign JSON layout"):
        keys.load_private_key(_pem("ENCRYPTED SIGSTORE PRIVATE KEY", b"\x00\x01binary"), b"pw")


def test_sec1_key_inside_the_box_is_refused_like_cosign() -> None:
    # cosign's own vector `pemcosigneckey` wraps SEC1 DER; Go's ParsePKCS8PrivateKey rejects it, so do we.
    ec_key = ec.generate_private_key(ec.SECP256R1())
    sec1 = ec_key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    assert sec1[:4] == b"\x30\x77\x02\x01"  # SEC1 ECPrivateKey: SEQUENCE { INTEGER 1, OCTET STRING ... }
    body = cosign_keyfile.encrypt(sec1, b"hello")
    with pytest.raises(InvalidKey, match="not PKCS#8") as raised:
        keys.load_private_key(_pem("ENCRYPTED COSIGN PRIVATE KEY", body), b"hello")
    assert "openssl pkcs8 -topk8" in (raised.value.hint or "")


def test_plain_pkcs8_pem_private_keys_load() -> None:
    for crypto_key in (ec.generate_private_key(ec.SECP384R1()), ed25519.Ed25519PrivateKey.generate()):
        pem = crypto_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        key = keys.load_private_key(pem, b"ignored")
        assert key.public_key().verify(key.sign(b"m"), b"m")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"", "no PEM private key block"),
        (b"just some text", "no PEM private key block"),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "not PKCS#8"),
        (
            b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
            "unsupported private key PEM",
        ),
    ],
)
def test_unusable_private_key_text(text: bytes, message: str) -> None:
    with pytest.raises(InvalidKey, match=message):
        keys.load_private_key(text, b"")


def test_sec1_pem_private_key_is_refused_with_a_conversion_hint() -> None:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    assert pem.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    with pytest.raises(InvalidKey) as raised:
        keys.load_private_key(pem, b"")
    assert "openssl pkcs8 -topk8" in (raised.value.hint or "")


# --- public keys and signature schemes ------------------------------------------------------------------


def _public_pem(private: PrivateKeyTypes) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@pytest.mark.parametrize(
    ("curve", "hash_type"),
    [(ec.SECP256R1(), hashes.SHA256), (ec.SECP384R1(), hashes.SHA384), (ec.SECP521R1(), hashes.SHA512)],
)
def test_ecdsa_hash_follows_the_curve(curve: ec.EllipticCurve, hash_type: type[hashes.HashAlgorithm]) -> None:
    private = ec.generate_private_key(curve)
    public = PublicKey.from_pem(_public_pem(private))
    assert public.verify(private.sign(b"data", ec.ECDSA(hash_type())), b"data")
    # SHA-256 as well, whatever the curve (sigstore-python and sigstore-go verify certificate keys so);
    # no other hash.
    assert public.verify(private.sign(b"data", ec.ECDSA(hashes.SHA256())), b"data")
    other = hashes.SHA512 if hash_type is not hashes.SHA512 else hashes.SHA384
    assert not public.verify(private.sign(b"data", ec.ECDSA(other())), b"data")
    assert PrivateKey(private).public_key() == public
    assert public.verify(PrivateKey(private).sign(b"data"), b"data")


def test_ed25519_keys() -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    public = PublicKey.from_pem(_public_pem(private))
    assert public.algorithm == "ed25519"
    assert public.verify(private.sign(b"data"), b"data")
    assert not public.verify(private.sign(b"data"), b"datA")
    assert not public.verify(b"short", b"data")


def test_rsa_pkcs1v15_and_pss_signatures_verify() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = PublicKey.from_pem(_public_pem(private))
    assert public.verify(private.sign(b"data", padding.PKCS1v15(), hashes.SHA256()), b"data")
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
    assert public.verify(private.sign(b"data", pss, hashes.SHA256()), b"data")
    assert not public.verify(private.sign(b"data", padding.PKCS1v15(), hashes.SHA384()), b"data")
    # trtguard signs RSA with PKCS#1 v1.5 / SHA-256, as cosign does
    signature = PrivateKey(private).sign(b"data")
    private.public_key().verify(signature, b"data", padding.PKCS1v15(), hashes.SHA256())


def test_weak_or_unsupported_keys_are_refused() -> None:
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # noqa: S505  # the weak key under test
    with pytest.raises(InvalidKey, match="1024 bits is too small"):
        PublicKey.from_pem(_public_pem(weak))
    with pytest.raises(InvalidKey, match="unsupported elliptic curve secp256k1"):
        PublicKey.from_pem(_public_pem(ec.generate_private_key(ec.SECP256K1())))
    with pytest.raises(InvalidKey, match="unsupported public key type"):
        PublicKey.from_pem(_public_pem(ed448.Ed448PrivateKey.generate()))


def test_garbage_signatures_do_not_raise() -> None:
    public = keys.generate_private_key().public_key()
    for signature in (b"", b"\x30\x00", b"\xff" * 72, b"not a signature"):
        assert public.verify(signature, b"data") is False


def test_key_id_is_the_sha256_of_the_spki_der(shared_fixtures: Path) -> None:
    pem = (shared_fixtures / "cosign" / "containers-image" / "cosign.pub").read_bytes()
    der = base64.b64decode(b"".join(pem.splitlines()[1:-1]))
    public = PublicKey.from_pem(pem)
    assert public.key_id == hashlib.sha256(der).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", public.key_id)
    assert public.to_der() == der
    assert PublicKey.from_pem(public.to_pem()) == public


def test_key_id_matches_the_sigstore_bundle_hint(shared_fixtures: Path) -> None:
    # cosign/sigstore-go managed-key bundles hint base64(sha256(SPKI DER)): the same bytes as our key id.
    folder = shared_fixtures / "cosign" / "bundles" / "conformance" / "managed-key-happy-path"
    public = PublicKey.from_pem((folder / "key.pub").read_bytes())
    hint = json.loads((folder / "bundle.sigstore.json").read_text())["verificationMaterial"]["publicKey"][
        "hint"
    ]
    assert base64.b64decode(hint).hex() == public.key_id


def test_text_before_the_pem_block_is_skipped(shared_fixtures: Path) -> None:
    path = shared_fixtures / "model-signing" / "keys" / "signing-key-pub.pem"
    assert path.read_bytes().startswith(b"Public Key Information:")
    public = PublicKey.from_pem(path.read_bytes())
    assert public.algorithm == "ecdsa-secp384r1"


def test_public_key_block_after_other_blocks(shared_fixtures: Path) -> None:
    certificate = (shared_fixtures / "cosign" / "containers-image" / "raw" / "rekor-cert.pem").read_bytes()
    pem = (shared_fixtures / "cosign" / "containers-image" / "cosign.pub").read_bytes()
    assert PublicKey.from_pem(certificate + pem) == PublicKey.from_pem(pem)
    assert PublicKey.from_pem(pem.decode()) == PublicKey.from_pem(pem)


def test_malformed_public_key_gives_a_parse_error(shared_fixtures: Path) -> None:
    path = shared_fixtures / "cosign" / "bundles" / "conformance" / "managed-key-wrong-key_fail" / "key.pub"
    with pytest.raises(InvalidKey, match="does not parse") as raised:
        PublicKey.from_pem(path.read_bytes())
    assert raised.value.exit_code == 2


def test_public_key_block_search_is_linear() -> None:
    # A PEM from a Rekor entry body is read before any log signature is checked. A lazy BEGIN…END pattern
    # rescanned the rest of the text for each unterminated BEGIN: 8000 of them took about 15 s.
    key = keys.generate_private_key().public_key()
    started = time.thread_time()  # CPU time: the work, not what a loaded machine gives to others
    with pytest.raises(InvalidKey, match="BEGIN PUBLIC KEY"):
        PublicKey.from_pem(b"-----BEGIN PUBLIC KEY-----" * 8000)
    assert time.thread_time() - started < 1
    # The first complete block still counts, after unterminated blocks of the other label.
    assert PublicKey.from_pem(b"-----BEGIN RSA PUBLIC KEY-----\n" * 3 + key.to_pem()) == key


def test_certificate_keys_of_unknown_algorithms_are_invalid_keys() -> None:
    # A certificate from a signature is read before its chain is checked: cryptography raises
    # UnsupportedAlgorithm (or ValueError) for keys it cannot load.
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "signer")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + timedelta(minutes=10))
        .sign(private, hashes.SHA256())
    )
    assert PublicKey.from_certificate(certificate) == PublicKey.from_crypto(private.public_key())
    der = certificate.public_bytes(serialization.Encoding.DER)
    unknown = der.replace(bytes.fromhex("06072a8648ce3d0201"), bytes.fromhex("06072a8648ce3d0209"))
    with pytest.raises(InvalidKey, match="the certificate's public key is unusable"):
        PublicKey.from_certificate(x509.load_der_x509_certificate(unknown))


def test_text_without_a_public_key_block() -> None:
    with pytest.raises(InvalidKey, match="BEGIN PUBLIC KEY"):
        PublicKey.from_pem("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")


def test_verify_digest_for_prehashed_messages() -> None:
    message = b"artifact bytes"
    digest = hashlib.sha256(message).digest()
    ec_key = keys.generate_private_key()
    assert ec_key.public_key().verify_digest(ec_key.sign(message), digest, hashes.SHA256())
    assert not ec_key.public_key().verify_digest(ec_key.sign(message), digest, hashes.SHA384())
    # A P-384 key over a SHA-256 digest (a P-384 signing certificate; issue 25): sigstore-python accepts it.
    p384 = ec.generate_private_key(ec.SECP384R1())
    public = PublicKey.from_pem(_public_pem(p384))
    signed = p384.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
    assert public.verify_digest(signed, digest, hashes.SHA256())
    assert not public.verify_digest(signed, hashlib.sha256(b"x").digest(), hashes.SHA256())
    assert not public.verify_digest(signed, digest[:31], hashes.SHA256())
    assert not public.verify_digest(signed, digest + bytes(16), hashes.SHA384())
    sha384 = hashlib.sha384(message).digest()
    assert public.verify_digest(
        p384.sign(sha384, ec.ECDSA(Prehashed(hashes.SHA384()))), sha384, hashes.SHA384()
    )
    assert not ec_key.public_key().verify_digest(ec_key.sign(b"other"), digest, hashes.SHA256())

    rsa_key = PrivateKey(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    assert rsa_key.public_key().verify_digest(rsa_key.sign(message), digest, hashes.SHA256())

    ed_key = PrivateKey(ed25519.Ed25519PrivateKey.generate())
    assert not ed_key.public_key().verify_digest(ed_key.sign(message), digest, hashes.SHA256())


def test_public_keys_compare_by_key_id() -> None:
    key = keys.generate_private_key()
    assert key.public_key() == PublicKey.from_pem(key.public_key().to_pem())
    assert key.public_key() != keys.generate_private_key().public_key()
    assert len({key.public_key(), PublicKey.from_der(key.public_key().to_der())}) == 1
    assert key.public_key().key_id[:16] in repr(key)


def test_unencrypted_pkcs8_round_trip(tmp_path: Path) -> None:
    key = keys.generate_private_key()
    pem = _pem("PRIVATE KEY", key.to_pkcs8_der())
    assert keys.load_private_key(pem, b"").public_key() == key.public_key()


# --- cosign's own key vectors (tests/data/cosign-test-vectors, SOURCES.md) ------------------------------

COSIGN_KEYS = Path(__file__).resolve().parents[2] / "data" / "cosign-test-vectors"


@pytest.mark.parametrize(
    ("name", "algorithm"),
    [
        ("validrsa", "rsa-2048"),
        ("validrsapkcs1", "rsa-2048"),
        ("validrsapkcs8", "rsa-2048"),
        ("validecp256", "ecdsa-secp256r1"),
        ("validecp384", "ecdsa-secp384r1"),
        ("validecp521", "ecdsa-secp521r1"),
        ("validecpkcs8", "ecdsa-secp256r1"),
        ("ed25519key", "ed25519"),
    ],
)
def test_keys_cosign_imports_are_accepted(name: str, algorithm: str) -> None:
    private = serialization.load_pem_private_key((COSIGN_KEYS / "keys" / f"{name}.pem").read_bytes(), None)
    public = PublicKey.from_pem(_public_pem(private))
    assert public.algorithm == algorithm


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("invalidrsasmallkey", "RSA key of 1024 bits is too small"),
        # cosign (cryptoutils.ValidatePubKey) accepts RSA moduli of 2048, 3072 and 4096 bits only.
        ("invalidrsalargekey", "RSA key of 5120 bits is too large"),
        ("invalidecp224", "unsupported elliptic curve secp224r1"),
    ],
)
def test_keys_cosign_refuses_are_refused(name: str, reason: str) -> None:
    private = serialization.load_pem_private_key((COSIGN_KEYS / "keys" / f"{name}.pem").read_bytes(), None)
    with pytest.raises(InvalidKey, match=reason):
        PublicKey.from_pem(_public_pem(private))
    with pytest.raises(InvalidKey, match=reason):
        PrivateKey(private)  # type: ignore[arg-type]  # the loaded key is one of the supported types


def test_rsa_sizes_between_the_allowed_ones_are_refused() -> None:
    odd = rsa.generate_private_key(public_exponent=65537, key_size=2560)
    with pytest.raises(InvalidKey, match="RSA key of 2560 bits is not a size cosign accepts"):
        PublicKey.from_pem(_public_pem(odd))


def test_cosign_encrypted_key_vectors_open_with_their_password() -> None:
    for name in ("pemcosignkey", "pemsigstorekey"):
        key = keys.load_private_key((COSIGN_KEYS / "keys" / f"{name}.pem").read_bytes(), b"hello")
        assert key.public_key().verify(key.sign(b"data"), b"data")
    with pytest.raises(WrongPassword):
        keys.load_private_key((COSIGN_KEYS / "keys" / "pemsigstorekey.pem").read_bytes(), b"wrong")
    # An EC key stored as SEC1 inside the box: cosign's LoadPrivateKey refuses it ("use ParseECPrivateKey").
    with pytest.raises(InvalidKey, match="not PKCS#8"):
        keys.load_private_key((COSIGN_KEYS / "keys" / "pemcosigneckey.pem").read_bytes(), b"hello")


def test_pkcs1_rsa_public_key_pem_is_read_as_cryptoutils_reads_it() -> None:
    pkcs1 = PublicKey.from_pem((COSIGN_KEYS / "public-keys" / "rsa").read_bytes())
    assert pkcs1.algorithm == "rsa-4096"
    # The same key, whichever PEM form: one key id (SubjectPublicKeyInfo DER).
    assert PublicKey.from_pem(pkcs1.to_pem()) == pkcs1
    assert PublicKey.from_pem((COSIGN_KEYS / "public-keys" / "google").read_bytes()).algorithm == "rsa-4096"
    with pytest.raises(InvalidKey, match="no '-----BEGIN PUBLIC KEY-----'"):
        PublicKey.from_pem((COSIGN_KEYS / "public-keys" / "garbage-there-are-limits").read_bytes())


def test_pkcs1_rsa_public_key_verifies_signatures() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
    assert pem.startswith(b"-----BEGIN RSA PUBLIC KEY-----")
    public = PublicKey.from_pem(pem)
    assert public.verify(PrivateKey(private).sign(b"data"), b"data")
    assert public.algorithm == "rsa-3072"
