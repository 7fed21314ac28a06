"""``trtguard keygen``: generate an ECDSA P-256 key pair (cosign-compatible encrypted private key)."""

from __future__ import annotations

from trtguard.cli._commands import Subparsers, add_command, deferred
from trtguard.cli._keys import add_password_arguments


def register(subparsers: Subparsers) -> None:
    """Add ``keygen``; what it does is in :mod:`trtguard.cli._key_commands`, loaded when it runs
    (its ``--help`` loads no cryptography)."""
    keygen = add_command(
        subparsers,
        "keygen",
        description="Write PREFIX.key (cosign 'ENCRYPTED SIGSTORE PRIVATE KEY', mode 0600) and PREFIX.pub.",
    )
    keygen.add_argument("--output", required=True, metavar="PREFIX", help="path prefix of the two files")
    keygen.add_argument("--force", action="store_true", help="overwrite existing files")
    add_password_arguments(keygen)
    keygen.set_defaults(handler=deferred("trtguard.cli._key_commands", "keygen"))
