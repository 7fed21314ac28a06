"""Compare the OpenPGP verifiers on PyPI for trtguard: correctness on what verifiers get wrong, then speed.

Run from the repository root (needs the ``gpg`` binary, which makes every signature)::

    .venv/bin/python bench/openpgp_candidates.py
    .venv/bin/python bench/openpgp_candidates.py --iterations 500

Candidates: ``pysequoia`` (Sequoia-PGP's binding, the one trtguard uses), ``PGPy`` (pure Python) and
``python-gnupg`` (drives the ``gpg`` binary and reads its status lines; a fresh keyring per check, as a
verifier that trusts only the keys a policy names must have); ``trtguard`` is ``verifier.signatures._openpgp``
(pysequoia, and text-mode signatures refused). Each case is a detached signature made by
real ``gpg`` at a chosen time, checked against the signer's certificate as a policy file would hold it.
A candidate that is not installed is listed as missing (``pip install pgpy python-gnupg``).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.gpg import GnuPG

T0 = datetime(2024, 1, 1, tzinfo=UTC)
DATA = b'{"_type": "https://in-toto.io/Statement/v1", "subject": []}\n'


@dataclass(frozen=True)
class Case:
    name: str
    certificate: bytes
    signature: bytes
    data: bytes
    valid: bool  # what OpenPGP (RFC 9580) and trtguard's policy say


def make_cases(gpg: GnuPG) -> list[Case]:
    """Every case of issue 19's list, signed by gpg."""
    cases = []
    hour, day = timedelta(hours=1), timedelta(days=1)
    for algorithm in ("ed25519", "nistp256", "rsa3072"):
        key = gpg.generate(f"{algorithm} <{algorithm}@example.com>", algorithm, at=T0)
        signature = gpg.sign(DATA, key, at=T0 + hour)
        cases.append(Case(f"good {algorithm}", gpg.export(key), signature, DATA, True))
        cases.append(Case(f"tampered {algorithm}", gpg.export(key), signature, DATA + b" ", False))
    other = gpg.generate("other <other@example.com>", "ed25519", at=T0)
    cases.append(Case("another key", gpg.export(other), cases[0].signature, DATA, False))
    expiring = gpg.generate("expiring <expiring@example.com>", "ed25519", at=T0, expires="1d")
    before = gpg.sign(DATA, expiring, at=T0 + hour)
    cases.append(Case("signed before the key expired", gpg.export(expiring), before, DATA, True))
    late = gpg.generate("late <late@example.com>", "ed25519", at=T0)
    after = gpg.sign(DATA, late, at=T0 + 2 * day)
    gpg.set_expiry(late, T0 + day, at=T0 + 2 * hour)
    cases.append(Case("signed after the key expired", gpg.export(late), after, DATA, False))
    for reason, what, hard in ((1, "compromised", True), (2, "superseded", False)):
        key = gpg.generate(f"{what} <{what}@example.com>", "ed25519", at=T0)
        early, later = gpg.sign(DATA, key, at=T0 + hour), gpg.sign(DATA, key, at=T0 + 2 * day)
        gpg.revoke(key, at=T0 + day, reason=reason)
        cases.append(Case(f"{what} key, signed before", gpg.export(key), early, DATA, not hard))
        cases.append(Case(f"{what} key, signed after", gpg.export(key), later, DATA, False))
    sha1 = gpg.generate("sha1 <sha1@example.com>", "rsa3072", at=T0)
    cases.append(
        Case(
            "SHA-1 signature",
            gpg.export(sha1),
            gpg.sign(DATA, sha1, at=T0 + hour, digest="SHA1"),
            DATA,
            False,
        )
    )
    primary = gpg.generate("subkey <subkey@example.com>", "ed25519", at=T0, usage="cert")
    subkey = gpg.add_subkey(primary, "ed25519", at=T0)
    by_subkey = gpg.sign(DATA, subkey, at=T0 + hour)
    cases.append(Case("signing subkey, certify-only primary", gpg.export(primary), by_subkey, DATA, True))
    late_subkey = gpg.sign(DATA, subkey, at=T0 + 2 * day)
    gpg.revoke_subkey(primary, 1, at=T0 + day, reason=1)
    cases.append(Case("compromised subkey", gpg.export(primary), late_subkey, DATA, False))
    text = gpg.generate("text <text@example.com>", "ed25519", at=T0)
    textmode = gpg.sign(DATA, text, at=T0 + hour, textmode=True)
    cases.append(
        Case("text mode, CRLF bytes", gpg.export(text), textmode, DATA.replace(b"\n", b"\r\n"), False)
    )
    return cases


def _sequoia() -> Callable[[Case], bool]:
    pysequoia = importlib.import_module("pysequoia")

    def verify(case: Case) -> bool:
        cert = pysequoia.Cert.from_bytes(case.certificate)
        signature = pysequoia.Sig.from_bytes(case.signature)
        try:
            pysequoia.verify(bytes=case.data, store=lambda _ids: [cert], signature=signature)
        except RuntimeError:
            return False
        return True

    return verify


def _pgpy() -> Callable[[Case], bool]:
    pgpy = importlib.import_module("pgpy")

    def verify(case: Case) -> bool:
        key, _ = pgpy.PGPKey.from_blob(case.certificate)
        try:
            return bool(key.verify(case.data, pgpy.PGPSignature.from_blob(case.signature)))
        except Exception:  # PGPy raises several unrelated types
            return False

    return verify


def _gnupg() -> Callable[[Case], bool]:
    gnupg = importlib.import_module("gnupg")

    def verify(case: Case) -> bool:
        with tempfile.TemporaryDirectory() as home:
            gpg = gnupg.GPG(gnupghome=home)
            gpg.import_keys(case.certificate)
            signature = Path(home) / "signature.asc"
            signature.write_bytes(case.signature)
            return bool(gpg.verify_data(str(signature), case.data).valid)

    return verify


def _trtguard() -> Callable[[Case], bool]:
    openpgp = importlib.import_module("verifier.signatures._openpgp")
    errors = importlib.import_module("verifier.base._errors")

    def verify(case: Case) -> bool:
        keys = {"key": openpgp.OpenPGPKey.from_armored(case.certificate)}
        try:
            openpgp.verify_detached(case.data, case.signature, keys)
        except errors.VerificationError:
            return False
        return True

    return verify


CANDIDATES = {
    "pysequoia": ("pysequoia", _sequoia),
    "PGPy": ("pgpy", _pgpy),
    "python-gnupg": ("gnupg", _gnupg),
    # What trtguard adds on top of pysequoia: text-mode signatures refused.
    "trtguard": ("verifier.signatures._openpgp", _trtguard),
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # PGPy warns on every call that it skips revocation and self-sig checks
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "gnupg"
        home.mkdir(mode=0o700)
        cases = make_cases(GnuPG(home))
    verifiers = {}
    for name, (module, make) in CANDIDATES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            print(f"{name}: not installed")
            continue
        verifiers[name] = make()
    print(f"{'case':<40} {'expected':<9}" + "".join(f"{name:<14}" for name in verifiers))
    wrong = dict.fromkeys(verifiers, 0)
    for case in cases:
        row = f"{case.name:<40} {'valid' if case.valid else 'invalid':<9}"
        for name, verify in verifiers.items():
            got = verify(case)
            wrong[name] += got != case.valid
            row += f"{('valid' if got else 'invalid') + ('' if got == case.valid else ' WRONG'):<14}"
        print(row)
    print("wrong answers: " + ", ".join(f"{name} {count}" for name, count in wrong.items()))
    good = cases[0]
    for name, verify in verifiers.items():
        runs = []
        for _ in range(max(1, args.iterations if name != "python-gnupg" else args.iterations // 10)):
            start = time.perf_counter()
            verify(good)
            runs.append(time.perf_counter() - start)
        print(f"{name}: {statistics.median(runs) * 1e3:.2f} ms per verification (median of {len(runs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
