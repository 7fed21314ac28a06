"""``trtguard verify-openpgp``: a detached OpenPGP signature over a file, checked with a keyring, as gpgv::

    verify-openpgp --keyring KEYRING [--keyring KEYRING...] [--format text|json] SIGNATURE FILE

The keyring is what ``gpg --export`` writes (armored or binary, one certificate or several). As with
``gpgv``, every signature in SIGNATURE must be a valid one by a certificate of the keyrings; unlike ``gpgv``,
OpenPGP's rules on revocation, expiry, key usage and signature times decide, SHA-1 is refused and so are
text-mode signatures (docs/signatures.md, "OpenPGP signatures", has the list and the differences measured
against gpgv, sqv, sq and PGPy). Exit 0 verified; 1 not verified (which includes a SIGNATURE file that is not
a detached signature); 2 unusable input (a keyring or file that cannot be read). The check is at the current
time, or at ``--now`` (for audits and tests: a signature must be alive then; one whose lifetime excludes
the real clock cannot be judged at another time, since Sequoia judges at the real clock, and fails).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from trtguard.cli._args import add_clock_argument
from trtguard.cli._commands import Subparsers, add_command
from verifier.base import InputError, VerificationError, read_limited
from verifier.signatures import (
    MAX_SIGNATURE_BYTES,
    OpenPGPKey,
    SignatureCheck,
    check_signatures,
    keyring_of,
    not_verified,
    read_keyring,
)


def _keyrings(paths: list[Path]) -> dict[str, OpenPGPKey]:
    found: list[OpenPGPKey] = []
    for path in paths:
        data = read_limited(_readable(path, "the keyring"), "the keyring")
        found += read_keyring(data, location=str(path)).values()
    return keyring_of(found)  # a certificate in two keyrings: both copies' revocations and bindings


def _readable(path: Path, what: str) -> Path:
    # A regular file first: opening a FIFO would wait for a writer.
    if path.exists() and not path.is_file():
        raise InputError(f"cannot read {what}: not a regular file", location=str(path))
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise InputError(f"cannot read {what}: {error.strerror}", location=str(path)) from error
    return path


def _when(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _signature_json(check: SignatureCheck) -> dict[str, Any]:
    return {
        "issuer": check.issuer,
        "created": _when(check.created),
        "hashAlgorithm": check.hash_algorithm,
        "keyAlgorithm": check.key_algorithm,
        "verified": bool(check.signers),
        "signedBy": list(check.signers),
    }


def _text(args: argparse.Namespace, checks: tuple[SignatureCheck, ...], reason: str | None) -> str:
    lines = [f"{'Verified OK' if reason is None else 'NOT verified'}: {args.file}"]
    for number, check in enumerate(checks, 1):
        verdict = f"good, by {', '.join(check.signers)}" if check.signers else "NOT valid"
        lines.append(
            f"  signature {number} of {len(checks)}: {verdict} (issuer {check.issuer}, made "
            f"{_when(check.created)}, {check.key_algorithm} over {check.hash_algorithm})"
        )
    if reason is not None:
        lines.append(f"  reason: {reason}")
    return "\n".join(lines)


def _verify_openpgp(args: argparse.Namespace) -> int:
    keys = _keyrings(args.keyring)
    data = _readable(args.file, "the signed file")
    signature = read_limited(
        _readable(args.signature, "the OpenPGP signature"), "the OpenPGP signature", limit=MAX_SIGNATURE_BYTES
    )
    checks: tuple[SignatureCheck, ...] = ()
    reason = None
    try:
        checks = check_signatures(data, signature, keys, now=args.now)
        if not all(check.signers for check in checks):
            raise not_verified(checks, keys, now=args.now)
    except VerificationError as error:
        reason = error.message
    if args.format == "json":
        document = {
            "verified": reason is None,
            "file": str(args.file),
            "signature": str(args.signature),
            "signatures": [_signature_json(check) for check in checks],
            "signers": sorted({name for check in checks for name in check.signers}),
            "reason": reason,
        }
        print(json.dumps(document, indent=2))
    else:
        print(_text(args, checks, reason))
    return 0 if reason is None else 1


def register(subparsers: Subparsers) -> None:
    """Add ``verify-openpgp``."""
    parser = add_command(
        subparsers,
        "verify-openpgp",
        description="Verify a detached OpenPGP signature (armored or binary, one signature or several) over "
        "a file with a keyring, as `gpgv --keyring KEYRING SIGNATURE FILE` does: every signature must be a "
        "valid one by a certificate of the keyrings. OpenPGP's rules decide where gpgv is lenient: a "
        "revoked or expired key, a subkey not for signing, a signature from the future or expired, SHA-1 and "
        "text-mode signatures fail. Exit 0 verified, 1 not verified, 2 unusable input.",
    )
    parser.add_argument(
        "--keyring",
        type=Path,
        action="append",
        required=True,
        metavar="KEYRING",
        help="the signers' certificates (`gpg --export FINGERPRINT... > keyring.gpg`, armored or binary); "
        "may be given more than once",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    add_clock_argument(parser, judged="signature creation and expiry times and key states")
    parser.add_argument("signature", type=Path, metavar="SIGNATURE", help="the detached signature file")
    parser.add_argument("file", type=Path, metavar="FILE", help="the signed file")
    parser.set_defaults(handler=_verify_openpgp)
