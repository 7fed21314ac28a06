"""verifier/verification/_statement.py: one statement verified once, its threshold counted by key.

Issue 25's review (F4): a threshold counted signer *names*, so one key listed under two names, or read from
two encodings, or an OpenPGP certificate named by fingerprints differing in case, met a threshold of two
alone. Keys here are real (ECDSA made by ``cryptography``, OpenPGP made by gpg).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.gpg import GnuPG
from verifier.base import InputError
from verifier.crypto._dsse import Envelope, sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor, Statement
from verifier.crypto._keys import PrivateKey, PublicKey, generate_private_key
from verifier.evidence import Attestation
from verifier.signatures._openpgp import OpenPGPKey
from verifier.verification import StatementRefused, StatementTrust, signers_of, verify_statement

SUBJECT = "ab" * 32


@dataclass(frozen=True)
class Signer:
    """A policy's signer as :meth:`StatementTrust.of` reads one (the attributes each format takes)."""

    public_key: PublicKey | None = None
    openpgp: OpenPGPKey | None = None


def _statement() -> bytes:
    statement = Statement(
        subject=[ResourceDescriptor(name="engine", digest={"sha256": SUBJECT})],
        predicate_type="https://example.com/predicate/v1",
        predicate={"about": "a test"},
    )
    return statement.to_json()


def _copy(*keys: PrivateKey, payload: bytes | None = None, openpgp: tuple[bytes, ...] = ()) -> Attestation:
    data = payload if payload is not None else _statement()
    if keys:
        envelope = sign_envelope(PAYLOAD_TYPE, data, keys[0])
        for key in keys[1:]:
            envelope = Envelope(
                PAYLOAD_TYPE, data, envelope.signatures + sign_envelope(PAYLOAD_TYPE, data, key).signatures
            )
    else:
        envelope = Envelope(PAYLOAD_TYPE, data, ())
    return Attestation(
        envelope, "https://example.com/predicate/v1", frozenset({f"sha256:{SUBJECT}"}), "here", openpgp
    )


def test_two_keys_meet_a_threshold_of_two() -> None:
    alice, bob = generate_private_key(), generate_private_key()
    trust = StatementTrust.of(
        {"alice": Signer(alice.public_key()), "bob": Signer(bob.public_key())}, threshold=2
    )
    verified = verify_statement([_copy(alice, bob)], trust)
    assert verified.signers == ("alice", "bob")
    assert verified.distinct_keys == 2
    assert verified.statement.subject_digests() == {f"sha256:{SUBJECT}"}


def test_one_key_under_two_names_counts_once() -> None:
    key = generate_private_key()
    signers = {"alice": Signer(key.public_key()), "alice-again": Signer(key.public_key())}
    # A threshold the keys cannot meet is refused before anything is read...
    with pytest.raises(InputError, match="threshold 2 cannot be met by 1 distinct key"):
        StatementTrust.of(signers, threshold=2)
    # ...and counting never takes a name for a key, however the trust was put together.
    other = generate_private_key().public_key()
    trust = StatementTrust.of({**signers, "other": Signer(other)}, threshold=2)
    with pytest.raises(StatementRefused, match="signed by 1 of the 2 required distinct keys"):
        verify_statement([_copy(key)], trust)


def test_one_key_in_two_encodings_counts_once() -> None:
    key = generate_private_key()
    pem, der = PublicKey.from_pem(key.public_key().to_pem()), PublicKey.from_der(key.public_key().to_der())
    other = generate_private_key().public_key()
    trust = StatementTrust.of({"pem": Signer(pem), "der": Signer(der), "other": Signer(other)}, threshold=2)
    with pytest.raises(StatementRefused, match="signed by 1 of the 2 required distinct keys"):
        verify_statement([_copy(key), _copy(key)], trust)


def test_an_openpgp_fingerprint_in_another_case_is_the_same_key(gnupg: GnuPG) -> None:
    now = datetime.now(UTC) - timedelta(minutes=5)
    fingerprint = gnupg.generate("build <build@example.com>", "ed25519", at=now)
    certificate = OpenPGPKey.from_armored(gnupg.export(fingerprint))
    lower = replace(certificate, fingerprint=certificate.fingerprint.lower())
    payload = _statement()
    signature = gnupg.sign(payload, fingerprint, at=now)
    other = generate_private_key().public_key()
    trust = StatementTrust.of(
        {"gpg": Signer(openpgp=certificate), "gpg-lower": Signer(openpgp=lower), "other": Signer(other)},
        threshold=2,
    )
    copy = _copy(payload=payload, openpgp=(signature,))
    assert {s.identity for s in signers_of([copy], trust)} == {f"openpgp:{certificate.fingerprint}"}
    with pytest.raises(StatementRefused, match="signed by 1 of the 2 required distinct keys"):
        verify_statement([copy], trust)


def test_dsse_and_openpgp_signatures_of_one_statement_count_together(gnupg: GnuPG) -> None:
    now = datetime.now(UTC) - timedelta(minutes=5)
    fingerprint = gnupg.generate("build <build@example.com>", "ed25519", at=now)
    certificate = OpenPGPKey.from_armored(gnupg.export(fingerprint))
    key = generate_private_key()
    payload = _statement()
    expires = gnupg.sign(payload, fingerprint, at=now, expires="2d")
    trust = StatementTrust.of({"ecdsa": Signer(key.public_key()), "gpg": Signer(openpgp=certificate)}, 2)
    verified = verify_statement(
        [_copy(key, payload=payload), _copy(payload=payload, openpgp=(expires,))], trust
    )
    assert verified.signers == ("ecdsa", "gpg")
    # The OpenPGP signature's own expiry is when the verdict stops holding.
    assert verified.valid_until is not None
    assert (
        now + timedelta(days=2) - timedelta(minutes=1)
        <= verified.valid_until
        <= now + timedelta(days=2, minutes=1)
    )


def test_a_statement_about_another_subject_is_refused() -> None:
    key = generate_private_key()
    trust = StatementTrust.with_keys({"alice": key.public_key()})
    assert verify_statement([_copy(key)], trust, subject=f"sha256:{SUBJECT}").signers == ("alice",)
    with pytest.raises(StatementRefused, match="is not about sha256:cd"):
        verify_statement([_copy(key)], trust, subject="sha256:" + "cd" * 32)


def test_copies_of_different_statements_are_not_one_statement() -> None:
    key = generate_private_key()
    trust = StatementTrust.with_keys({"alice": key.public_key()})
    with pytest.raises(InputError, match="not of one statement"):
        verify_statement([_copy(key), _copy(key, payload=b'{"other": true}')], trust)


def test_no_signature_of_a_format_the_signers_sign_in_is_refused_with_the_reason() -> None:
    key = generate_private_key()
    trust = StatementTrust.with_keys({"alice": key.public_key()})
    with pytest.raises(StatementRefused, match=r"carries no DSSE signature, which \[alice\] sign in"):
        verify_statement([_copy()], trust)
    with pytest.raises(StatementRefused, match="0 of 1 required signatures from keys"):
        verify_statement([_copy(generate_private_key())], trust)
