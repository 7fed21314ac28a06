"""OpenPGP conformance (issue 25): signatures made by Debian's gpg, trtguard's verdict on each beside gpgv's,
sqv's, sq's and PGPy's. trtguard must give every expected verdict; each reference's disagreements with those
verdicts are exactly the ones docs/signatures.md lists (so that a changed tool, or a changed case, shows)."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from tests.support import openpgp_conformance as conformance
from tests.support.availability import unavailable
from tests.support.gpg import GnuPG

_REVOKED_OR_EXPIRED = {
    "key expired, signed after",
    "key revoked (no reason), signed before",
    "key revoked (no reason), signed after",
    "key revoked (no reason), in a keyring of two",
    "key revoked (compromised), signed before",
    "key revoked (compromised), signed after",
    "key revoked (compromised), in a keyring of two",
    "key revoked (superseded), signed after",
    "key revoked (superseded), in a keyring of two",
    "key revoked (retired), signed after",
    "key revoked (retired), in a keyring of two",
    "subkey revoked (compromised), signed before",
    "subkey revoked (compromised), signed after",
    "subkey revoked (retired), signed after",
    "subkey expired, signed after",
}
_TEXT_MODE = {"text-mode signature, LF bytes", "text-mode signature, CRLF bytes"}
# Issue 25, D2: a signature whose hashed issuer is another certificate of the keyring claims another trusted
# signer and does not count; gpgv refuses these too (it checks with the key the hashed issuer names), Sequoia
# takes any issuer subpacket that names the signer (sqv, sq, and trtguard before).
_RIVAL_HASHED_ISSUER = {
    "hashed fingerprint another's, unhashed key ID the signer's, keyring of both",
    "hashed key ID another's, unhashed fingerprint the signer's, keyring of both",
    "hashed fingerprints of another key and of the signer, keyring of both",
}

#: Where each reference's verdict is not the expected one (docs/signatures.md, "OpenPGP conformance").
REFERENCE_DIFFERENCES = {
    # gpgv exits 0 for a key revoked or expired (status REVKEYSIG/EXPKEYSIG), SHA-1, a signature from the
    # future; it judges key usage by the newest binding, not the one in force when the signature was made.
    "gpgv": _REVOKED_OR_EXPIRED
    | _TEXT_MODE
    | {"rsa3072 SHA-1", "signature made a year from now", "subkey signing-capable when it signed, not since"}
    | {
        # gpgv looks the key up by the first hashed issuer fingerprint or key ID only, and ignores unhashed
        # fingerprints: a signature whose hashed issuer is absent from the keyring fails there.
        "hashed fingerprint another's, unhashed fingerprint the signer's",
        "hashed fingerprints of another key and of the signer",
        "hashed key ID another's, unhashed fingerprint the signer's",
        "unhashed fingerprint the signer's, unhashed key ID another's",
    },
    # sqv counts one good signature as enough and leaves the others out, and reads one armor block.
    "sqv": _TEXT_MODE
    | _RIVAL_HASHED_ISSUER
    | {
        "two armor blocks, the second bad",
        "one good and one bad signature",
        "one bad and one good signature",
        "one good signature and one by an unknown key",
    },
    # sq verify wants one good signature; a bad one counts against it, one it cannot check does not; it
    # reads one armor block.
    "sq": _TEXT_MODE
    | _RIVAL_HASHED_ISSUER
    | {"one good signature and one by an unknown key", "two armor blocks, the second bad"},
    # PGPy checks no revocation, binding or signature time, accepts SHA-1, reads the first signature; it
    # gets a key's expiry backwards (refuses the signatures made before it, accepts a subkey's after it).
    "PGPy": (_REVOKED_OR_EXPIRED - {"key expired, signed after"})
    | _TEXT_MODE
    | {
        "rsa3072 SHA-1",
        "binary signature, trailing garbage",
        "two armor blocks, the second bad",
        "one good and one bad signature",
        "one good signature and one by an unknown key",
        "key expired since, signed before",
        "signature made a year from now",
        "signature expired",
        "signature older than the key",
        "subkey not signing-capable when it signed",
        "subkey bound (for signing) only after it signed",
        "primary key made certify-only before it signed",
        # PGPy checks with the key the first issuer subpacket names, hashed or not
        "hashed fingerprint another's, unhashed fingerprint the signer's",
        "hashed fingerprint another's, unhashed key ID the signer's, keyring of both",
        "hashed fingerprint the signer's, unhashed key ID another's",
        "hashed fingerprints of another key and of the signer",
        "hashed key ID another's, unhashed fingerprint the signer's",
        "unhashed fingerprint the signer's, unhashed key ID another's",
    },
}

#: A policy counts the valid signatures of a file (as of a DSSE envelope); the command line wants all.
_POLICY_COUNTS_VALID_ONES = {
    "two armor blocks, the second bad",
    "one good and one bad signature",
    "one bad and one good signature",
    "one good signature and one by an unknown key",
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> list[conformance.Case]:
    if shutil.which("gpg") is None:
        unavailable("the gpg binary is not installed (Debian package gpg)")
    scratch = tmp_path_factory.mktemp("openpgp-conformance")
    home = scratch / "gnupg"
    home.mkdir(mode=0o700)
    return conformance.make_cases(GnuPG(home), scratch)


def _wrong(cases: list[conformance.Case], verdicts: dict[str, bool]) -> set[str]:
    return {case.name for case in cases if verdicts[case.name] != case.valid}


def test_the_cases_cover_what_the_issue_lists(cases: list[conformance.Case]) -> None:
    areas = {case.area for case in cases}
    assert areas == {"key types", "encodings", "time", "revocations", "subkeys", "text mode", "issuers"}
    names = " ".join(case.name for case in cases)
    for needed in ("ed25519", "nistp256", "nistp384", "rsa3072", "binary keyring", "keyring of two"):
        assert needed in names
    assert len({case.name for case in cases}) == len(cases)


def test_verify_openpgp_gives_every_expected_verdict(cases: list[conformance.Case], tmp_path: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        verdicts = conformance.run_all(cases, conformance.trtguard_cli, tmp_path)
    assert _wrong(cases, verdicts) == set()


def test_a_policy_counts_the_valid_signatures_of_a_file(
    cases: list[conformance.Case], tmp_path: Path
) -> None:
    verdicts = conformance.run_all(cases, conformance.trtguard_library, tmp_path)
    assert _wrong(cases, verdicts) == _POLICY_COUNTS_VALID_ONES


@pytest.mark.parametrize("reference", sorted(REFERENCE_DIFFERENCES))
def test_each_reference_differs_where_documented(
    cases: list[conformance.Case], tmp_path: Path, reference: str
) -> None:
    verify, available = conformance.REFERENCES[reference]
    if not available():
        unavailable(f"{reference} is not installed (Debian packages gpgv, sqv, sq; PGPy in the dev lock)")
    assert _wrong(cases, conformance.run_all(cases, verify, tmp_path)) == REFERENCE_DIFFERENCES[reference]
