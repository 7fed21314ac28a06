"""``trtguard attest``: sign an in-toto statement about a file as a DSSE envelope."""

from __future__ import annotations

from pathlib import Path

from trtguard.cli._commands import Subparsers, add_command, deferred
from trtguard.cli._keys import add_output_arguments, add_password_arguments, check_uri


def register(subparsers: Subparsers) -> None:
    """Add ``attest``; what it does is in :mod:`trtguard.cli._key_commands`, loaded when it runs
    (its ``--help`` loads no cryptography)."""
    attest = add_command(
        subparsers,
        "attest",
        description="Build an in-toto Statement v1 (subject: the file's name and sha256), sign it with DSSE.",
    )
    attest.add_argument("--predicate", required=True, type=Path, metavar="FILE", help="predicate JSON object")
    attest.add_argument("--type", required=True, type=check_uri, metavar="URI", help="predicate type URI")
    attest.add_argument("--subject", required=True, type=Path, metavar="FILE", help="the file attested")
    attest.add_argument("--subject-name", metavar="NAME", help="subject name (default: the file name)")
    attest.add_argument("--key", required=True, type=Path, metavar="KEY", help="private key file")
    add_output_arguments(attest)
    add_password_arguments(attest)
    attest.set_defaults(handler=deferred("trtguard.cli._key_commands", "attest"))
