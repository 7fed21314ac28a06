"""OpenPGP detached signatures made by the real gpg (Debian's GnuPG), and each way OpenPGP verifiers go wrong
(issue 19): ``gpg --verify`` exits 0 for several of the signatures that must fail here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.gpg import ALGORITHMS, GnuPG
from tests.support.openpgp_packets import ed25519_secret, issuer_subpackets, sign_detached
from verifier.base._errors import InputError, VerificationError
from verifier.signatures._openpgp import OpenPGPKey, check_signatures, read_signatures, verify_detached

T0 = datetime(2024, 1, 1, tzinfo=UTC)
HOUR, DAY = timedelta(hours=1), timedelta(days=1)
DATA = b'{"_type": "https://in-toto.io/Statement/v1"}\n'


def _key(gnupg: GnuPG, fingerprint: str) -> dict[str, OpenPGPKey]:
    return {"team/release": OpenPGPKey.from_armored(gnupg.export(fingerprint))}


def _gpg_says(gnupg: GnuPG, tmp_path: Path, signature: bytes) -> tuple[int, set[str]]:
    data = tmp_path / "data.json"
    data.write_bytes(DATA)
    code, status = gnupg.verify(signature, data, at=datetime.now(UTC))
    return code, {line.split()[1] for line in status.splitlines() if line.startswith("[GNUPG:] ")}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_gpg_detached_signatures_verify(gnupg: GnuPG, algorithm: str) -> None:
    key = gnupg.generate(f"{algorithm} <{algorithm}@example.com>", algorithm, at=T0)
    signature = gnupg.sign(DATA, key, at=T0 + HOUR)
    assert verify_detached(DATA, signature, _key(gnupg, key)) == ("team/release",)
    with pytest.raises(VerificationError, match="not a valid signature over these bytes"):
        verify_detached(DATA.replace(b"Statement", b"Statemant"), signature, _key(gnupg, key))


def test_a_signature_by_another_key_fails(gnupg: GnuPG) -> None:
    signer = gnupg.generate("signer <signer@example.com>", "ed25519", at=T0)
    other = gnupg.generate("other <other@example.com>", "ed25519", at=T0)
    with pytest.raises(VerificationError, match=f"by {signer}"):
        verify_detached(DATA, gnupg.sign(DATA, signer, at=T0 + HOUR), _key(gnupg, other))


def test_a_signature_made_while_a_since_expired_key_was_valid_verifies(gnupg: GnuPG) -> None:
    key = gnupg.generate("expiring <expiring@example.com>", "ed25519", at=T0, expires="1d")
    signature = gnupg.sign(DATA, key, at=T0 + HOUR)
    assert verify_detached(DATA, signature, _key(gnupg, key)) == ("team/release",)


def test_a_signature_made_after_the_key_expired_fails_though_gpg_exits_0(
    gnupg: GnuPG, tmp_path: Path
) -> None:
    key = gnupg.generate("late <late@example.com>", "ed25519", at=T0)
    signature = gnupg.sign(DATA, key, at=T0 + 2 * DAY)
    gnupg.set_expiry(key, T0 + DAY, at=T0 + 2 * HOUR)  # the binding in force at T0+2d says: expired at T0+1d
    code, status = _gpg_says(gnupg, tmp_path, signature)
    assert code == 0
    assert {"EXPKEYSIG", "VALIDSIG"} <= status
    with pytest.raises(VerificationError, match="expired"):
        verify_detached(DATA, signature, _key(gnupg, key))


@pytest.mark.parametrize(("reason", "what"), [(0, "no reason given"), (1, "key compromised")])
def test_a_hard_revocation_invalidates_every_signature_though_gpg_exits_0(
    gnupg: GnuPG, tmp_path: Path, reason: int, what: str
) -> None:
    key = gnupg.generate(f"{reason} <hard{reason}@example.com>", "ed25519", at=T0)
    before = gnupg.sign(DATA, key, at=T0 + HOUR)
    gnupg.revoke(key, at=T0 + DAY, reason=reason)
    code, status = _gpg_says(gnupg, tmp_path, before)
    assert code == 0
    assert {"REVKEYSIG", "VALIDSIG"} <= status
    with pytest.raises(VerificationError, match="revoked"):
        verify_detached(DATA, before, _key(gnupg, key))


@pytest.mark.parametrize(("reason", "what"), [(2, "superseded"), (3, "no longer used")])
def test_a_soft_revocation_cuts_off_only_later_signatures(gnupg: GnuPG, reason: int, what: str) -> None:
    key = gnupg.generate(f"{reason} <soft{reason}@example.com>", "ed25519", at=T0)
    before, after = gnupg.sign(DATA, key, at=T0 + HOUR), gnupg.sign(DATA, key, at=T0 + 2 * DAY)
    gnupg.revoke(key, at=T0 + DAY, reason=reason)
    assert verify_detached(DATA, before, _key(gnupg, key)) == ("team/release",)
    with pytest.raises(VerificationError, match="revoked"):
        verify_detached(DATA, after, _key(gnupg, key))


def test_sha1_signatures_fail_though_gpg_accepts_them(gnupg: GnuPG, tmp_path: Path) -> None:
    key = gnupg.generate("sha1 <sha1@example.com>", "rsa3072", at=T0)
    signature = gnupg.sign(DATA, key, at=T0 + HOUR, digest="SHA1")
    code, status = _gpg_says(gnupg, tmp_path, signature)
    assert code == 0
    assert "GOODSIG" in status
    with pytest.raises(VerificationError, match="SHA-1"):
        verify_detached(DATA, signature, _key(gnupg, key))


def test_a_signing_subkey_under_a_certify_only_primary_counts_until_revoked(gnupg: GnuPG) -> None:
    primary = gnupg.generate("subkey <subkey@example.com>", "ed25519", at=T0, usage="cert")
    subkey = gnupg.add_subkey(primary, "ed25519", at=T0)
    before, after = gnupg.sign(DATA, subkey, at=T0 + HOUR), gnupg.sign(DATA, subkey, at=T0 + 2 * DAY)
    assert verify_detached(DATA, before, _key(gnupg, primary)) == ("team/release",)
    gnupg.revoke_subkey(primary, 1, at=T0 + DAY, reason=1)  # compromised
    with pytest.raises(VerificationError):
        verify_detached(DATA, after, _key(gnupg, primary))
    with pytest.raises(VerificationError):
        verify_detached(DATA, before, _key(gnupg, primary))


def test_text_mode_signatures_are_refused_since_they_hold_under_crlf(gnupg: GnuPG, tmp_path: Path) -> None:
    key = gnupg.generate("text <text@example.com>", "ed25519", at=T0)
    signature = gnupg.sign(DATA, key, at=T0 + HOUR, textmode=True)
    crlf = tmp_path / "crlf.json"
    crlf.write_bytes(DATA.replace(b"\n", b"\r\n"))
    assert gnupg.verify(signature, crlf, at=datetime.now(UTC))[0] == 0  # other bytes, same signature
    for data in (DATA, crlf.read_bytes()):
        with pytest.raises(VerificationError, match="not a binary signature over the exact bytes"):
            verify_detached(data, signature, _key(gnupg, key))


def test_a_key_entry_holds_one_public_certificate(gnupg: GnuPG) -> None:
    one = gnupg.generate("one <one@example.com>", "ed25519", at=T0)
    two = gnupg.generate("two <two@example.com>", "ed25519", at=T0)
    with pytest.raises(InputError, match="exactly one certificate, not 2"):
        OpenPGPKey.from_armored(gnupg.export(one) + gnupg.export(two))
    secret = gnupg.run("--armor", "--export-secret-keys", one, at=T0).stdout
    with pytest.raises(InputError, match="secret key material"):
        OpenPGPKey.from_armored(secret)
    with pytest.raises(InputError, match="not an OpenPGP public key"):
        OpenPGPKey.from_armored(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")


def _body_offset(packet: bytes | bytearray) -> int:
    # a new-format (0xC0) or old-format (0x80) header with a one- or two-octet length (gpg's signatures)
    if packet[0] & 0x40:
        return 2 if packet[1] < 192 else 3
    return 1 + {0: 1, 1: 2, 2: 4}[packet[0] & 0x03]


@pytest.mark.parametrize(
    ("offset", "value", "message"),
    [(1, 0x04, "Unknown signature type"), (2, 23, None), (3, 0, None)],
)
def test_signature_fields_sequoia_cannot_name_are_a_refusal_not_a_crash(
    gnupg: GnuPG, offset: int, value: int, message: str | None
) -> None:
    # Found by tests/verifier/test_hostile_evidence.py: a signature type, public-key or hash algorithm
    # Sequoia does not know raised RuntimeError from the attribute read (a traceback, issue 24 item 11).
    key = gnupg.generate("odd <odd@example.com>", "ed25519", at=T0)
    signature = bytearray(gnupg.sign(DATA, key, at=T0 + HOUR, armor=False))
    signature[_body_offset(signature) + offset] = value
    with pytest.raises(VerificationError, match=message or "is not a valid signature over these bytes"):
        verify_detached(DATA, bytes(signature), _key(gnupg, key))


def test_a_certificate_without_a_valid_binding_is_reported_not_a_crash(gnupg: GnuPG) -> None:
    # Found by the fuzz test too: Cert.expiration raises for a certificate whose self-signatures are broken,
    # and the refusal's message asked for it.
    key = gnupg.generate("broken <broken@example.com>", "ed25519", at=T0)
    certificate = bytearray(gnupg.export(key, armor=False))
    certificate[-5] ^= 0x01  # inside the last self-signature's signature value
    broken = OpenPGPKey.from_armored(bytes(certificate))
    assert broken.state().startswith("unusable: ")
    with pytest.raises(VerificationError, match=r"\(.{16}, unusable: "):
        verify_detached(DATA, gnupg.sign(DATA, key, at=T0 + HOUR), {"team/release": broken})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"-----BEGIN PGP SIGNATURE-----\n" * 2000, "an armor block has no tail line"),
        (b"-----BEGIN PGP SIGNATURE-----\n-----END PGP SIGNATURE-----\n" * 40, "holds 40 armor blocks"),
        (b"just text\n", "neither binary packets nor an armored block"),
    ],
)
def test_armor_blocks_are_found_in_one_pass_and_bounded(text: bytes, message: str) -> None:
    # A search per block from each header took a second of CPU on 64 KiB of headers (quadratic).
    with pytest.raises(VerificationError, match=message):
        read_signatures(text)


def test_a_packet_of_a_tag_sequoia_does_not_know_is_a_refusal_not_a_crash(gnupg: GnuPG) -> None:
    # Found by the fuzz test: reading the tag of packet 42 raised RuntimeError ("Unknown packet tag").
    key = gnupg.generate("tag <tag@example.com>", "ed25519", at=T0)
    signature = gnupg.sign(DATA, key, at=T0 + HOUR, armor=False)
    with pytest.raises(
        VerificationError, match=r"packet 2 of 2 is of kind unknown \(Unknown packet tag: 42\)"
    ):
        read_signatures(signature + bytes([0xC0 | 42, 2, 0, 0]))


def test_key_ids_and_fingerprints_are_compared_as_upper_case_hex(gnupg: GnuPG) -> None:
    """Issue 25 (7): Sequoia writes fingerprints in lower case, gpg and trtguard in upper case; the issuer a
    signature names (a subkey's key ID here, in its unhashed area) is matched with the key that verified it
    whatever the case, and reported as gpg prints the fingerprint."""
    primary = gnupg.generate("case <case@example.com>", "ed25519", at=T0, usage="cert")
    subkey = gnupg.add_subkey(primary, "ed25519", at=T0)
    keys = _key(gnupg, primary)
    assert next(iter(keys.values())).fingerprint == primary.upper()
    key = ed25519_secret(gnupg, subkey)
    signature = sign_detached(
        key, DATA, created=T0 + timedelta(hours=1), unhashed=issuer_subpackets(key_id=subkey[-16:].lower())
    )
    [check] = check_signatures(DATA, signature, keys)
    assert check.signers == tuple(keys) and check.issuer == subkey.upper()
