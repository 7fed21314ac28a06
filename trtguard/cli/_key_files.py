"""Opening the key files that commands name: a private key with the password of :func:`read_password`, a
PEM public key; errors name the file.

Apart from :mod:`trtguard.cli._key_commands` so that the registry commands (:mod:`trtguard.cli._registry`),
which the key commands use to push an envelope, open keys without importing them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trtguard.cli._keys import read_password
from verifier.base import TrtguardError, read_limited
from verifier.crypto import PrivateKey, PublicKey, load_private_key


def load_signing_key(path: Path, args: argparse.Namespace) -> PrivateKey:
    """Open the private key at ``path`` with the password from :func:`read_password`."""
    data = read_limited(path, "the private key")
    try:
        return load_private_key(data, read_password(args))
    except TrtguardError as error:
        error.location = error.location or str(path)
        raise


def load_public_key(path: Path) -> PublicKey:
    """Read a PEM public key file, naming the file in errors."""
    try:
        return PublicKey.from_pem(read_limited(path, "the public key"))
    except TrtguardError as error:
        error.location = error.location or str(path)
        raise
