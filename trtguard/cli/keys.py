"""``trtguard keygen``, ``trtguard attest`` and ``trtguard verify-attestation``: their options; the shared
password and output options.

Other commands that open a private key reuse :func:`add_password_arguments` and :func:`read_password`, so
that every command takes the password the same way: ``--password-file FILE``, else ``TRTGUARD_PASSWORD``,
else ``COSIGN_PASSWORD``, else an interactive prompt when standard input is a terminal. Never from argv.
What the commands do is in :mod:`trtguard.cli.keys_commands`, imported only when one of them runs, so that
``trtguard keygen --help`` loads no cryptography, DSSE or registry code.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from trtguard.cli._args import add_clock_argument, add_registry_arguments
from trtguard.cli._commands import Subparsers, add_command, deferred
from verifier.base import InputError

_PASSWORD_VARIABLES = ("TRTGUARD_PASSWORD", "COSIGN_PASSWORD")


def add_password_arguments(parser: argparse._ActionsContainer) -> None:
    """Add ``--password-file`` to a command that needs a private key password."""
    parser.add_argument(
        "--password-file",
        type=Path,
        metavar="FILE",
        help="file holding the key password (one trailing newline is ignored); "
        "default: $TRTGUARD_PASSWORD, then $COSIGN_PASSWORD, then a prompt",
    )


def read_password(
    args: argparse.Namespace, *, confirm: bool = False, environ: Mapping[str, str] | None = None
) -> bytes:
    """The password from ``args.password_file``, the environment or a terminal prompt.

    An empty environment variable is an empty password (cosign's convention), not an absent one. With
    ``confirm`` the prompt asks twice. Raises :class:`InputError` when no source is available.
    """
    path: Path | None = getattr(args, "password_file", None)
    if path is not None:
        try:
            text = path.read_bytes()
        except OSError as error:
            raise InputError(
                f"cannot read the password file: {error.strerror}", location=str(path)
            ) from error
        return text.removesuffix(b"\n").removesuffix(b"\r")
    env = os.environ if environ is None else environ
    for variable in _PASSWORD_VARIABLES:
        if variable in env:
            return env[variable].encode()
    if sys.stdin.isatty():
        first = getpass.getpass("Password for the private key: ")
        if confirm and getpass.getpass("Repeat the password: ") != first:
            raise InputError("the two passwords differ")
        return first.encode()
    raise InputError(
        "no password given for the private key",
        hint="use --password-file FILE or set TRTGUARD_PASSWORD (or COSIGN_PASSWORD); "
        "an empty variable means an empty password",
    )


def _check_uri(value: str) -> str:
    if not urlparse(value).scheme:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a URI (expected e.g. https://example.com/type/v1)"
        )
    return value


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--output``, ``--push`` and the registry options for commands that write an envelope."""
    parser.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write here instead of standard output"
    )
    parser.add_argument(
        "--push", metavar="REF", help="also attach it to this image or engine artifact in its registry"
    )
    add_registry_arguments(parser)


def register(subparsers: Subparsers) -> None:
    """Add ``keygen``, ``attest`` and ``verify-attestation``."""
    keygen = add_command(
        subparsers,
        "keygen",
        description="Write PREFIX.key (cosign 'ENCRYPTED SIGSTORE PRIVATE KEY', mode 0600) and PREFIX.pub.",
    )
    keygen.add_argument("--output", required=True, metavar="PREFIX", help="path prefix of the two files")
    keygen.add_argument("--force", action="store_true", help="overwrite existing files")
    add_password_arguments(keygen)
    keygen.set_defaults(handler=deferred("trtguard.cli.keys_commands", "keygen"))

    attest = add_command(
        subparsers,
        "attest",
        description="Build an in-toto Statement v1 (subject: the file's name and sha256), sign it with DSSE.",
    )
    attest.add_argument("--predicate", required=True, type=Path, metavar="FILE", help="predicate JSON object")
    attest.add_argument("--type", required=True, type=_check_uri, metavar="URI", help="predicate type URI")
    attest.add_argument("--subject", required=True, type=Path, metavar="FILE", help="the file attested")
    attest.add_argument("--subject-name", metavar="NAME", help="subject name (default: the file name)")
    attest.add_argument("--key", required=True, type=Path, metavar="KEY", help="private key file")
    add_output_arguments(attest)
    add_password_arguments(attest)
    attest.set_defaults(handler=deferred("trtguard.cli.keys_commands", "attest"))

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
    verify.add_argument("--type", type=_check_uri, metavar="URI", help="required predicate type")
    add_clock_argument(verify)  # a DSSE envelope signed with keys has no time in it to judge
    verify.set_defaults(handler=deferred("trtguard.cli.keys_commands", "verify_attestation_command"))
