"""The real ``gpg`` binary (Debian's GnuPG) in a temporary home, for OpenPGP test material.

Every call passes ``--faked-system-time`` so that keys, signatures, expiries and revocations carry the
times a test chooses (a signature made while a key was valid, one made after it expired, a revocation
before or after a signature). Keys have no passphrase; nothing here touches the user's keyring.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

#: OpenPGP key algorithms the interoperability tests cover, as ``gpg --quick-gen-key`` names them.
ALGORITHMS = ("ed25519", "nistp256", "rsa3072")


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%S") + "!"  # "!" freezes the clock there


@dataclass
class GnuPG:
    """``gpg`` with its own ``GNUPGHOME``; each method runs one command at a faked time."""

    home: Path

    def run(self, *args: str, at: datetime, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """``gpg ARGS`` at time ``at``; raises with gpg's own words when it fails."""
        command = [
            "gpg",
            "--batch",
            "--yes",
            "--no-tty",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--faked-system-time",
            _stamp(at),
            *args,
        ]
        result = subprocess.run(
            command,
            input=stdin,
            capture_output=True,
            check=False,
            env={**os.environ, "GNUPGHOME": str(self.home)},
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {result.stderr.decode(errors='replace')}")
        return result

    def generate(
        self, uid: str, algorithm: str, *, at: datetime, usage: str = "sign", expires: str = "never"
    ) -> str:
        """A new primary key for ``uid`` (``usage`` sign or cert), created at ``at``; its fingerprint."""
        self.run("--quick-gen-key", uid, algorithm, usage, expires, at=at)
        return self.fingerprint(uid)

    def add_subkey(self, fingerprint: str, algorithm: str, *, at: datetime, usage: str = "sign") -> str:
        """A new subkey of ``fingerprint`` created at ``at``; the subkey's fingerprint."""
        before = set(self.subkeys(fingerprint))
        self.run("--quick-add-key", fingerprint, algorithm, usage, "never", at=at)
        (added,) = set(self.subkeys(fingerprint)) - before
        return added

    def fingerprint(self, uid: str) -> str:
        """The primary key fingerprint of ``uid``."""
        return self._fingerprints(uid)[0]

    def subkeys(self, fingerprint: str) -> list[str]:
        """The fingerprints of the subkeys of ``fingerprint``."""
        return self._fingerprints(fingerprint)[1:]

    def _fingerprints(self, who: str) -> list[str]:
        listing = subprocess.run(
            ["gpg", "--batch", "--with-colons", "--fingerprint", "--fingerprint", "--list-keys", who],
            capture_output=True,
            check=True,
            env={**os.environ, "GNUPGHOME": str(self.home)},
        ).stdout.decode()
        return [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")]

    def export(self, *fingerprints: str, armor: bool = True) -> bytes:
        """The public certificates (with every revocation and binding gpg holds), armored or binary; several
        fingerprints give a keyring as ``gpg --export`` writes one."""
        return subprocess.run(
            ["gpg", "--batch", *(["--armor"] if armor else []), "--export", *fingerprints],
            capture_output=True,
            check=True,
            env={**os.environ, "GNUPGHOME": str(self.home)},
        ).stdout

    def sign(
        self,
        data: bytes,
        signer: str,
        *,
        at: datetime,
        digest: str | None = "SHA256",
        textmode: bool = False,
        armor: bool = True,
        expires: str | None = None,
    ) -> bytes:
        """A detached signature by ``signer`` (a fingerprint; a subkey's is used as it is), armored or binary;
        ``digest`` None lets gpg choose (ECDSA P-384 needs SHA-384 or larger), ``expires`` is gpg's
        ``--default-sig-expire`` (``1d``, ``2y``)."""
        options = [
            *(["--digest-algo", digest] if digest else []),
            *(["--textmode"] if textmode else []),
            *(["--armor"] if armor else []),
            *(["--default-sig-expire", expires] if expires else []),
        ]
        return self.run(
            "--local-user",
            f"{signer}!",
            *options,
            "--detach-sign",
            "--output",
            "-",
            at=at,
            stdin=data,
        ).stdout

    def set_expiry(
        self, fingerprint: str, expiry: datetime, *, at: datetime, subkey: str | None = None
    ) -> None:
        """Make ``fingerprint`` (or its ``subkey``) expire at ``expiry``, self-signed at ``at``."""
        self.run(
            "--quick-set-expire",
            fingerprint,
            expiry.astimezone(UTC).strftime("%Y%m%dT%H%M%S"),
            *([subkey] if subkey else []),
            at=at,
        )

    def revoke(self, fingerprint: str, *, at: datetime, reason: int) -> None:
        """Revoke the key at ``at`` with reason code ``reason`` (0 none/compromised-like, 1 superseded,
        2 compromised, 3 retired), importing the revocation into the keyring."""
        answers = f"revkey\ny\n{reason}\nrevoked by the test\n\ny\nsave\n".encode()
        self.run("--command-fd", "0", "--edit-key", fingerprint, at=at, stdin=answers)

    def revoke_subkey(self, fingerprint: str, index: int, *, at: datetime, reason: int) -> None:
        """Revoke subkey number ``index`` (1-based, in gpg's listing) of ``fingerprint``."""
        answers = f"key {index}\nrevkey\ny\n{reason}\nrevoked by the test\n\ny\nsave\n".encode()
        self.run("--command-fd", "0", "--edit-key", fingerprint, at=at, stdin=answers)

    def toggle_usage(
        self, fingerprint: str, letters: str, *, at: datetime, subkey: int | None = None
    ) -> None:
        """Toggle the usage flags ``letters`` (``S`` sign, ``A`` authenticate, ``E`` encrypt) of the primary
        key or of subkey number ``subkey`` in a new binding signature made at ``at`` (gpg's expert
        ``change-usage``): how a key stops being signing-capable."""
        select = f"key {subkey}\n" if subkey else ""
        toggles = "".join(f"{letter}\n" for letter in letters)
        answers = f"{select}change-usage\n{toggles}Q\nsave\n".encode()
        self.run("--expert", "--command-fd", "0", "--edit-key", fingerprint, at=at, stdin=answers)

    def clone(self, home: Path) -> GnuPG:
        """A copy of this keyring (secret keys included) in ``home``: what a signer who kept an old copy of
        the key has, for signatures that the current certificate no longer allows."""
        shutil.copytree(self.home, home, ignore=shutil.ignore_patterns("S.*"))
        return GnuPG(home)

    def verify(self, signature: bytes, data: Path, *, at: datetime) -> tuple[int, str]:
        """``gpg --verify``: its exit code and status lines (not raising on failure)."""
        sig = data.with_name(data.name + ".tmp.asc")
        sig.write_bytes(signature)
        result = subprocess.run(
            [
                "gpg",
                "--batch",
                "--status-fd",
                "1",
                "--faked-system-time",
                _stamp(at),
                "--verify",
                str(sig),
                str(data),
            ],
            capture_output=True,
            check=False,
            env={**os.environ, "GNUPGHOME": str(self.home)},
        )
        sig.unlink()
        return result.returncode, result.stdout.decode(errors="replace")


@pytest.fixture
def gnupg(tmp_path: Path) -> GnuPG:
    """A fresh GnuPG home (skips the test where the ``gpg`` binary is missing)."""
    if shutil.which("gpg") is None:
        pytest.skip("the gpg binary is not installed (Debian package gpg)")
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    return GnuPG(home)
