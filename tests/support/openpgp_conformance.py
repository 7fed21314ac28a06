"""OpenPGP conformance cases made by the real ``gpg``, and the verifiers trtguard is compared with (issue 25).

Each :class:`Case` is a detached signature, the keyring it is checked against (``gpg --export`` output, one
or several certificates) and the bytes, with the verdict trtguard must give (``valid``) and why. The
references are the tools people check such signatures with: ``gpgv`` (GnuPG), ``sqv`` and ``sq verify``
(Sequoia, Debian's packages) and PGPy 0.6.0 (pure Python). :func:`tally` counts, per reference, the cases
where trtguard agrees with it and where it accepts or rejects what the reference does not.

Used by ``tests/verifier/signatures/test_openpgp_conformance.py`` (trtguard must give every expected verdict;
each reference's disagreements are the documented ones) and ``bench/openpgp_conformance.py`` (the table, for
this checkout or another one: ``--root /path/to/checkout``). Signatures are made at faked times around
``T0`` (2024); every verifier checks them at the real current time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pysequoia

from tests.support.gpg import GnuPG
from tests.support.openpgp_packets import ed25519_secret, issuer_subpackets, sign_detached

T0 = datetime(2024, 1, 1, tzinfo=UTC)
HOUR, DAY = timedelta(hours=1), timedelta(days=1)
DATA = b'{"_type": "https://in-toto.io/Statement/v1", "subject": []}\n'
OTHER = b'{"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "other"}]}\n'


@dataclass(frozen=True)
class Case:
    """One signature, keyring and file, and the verdict trtguard must give."""

    area: str
    name: str
    keyring: bytes
    signature: bytes
    data: bytes
    valid: bool
    why: str = ""


def _dearmor(data: bytes) -> bytes:
    if not data.lstrip().startswith(b"-----BEGIN"):
        return data
    with tempfile.TemporaryDirectory() as home:
        return subprocess.run(
            ["gpg", "--batch", "--dearmor"],
            input=data,
            capture_output=True,
            check=True,
            env={**os.environ, "GNUPGHOME": home},
        ).stdout


class _Maker:
    """Builds the cases: one keyring per signer, times relative to ``T0``."""

    def __init__(self, gpg: GnuPG, scratch: Path) -> None:
        self.gpg, self.scratch, self.cases = gpg, scratch, list[Case]()
        self._count = 0

    def key(self, algorithm: str = "ed25519", *, usage: str = "sign", expires: str = "never") -> str:
        self._count += 1
        return self.gpg.generate(
            f"k{self._count} <k{self._count}@example.com>", algorithm, at=T0, usage=usage, expires=expires
        )

    def add(
        self,
        area: str,
        name: str,
        keyring: bytes,
        signature: bytes,
        valid: bool,
        why: str = "",
        *,
        data: bytes = DATA,
    ) -> None:
        self.cases.append(Case(area, name, keyring, signature, data, valid, why))


def _key_types(make: _Maker) -> None:
    for algorithm, digest in (
        ("ed25519", "SHA256"),
        ("nistp256", "SHA256"),
        ("nistp384", None),
        ("rsa3072", "SHA256"),
        ("rsa3072", "SHA512"),
    ):
        key = make.key(algorithm)
        signature = make.gpg.sign(DATA, key, at=T0 + HOUR, digest=digest)
        label = f"{algorithm} {digest or 'default hash'}"
        make.add("key types", f"{label}: good", make.gpg.export(key), signature, True)
        make.add("key types", f"{label}: other bytes", make.gpg.export(key), signature, False, data=OTHER)
    sha1 = make.key("rsa3072")
    signature = make.gpg.sign(DATA, sha1, at=T0 + HOUR, digest="SHA1")
    make.add(
        "key types",
        "rsa3072 SHA-1",
        make.gpg.export(sha1),
        signature,
        False,
        "SHA-1 data signatures are broken (SHAmbles); RFC 9580 forbids them for new signatures",
    )


def _encodings(make: _Maker) -> None:
    gpg = make.gpg
    key, other = make.key(), make.key()
    armored = gpg.sign(DATA, key, at=T0 + HOUR)
    binary = gpg.sign(DATA, key, at=T0 + HOUR, armor=False)
    area = "encodings"
    make.add(area, "armored signature, armored keyring", gpg.export(key), armored, True)
    make.add(area, "binary signature, binary keyring", gpg.export(key, armor=False), binary, True)
    make.add(area, "keyring of two, signer second", gpg.export(other, key), armored, True)
    make.add(area, "keyring of two, binary", gpg.export(other, key, armor=False), binary, True)
    make.add(area, "keyring without the signer", gpg.export(other), armored, False)
    make.add(area, "wrong file", gpg.export(key), armored, False, data=OTHER)
    make.add(area, "empty file", gpg.export(key), armored, False, data=b"")
    make.add(
        area,
        "armored signature, text after the armor",
        gpg.export(key),
        armored + b"\nthis line is not part of the signature\n",
        True,
        "text outside the armor is not signature data (RFC 9580 6.2); the signed bytes are unchanged",
    )
    make.add(
        area,
        "binary signature, trailing garbage",
        gpg.export(key),
        binary + b"garbage!!",
        False,
        "the bytes after the packet are not a packet",
    )
    make.add(area, "binary signature, truncated", gpg.export(key), binary[:-4], False)
    make.add(area, "empty signature file", gpg.export(key), b"", False)
    make.add(area, "a certificate as the signature", gpg.export(key), gpg.export(key), False)
    inline = gpg.run("--local-user", f"{key}!", "--sign", "--output", "-", at=T0 + HOUR, stdin=DATA).stdout
    make.add(
        area,
        "inline-signed message as the signature",
        gpg.export(key),
        inline,
        False,
        "not a detached signature: it carries its own copy of the data",
    )
    # Multiple signatures in one file (`gpg -u A -u B --detach-sign`, or two files concatenated).
    both = gpg.run(
        "--local-user",
        f"{key}!",
        "--local-user",
        f"{other}!",
        "--detach-sign",
        "--output",
        "-",
        at=T0 + HOUR,
        stdin=DATA,
    ).stdout
    bad = gpg.sign(OTHER, other, at=T0 + HOUR, armor=False)
    unknown = gpg.sign(DATA, make.key(), at=T0 + HOUR, armor=False)
    keyring = gpg.export(key, other)
    make.add(area, "two good signatures in one file", keyring, both, True)
    other_armored = gpg.sign(DATA, other, at=T0 + HOUR)
    bad_armored = gpg.sign(OTHER, other, at=T0 + HOUR)
    make.add(area, "two armor blocks, both good", keyring, armored + other_armored, True)
    make.add(
        area,
        "two armor blocks, the second bad",
        keyring,
        armored + bad_armored,
        False,
        "every armor block of the file is read, as gpg reads them",
    )
    make.add(
        area,
        "one good and one bad signature",
        keyring,
        binary + bad,
        False,
        "every signature in the file must hold, as gpgv requires: a bad one is tampering",
    )
    make.add(area, "one bad and one good signature", keyring, bad + binary, False)
    make.add(
        area,
        "one good signature and one by an unknown key",
        keyring,
        binary + unknown,
        False,
        "a signature that cannot be checked is not a verified one (gpgv: no public key)",
    )


def _times(make: _Maker, now: datetime) -> None:
    gpg, area = make.gpg, "time"
    expiring = make.key(expires="1d")
    make.add(
        area,
        "key expired since, signed before",
        gpg.export(expiring),
        gpg.sign(DATA, expiring, at=T0 + HOUR),
        True,
        "a key's expiry cuts off later signatures only (RFC 9580 5.2.3.13)",
    )
    late = make.key()
    after = gpg.sign(DATA, late, at=T0 + 2 * DAY)
    gpg.set_expiry(late, T0 + DAY, at=T0 + 2 * HOUR)
    make.add(
        area,
        "key expired, signed after",
        gpg.export(late),
        after,
        False,
        "the key was not valid when it signed",
    )
    young = make.key()
    make.add(
        area,
        "signature made a year from now",
        gpg.export(young),
        gpg.sign(DATA, young, at=now + 365 * DAY),
        False,
        "a signature is not valid before its creation time (Sequoia allows 30 minutes of clock skew)",
    )
    make.add(
        area,
        "signature expired",
        gpg.export(young),
        gpg.sign(DATA, young, at=T0 + HOUR, expires="1d"),
        False,
        "the signature's own expiry passed (RFC 9580 5.2.3.18)",
    )
    make.add(
        area,
        "signature expiring in 2044",
        gpg.export(young),
        gpg.sign(DATA, young, at=T0 + HOUR, expires="20y"),
        True,
    )
    newer = make.gpg.generate("newer <newer@example.com>", "ed25519", at=T0 + 30 * DAY)
    backdated = gpg.run(
        "--ignore-time-conflict",
        "--local-user",
        f"{newer}!",
        "--armor",
        "--detach-sign",
        "--output",
        "-",
        at=T0,
        stdin=DATA,
    ).stdout
    make.add(
        area,
        "signature older than the key",
        gpg.export(newer),
        backdated,
        False,
        "the key did not exist when the signature claims it was made",
    )


def _revocations(make: _Maker) -> None:
    gpg, area = make.gpg, "revocations"
    for reason, what, hard in (
        (0, "no reason", True),
        (1, "compromised", True),
        (2, "superseded", False),
        (3, "retired", False),
    ):
        key = make.key()
        before, after = gpg.sign(DATA, key, at=T0 + HOUR), gpg.sign(DATA, key, at=T0 + 2 * DAY)
        gpg.revoke(key, at=T0 + DAY, reason=reason)
        rule = (
            "a hard revocation (compromised, no reason) invalidates every signature"
            if hard
            else "a soft revocation cuts off later signatures only"
        )
        make.add(area, f"key revoked ({what}), signed before", gpg.export(key), before, not hard, rule)
        make.add(area, f"key revoked ({what}), signed after", gpg.export(key), after, False, rule)
        revoked_copy = gpg.export(key)
        make.add(
            area,
            f"key revoked ({what}), in a keyring of two",
            revoked_copy + gpg.export(make.key()),
            after,
            False,
        )
    for reason, what, hard in ((1, "compromised", True), (3, "retired", False)):
        primary = make.key(usage="cert")
        subkey = gpg.add_subkey(primary, "ed25519", at=T0)
        before, after = gpg.sign(DATA, subkey, at=T0 + HOUR), gpg.sign(DATA, subkey, at=T0 + 2 * DAY)
        gpg.revoke_subkey(primary, 1, at=T0 + DAY, reason=reason)
        make.add(area, f"subkey revoked ({what}), signed before", gpg.export(primary), before, not hard)
        make.add(area, f"subkey revoked ({what}), signed after", gpg.export(primary), after, False)


def _subkeys(make: _Maker) -> None:
    gpg, area = make.gpg, "subkeys"
    primary = make.key(usage="cert")
    subkey = gpg.add_subkey(primary, "ed25519", at=T0)
    make.add(
        area,
        "signing subkey, certify-only primary",
        gpg.export(primary),
        gpg.sign(DATA, subkey, at=T0 + HOUR),
        True,
    )
    rsa = make.key("rsa3072", usage="cert")
    rsa_subkey = gpg.add_subkey(rsa, "nistp256/ecdsa", at=T0)
    make.add(
        area,
        "nistp256 signing subkey, rsa3072 primary",
        gpg.export(rsa),
        gpg.sign(DATA, rsa_subkey, at=T0 + HOUR),
        True,
    )
    # A subkey that stopped being signing-capable: the signer kept a copy from before (a clone of the
    # keyring), the certificate's newer binding says authentication only.
    primary = make.key(usage="cert")
    subkey = gpg.add_subkey(primary, "ed25519", at=T0)
    old = gpg.clone(make.scratch / "old-usage")
    gpg.toggle_usage(primary, "SA", at=T0 + HOUR, subkey=1)
    make.add(
        area,
        "subkey not signing-capable when it signed",
        gpg.export(primary),
        old.sign(DATA, subkey, at=T0 + 2 * HOUR),
        False,
        "the binding in force at signing time does not allow signing",
    )
    make.add(
        area,
        "subkey bound (for signing) only after it signed",
        gpg.export(primary),
        old.sign(DATA, subkey, at=T0 + HOUR / 2),
        False,
        "gpg replaced the older binding: none binds the subkey when the signature was made",
    )
    # Both bindings, as a keyserver merges certificates (gpg's own import keeps only the newer one).
    merged = pysequoia.Cert.from_bytes(old.export(primary)).merge(
        pysequoia.Cert.from_bytes(gpg.export(primary))
    )
    make.add(
        area,
        "subkey signing-capable when it signed, not since",
        str(merged).encode(),
        old.sign(DATA, subkey, at=T0 + HOUR / 2),
        True,
        "the binding in force when the signature was made counts (RFC 9580 5.2.3.13)",
    )
    signer = make.key()
    old = gpg.clone(make.scratch / "old-primary")
    gpg.toggle_usage(signer, "S", at=T0 + HOUR)
    make.add(
        area,
        "primary key made certify-only before it signed",
        gpg.export(signer),
        old.sign(DATA, signer, at=T0 + 2 * HOUR),
        False,
    )
    primary = make.key(usage="cert")
    subkey = gpg.add_subkey(primary, "ed25519", at=T0)
    late = gpg.sign(DATA, subkey, at=T0 + 2 * DAY)
    gpg.set_expiry(primary, T0 + DAY, at=T0 + 2 * HOUR, subkey=subkey)
    make.add(area, "subkey expired, signed after", gpg.export(primary), late, False)
    primary = make.key(usage="cert")
    gpg.add_subkey(primary, "cv25519", at=T0, usage="encr")
    signing = gpg.add_subkey(primary, "ed25519", at=T0)
    make.add(
        area,
        "signing subkey beside an encryption subkey",
        gpg.export(primary),
        gpg.sign(DATA, signing, at=T0 + HOUR),
        True,
    )


def _text_mode(make: _Maker) -> None:
    gpg, area = make.gpg, "text mode"
    key = make.key()
    text = gpg.sign(DATA, key, at=T0 + HOUR, textmode=True)
    why = (
        "trtguard refuses text-mode signatures (type 0x01): they hold for other bytes (the same text with "
        "CRLF line endings), and a signature must vouch for the exact bytes"
    )
    make.add(area, "text-mode signature, LF bytes", gpg.export(key), text, False, why)
    make.add(
        area,
        "text-mode signature, CRLF bytes",
        gpg.export(key),
        text,
        False,
        why,
        data=DATA.replace(b"\n", b"\r\n"),
    )
    make.add(
        area,
        "binary signature, CRLF bytes",
        gpg.export(key),
        gpg.sign(DATA, key, at=T0 + HOUR),
        False,
        data=DATA.replace(b"\n", b"\r\n"),
    )


def _issuers(make: _Maker) -> None:
    """Signatures whose issuer subpackets name another key than the one that made them (issue 25, D2),
    made by hand (gpg always names its signing key). Such a signature counts for the key that verifies it
    when any issuer subpacket names that key (Sequoia's rule), unless its hashed area names a key of another
    certificate of the keyring: it then claims another trusted signer, and does not count (gpgv refuses
    it too, since it checks with the key the hashed issuer names)."""
    area = "issuers"
    signer, other = make.key(), make.key()
    key = ed25519_secret(make.gpg, signer)
    ring, both = make.gpg.export(signer), make.gpg.export(other, signer)
    mine, theirs = signer[-16:], other[-16:]
    fpr = issuer_subpackets

    def kid(key_id: str) -> bytes:
        return issuer_subpackets(key_id=key_id)

    def sign(hashed: bytes = b"", unhashed: bytes = b"") -> bytes:
        return sign_detached(key, DATA, created=T0 + HOUR, hashed=hashed, unhashed=unhashed)

    named = "an issuer subpacket names the key that verifies it"
    rival = "its signed issuer is another certificate of the keyring: it claims another trusted signer"
    cases = [
        ("crafted, issuers as gpg writes them", ring, sign(fpr(signer), kid(mine)), True, ""),
        (
            "hashed fingerprint the signer's, unhashed key ID another's",
            both,
            sign(fpr(signer), kid(theirs)),
            True,
            named,
        ),
        (
            "hashed key ID the signer's, unhashed fingerprint another's",
            both,
            sign(kid(mine), fpr(other)),
            True,
            named,
        ),
        (
            "hashed fingerprints of another key and of the signer",
            ring,
            sign(fpr(other) + fpr(signer)),
            True,
            named,
        ),
        (
            "hashed fingerprint another's, hashed key ID the signer's",
            ring,
            sign(fpr(other) + kid(mine)),
            True,
            named,
        ),
        ("unhashed key ID only, the signer's", ring, sign(unhashed=kid(mine)), True, named),
        (
            "unhashed fingerprint the signer's, unhashed key ID another's",
            ring,
            sign(unhashed=fpr(signer) + kid(theirs)),
            True,
            named,
        ),
        (
            "hashed key ID another's, unhashed fingerprint the signer's",
            ring,
            sign(kid(theirs), fpr(signer)),
            True,
            named,
        ),
        (
            "hashed fingerprint another's, unhashed fingerprint the signer's",
            ring,
            sign(fpr(other), fpr(signer)),
            True,
            named,
        ),
        (
            "hashed fingerprint another's, unhashed key ID the signer's",
            ring,
            sign(fpr(other), kid(mine)),
            True,
            named,
        ),
        (
            "hashed fingerprint another's, unhashed key ID the signer's, keyring of both",
            both,
            sign(fpr(other), kid(mine)),
            False,
            rival,
        ),
        (
            "hashed key ID another's, unhashed fingerprint the signer's, keyring of both",
            both,
            sign(kid(theirs), fpr(signer)),
            False,
            rival,
        ),
        (
            "hashed fingerprints of another key and of the signer, keyring of both",
            both,
            sign(fpr(other) + fpr(signer)),
            False,
            rival,
        ),
        (
            "hashed fingerprint another's only",
            ring,
            sign(fpr(other)),
            False,
            "no issuer names the key that made it",
        ),
        ("no issuer subpacket", ring, sign(), False, "the signature names no key"),
    ]
    for name, keyring, signature, valid, why in cases:
        make.add(area, name, keyring, signature, valid, why)


def make_cases(gpg: GnuPG, scratch: Path, *, now: datetime | None = None) -> list[Case]:
    """Every case, signed by ``gpg`` (``scratch``: a folder for copies of the keyring)."""
    make = _Maker(gpg, scratch)
    _key_types(make)
    _encodings(make)
    _times(make, now or datetime.now(UTC))
    _revocations(make)
    _subkeys(make)
    _text_mode(make)
    _issuers(make)
    return make.cases


Verifier = Callable[[Case, Path], bool]


def _files(case: Case, folder: Path, *, binary_keyring: bool = False) -> tuple[Path, Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    keyring, signature, data = folder / "keyring.gpg", folder / "signature.sig", folder / "data"
    keyring.write_bytes(_dearmor(case.keyring) if binary_keyring else case.keyring)
    signature.write_bytes(case.signature)
    data.write_bytes(case.data)
    return keyring, signature, data


def gpgv(case: Case, folder: Path) -> bool:
    """``gpgv --keyring``: exit 0 is a verified file (gpgv reads binary keyrings only)."""
    keyring, signature, data = _files(case, folder, binary_keyring=True)
    home = folder / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    command = ["gpgv", "--keyring", str(keyring), str(signature), str(data)]
    env = {**os.environ, "GNUPGHOME": str(home)}
    return subprocess.run(command, capture_output=True, check=False, env=env).returncode == 0


def sqv(case: Case, folder: Path) -> bool:
    """Sequoia's ``sqv --keyring`` (its gpgv)."""
    keyring, signature, data = _files(case, folder)
    command = ["sqv", "--keyring", str(keyring), str(signature), str(data)]
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


def sq(case: Case, folder: Path) -> bool:
    """Sequoia's ``sq verify --detached SIG --signer-cert KEYRING`` (sq 0.27, Debian bookworm)."""
    keyring, signature, data = _files(case, folder)
    command = ["sq", "verify", "--detached", str(signature), "--signer-cert", str(keyring), str(data)]
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


def pgpy(case: Case, _folder: Path) -> bool:
    """PGPy 0.6.0: any key of the keyring whose ``verify`` says true."""
    import pgpy as _pgpy  # type: ignore[import-untyped]  # noqa: PLC0415 - loaded only when compared with

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PGPy warns that it skips revocation and self-signature checks
        try:
            signature = _pgpy.PGPSignature.from_blob(case.signature)
            keys = _pgpy.PGPKeyring(case.keyring)
        except Exception:  # PGPy raises many unrelated types for what it cannot read
            return False
        for fingerprint in keys.fingerprints(keyhalf="public"):
            try:
                with keys.key(fingerprint) as key:
                    if key.verify(case.data, signature):
                        return True
            except Exception:  # noqa: S112 - as above; another key may still verify
                continue
    return False


def trtguard_library(case: Case, _folder: Path) -> bool:
    """``verifier.signatures._openpgp.verify_detached`` with each certificate of the keyring as a key (the
    interface main and this branch share, so that ``--root`` can compare them)."""
    import pysequoia  # noqa: PLC0415 - loaded when trtguard is

    from verifier.base._errors import TrtguardError  # noqa: PLC0415 - imported from the checkout compared
    from verifier.signatures._openpgp import OpenPGPKey, verify_detached  # noqa: PLC0415

    try:
        certificates = pysequoia.Cert.split_bytes(case.keyring)
        keys = {f"key{n}": OpenPGPKey.from_armored(str(c).encode()) for n, c in enumerate(certificates)}
        verify_detached(case.data, case.signature, keys)
    except TrtguardError:
        return False
    return True


def trtguard_cli(case: Case, folder: Path) -> bool:
    """``trtguard verify-openpgp --keyring KEYRING SIG FILE``: exit 0."""
    from trtguard.cli import main  # noqa: PLC0415 - only on checkouts that have the command

    keyring, signature, data = _files(case, folder)
    return main(["verify-openpgp", "--keyring", str(keyring), str(signature), str(data)]) == 0


#: The references, and whether each is installed here.
REFERENCES: dict[str, tuple[Verifier, Callable[[], bool]]] = {
    "gpgv": (gpgv, lambda: shutil.which("gpgv") is not None),
    "sqv": (sqv, lambda: shutil.which("sqv") is not None),
    "sq": (sq, lambda: shutil.which("sq") is not None),
    "PGPy": (pgpy, lambda: _importable("pgpy")),
}


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@dataclass
class Tally:
    """trtguard against one reference (or against the expected verdicts)."""

    cases: int = 0
    agree: int = 0
    false_accepts: list[str] = field(default_factory=list)  # trtguard verified, the other did not
    false_rejects: list[str] = field(default_factory=list)  # the other verified, trtguard did not


def tally(cases: Iterable[Case], trtguard: dict[str, bool], other: dict[str, bool]) -> Tally:
    """Compare trtguard's verdicts with another set, case by case (keyed by case name)."""
    result = Tally()
    for case in cases:
        result.cases += 1
        mine, theirs = trtguard[case.name], other[case.name]
        if mine == theirs:
            result.agree += 1
        elif mine:
            result.false_accepts.append(case.name)
        else:
            result.false_rejects.append(case.name)
    return result


def run_all(cases: list[Case], verifier: Verifier, scratch: Path) -> dict[str, bool]:
    """``verifier``'s verdict on every case (each in its own folder under ``scratch``)."""
    return {case.name: verifier(case, scratch / f"case{n}") for n, case in enumerate(cases)}
