"""The password and output options that ``trtguard keygen``, ``attest``, ``verify-attestation`` and every
command that opens a private key share.

Commands that open a private key reuse :func:`add_password_arguments` and :func:`read_password`, so that
every command takes the password the same way: ``--password-file FILE``, else ``TRTGUARD_PASSWORD``, else
``COSIGN_PASSWORD``, else an interactive prompt when standard input is a terminal. Never from argv. What the
key commands do is in :mod:`trtguard.cli._key_commands`, imported only when one of them runs, so that
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

from trtguard.cli._args import add_registry_arguments
from verifier.base import InputError

_PASSWORD_VARIABLES = ("TRTGUARD_PASSWORD", "COSIGN_PASSWORD")


def add_password_arguments(parser: argparse._ActionsContainer, *, key: str = "key") -> None:
    """Add ``--password-file`` to a command that needs a private key password (``key``: which key, in the
    help of a command that takes several)."""
    parser.add_argument(
        "--password-file",
        type=Path,
        metavar="FILE",
        help=f"file holding the {key} password (one trailing newline is ignored); "
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


def check_uri(value: str) -> str:
    """``value`` if it is a URI (it has a scheme), for ``--type``; else an argparse error."""
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
