"""``trtguard verify-openpgp`` (issue 25): a detached signature made by Debian's gpg, over a file, checked
with a keyring as ``gpgv --keyring`` does; exit 0 / 1 / 2 and the JSON report. The verdicts on every kind of
signature are tests/verifier/signatures/test_openpgp_conformance.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.gpg import GnuPG
from trtguard.cli import main

T0 = datetime(2024, 1, 1, tzinfo=UTC)
DATA = b"release 1.2.3\n"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def signed(gnupg: GnuPG, tmp_path: Path) -> dict[str, Path | str]:
    alice = gnupg.generate("alice <alice@example.com>", "ed25519", at=T0)
    bob = gnupg.generate("bob <bob@example.com>", "nistp256", at=T0)
    data = tmp_path / "release.txt"
    data.write_bytes(DATA)
    both = gnupg.run(
        "--local-user",
        f"{alice}!",
        "--local-user",
        f"{bob}!",
        "--detach-sign",
        "--output",
        "-",
        at=T0 + timedelta(hours=1),
        stdin=DATA,
    ).stdout
    files: dict[str, Path | str] = {"alice": alice, "bob": bob, "data": data}
    for name, content in (
        ("alice.asc", gnupg.sign(DATA, alice, at=T0 + timedelta(hours=1))),
        ("both.sig", both),
        ("keyring.gpg", gnupg.export(alice, bob, armor=False)),
        ("alice.pub.asc", gnupg.export(alice)),
        ("bob.pub.asc", gnupg.export(bob)),
    ):
        path = tmp_path / name
        path.write_bytes(content)
        files[name] = path
    return files


def test_a_signature_verifies_with_a_binary_keyring_of_several_certificates(
    signed: dict[str, Path | str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "verify-openpgp",
        "--keyring",
        str(signed["keyring.gpg"]),
        str(signed["alice.asc"]),
        str(signed["data"]),
    ]
    status, out, err = _run(argv, capsys)
    assert (status, err) == (0, "")
    assert out.splitlines()[0] == f"Verified OK: {signed['data']}"
    assert f"signature 1 of 1: good, by {signed['alice']}" in out


def test_json_lists_every_signature_and_who_made_it(
    signed: dict[str, Path | str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "verify-openpgp",
        "--format",
        "json",
        "--keyring",
        str(signed["alice.pub.asc"]),
        "--keyring",
        str(signed["bob.pub.asc"]),
        str(signed["both.sig"]),
        str(signed["data"]),
    ]
    status, out, _ = _run(argv, capsys)
    document = json.loads(out)
    assert status == 0
    assert document["verified"] is True
    assert document["reason"] is None
    assert document["signers"] == sorted([signed["alice"], signed["bob"]])
    assert [s["signedBy"] for s in document["signatures"]] == [[signed["alice"]], [signed["bob"]]]
    assert {s["keyAlgorithm"] for s in document["signatures"]} == {"EdDSA", "ECDSA"}
    assert all(s["created"] == "2024-01-01T01:00:00+00:00" for s in document["signatures"])


def test_a_signature_a_key_of_the_keyring_cannot_check_is_not_verified(
    signed: dict[str, Path | str], capsys: pytest.CaptureFixture[str]
) -> None:
    # as gpgv: every signature in the file must verify (Bob's key is not in this keyring)
    argv = [
        "verify-openpgp",
        "--format",
        "json",
        "--keyring",
        str(signed["alice.pub.asc"]),
        str(signed["both.sig"]),
        str(signed["data"]),
    ]
    status, out, _ = _run(argv, capsys)
    document = json.loads(out)
    assert status == 1
    assert document["verified"] is False
    assert [s["verified"] for s in document["signatures"]] == [True, False]
    assert document["reason"].startswith(f"the OpenPGP signature 2 of 2 (by {signed['bob']}")


def test_other_bytes_and_garbage_are_not_verified(
    signed: dict[str, Path | str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.txt"
    other.write_bytes(DATA + b" ")
    keyring = str(signed["keyring.gpg"])
    status, out, _ = _run(
        ["verify-openpgp", "--keyring", keyring, str(signed["alice.asc"]), str(other)], capsys
    )
    assert status == 1
    assert out.startswith(f"NOT verified: {other}")
    garbage = tmp_path / "garbage.sig"
    garbage.write_bytes(b"\x89" + bytes(64))
    status, out, err = _run(
        ["verify-openpgp", "--keyring", keyring, str(garbage), str(signed["data"])], capsys
    )
    assert status == 1
    assert "reason: not an OpenPGP signature" in out
    assert "Traceback" not in out + err


def test_unusable_input_is_exit_2(
    signed: dict[str, Path | str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keyring, signature, data = str(signed["keyring.gpg"]), str(signed["alice.asc"]), str(signed["data"])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it would wait for a writer: refused before it is opened
    for argv, message in (
        ([keyring, signature, str(fifo)], "cannot read the signed file: not a regular file"),
        ([str(fifo), signature, data], "cannot read the keyring: not a regular file"),
        ([keyring, str(fifo), data], "cannot read the OpenPGP signature: not a regular file"),
        ([keyring, signature, str(tmp_path / "absent")], "cannot read the signed file"),
        ([keyring, str(tmp_path / "absent.sig"), data], "cannot read the OpenPGP signature"),
        ([data, signature, data], "not an OpenPGP public key"),
        ([str(tmp_path), signature, data], "cannot read the keyring"),
        ([keyring, signature, str(tmp_path)], "cannot read the signed file"),
    ):
        status, out, err = _run(["verify-openpgp", "--keyring", *argv], capsys)
        assert (status, out) == (2, ""), err
        assert message in err
        assert "Traceback" not in err


def test_a_secret_keyring_is_refused(
    gnupg: GnuPG, signed: dict[str, Path | str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "secret.gpg"
    secret.write_bytes(gnupg.run("--export-secret-keys", str(signed["alice"]), at=T0).stdout)
    argv = ["verify-openpgp", "--keyring", str(secret), str(signed["alice.asc"]), str(signed["data"])]
    status, _, err = _run(argv, capsys)
    assert status == 2
    assert "secret key material" in err


def test_the_installed_command_runs(signed: dict[str, Path | str]) -> None:
    argv = [
        str(Path(sys.executable).parent / "trtguard"),
        "verify-openpgp",
        "--keyring",
        str(signed["keyring.gpg"]),
        str(signed["alice.asc"]),
        str(signed["data"]),
    ]
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr


def test_a_revocation_in_one_keyring_is_not_lost_to_an_older_copy_in_another(
    gnupg: GnuPG, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found attacking the command: the keyrings were joined by fingerprint, the last copy winning, so an
    # older copy of a certificate given after the revoked one undid the revocation. gpg merges copies.
    key = gnupg.generate("carol <carol@example.com>", "ed25519", at=T0)
    (tmp_path / "data").write_bytes(DATA)
    (tmp_path / "sig").write_bytes(gnupg.sign(DATA, key, at=T0 + timedelta(days=2)))
    (tmp_path / "old.gpg").write_bytes(gnupg.export(key))
    gnupg.revoke(key, at=T0 + timedelta(days=1), reason=1)  # compromised
    (tmp_path / "revoked.gpg").write_bytes(gnupg.export(key))
    for first, second in (("revoked.gpg", "old.gpg"), ("old.gpg", "revoked.gpg")):
        argv = ["verify-openpgp", "--keyring", str(tmp_path / first), "--keyring", str(tmp_path / second)]
        status, out, _ = _run([*argv, str(tmp_path / "sig"), str(tmp_path / "data")], capsys)
        assert status == 1, (first, second, out)
    both = tmp_path / "both.gpg"
    both.write_bytes((tmp_path / "revoked.gpg").read_bytes() + (tmp_path / "old.gpg").read_bytes())
    status, _, _ = _run(
        ["verify-openpgp", "--keyring", str(both), str(tmp_path / "sig"), str(tmp_path / "data")], capsys
    )
    assert status == 1


def test_now_is_the_time_signatures_are_judged_at(
    signed: dict[str, Path | str], gnupg: GnuPG, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: ``--now`` (it was missing, and the library used the real clock): a signature made after it,
    or expired by it, is not verified; one whose lifetime excludes the real clock cannot be judged at another
    time (Sequoia judges at the real clock) and is not verified either: never an accept."""
    alice = str(signed["alice"])
    lasting = tmp_path / "lasting.asc"
    lasting.write_bytes(gnupg.sign(DATA, alice, at=T0 + timedelta(hours=1), expires="20y"))
    short = tmp_path / "short.asc"
    short.write_bytes(gnupg.sign(DATA, alice, at=T0 + timedelta(hours=1), expires="1d"))

    def verify(signature: Path, *now: str) -> tuple[int, dict[str, Any]]:
        argv = ["verify-openpgp", "--format", "json", "--keyring", str(signed["alice.pub.asc"])]
        status, out, _ = _run([*argv, *now, str(signature), str(signed["data"])], capsys)
        return status, json.loads(out)

    assert verify(lasting)[0] == 0
    assert verify(lasting, "--now", (T0 + timedelta(days=2)).isoformat())[0] == 0
    status, document = verify(lasting, "--now", T0.isoformat())  # before it was made
    assert status == 1 and "after the time judged at" in document["reason"]
    status, document = verify(lasting, "--now", (T0 + timedelta(days=365 * 21)).isoformat())
    assert status == 1 and "before the time judged at" in document["reason"]
    status, document = verify(short, "--now", (T0 + timedelta(hours=2)).isoformat())
    assert status == 1 and "Sequoia judges signatures at the real clock" in document["reason"]
    assert verify(short)[0] == 1  # expired
    with pytest.raises(SystemExit) as exited:
        _run(["verify-openpgp", "--keyring", "k", "--now", "yesterday", "sig", "file"], capsys)
    assert exited.value.code == 2
