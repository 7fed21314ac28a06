"""``trtguard verify-attestation``: verify a DSSE attestation envelope against trusted public keys."""

from __future__ import annotations

from pathlib import Path

from trtguard.cli._args import add_clock_argument
from trtguard.cli._commands import Subparsers, add_command, deferred
from trtguard.cli._keys import check_uri


def register(subparsers: Subparsers) -> None:
    """Add ``verify-attestation``; what it does is in :mod:`trtguard.cli._key_commands`, loaded when it runs
    (its ``--help`` loads no cryptography)."""
    verify = add_command(
        subparsers,
        "verify-attestation",
        description="Check signatures, payload type and, when asked, predicate type and subject digest. "
        "Exit 0 verified, 1 verification failed, 2 unusable input.",
    )
    verify.add_argument("envelope", type=Path, metavar="ENVELOPE", help="DSSE envelope JSON file")
    verify.add_argument(
        "--key",
        required=True,
        type=Path,
        action="append",
        metavar="PUB",
        help="trusted public key (repeatable)",
    )
    verify.add_argument("--threshold", type=int, default=1, help="distinct keys that must have signed")
    verify.add_argument("--subject", type=Path, metavar="FILE", help="file whose sha256 must be a subject")
    verify.add_argument("--type", type=check_uri, metavar="URI", help="required predicate type")
    add_clock_argument(verify)  # a DSSE envelope signed with keys has no time in it to judge
    verify.set_defaults(handler=deferred("trtguard.cli._key_commands", "verify_attestation_command"))
