"""Content digests: parsing ``sha256:<hex>`` strings and streaming SHA-256 of files."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from verifier.base._errors import InputError

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# Reading in large blocks into one reused buffer keeps memory flat and lets hashlib run without the GIL.
_BLOCK = 4 * 1024 * 1024

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while a file is hashed."""


@dataclass(frozen=True, slots=True)
class FileDigest:
    """SHA-256 and size of a file's bytes."""

    sha256: str
    size: int

    @property
    def digest(self) -> str:
        """The ``sha256:<hex>`` form used by OCI and in-toto."""
        return f"sha256:{self.sha256}"


def is_sha256_hex(value: str) -> bool:
    """True when ``value`` is 64 lower-case hexadecimal characters."""
    return _SHA256_HEX.fullmatch(value) is not None


def parse_sha256(value: str, *, what: str = "digest") -> str:
    """Return the hex part of ``sha256:<hex>`` or a bare 64-character hex string.

    Raises :class:`InputError` for anything else (other algorithms, upper case, wrong length).
    """
    hex_part = value.removeprefix("sha256:")
    if not is_sha256_hex(hex_part):
        raise InputError(
            f"{what} {value!r} is not a SHA-256 digest",
            hint="expected 'sha256:' followed by 64 lower-case hexadecimal characters",
        )
    return hex_part


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def hash_file(path: Path, *, progress: ProgressCallback | None = None) -> FileDigest:
    """Stream ``path`` through SHA-256 with a fixed-size buffer (memory stays flat whatever the size)."""
    hasher = hashlib.sha256()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    done = 0
    with path.open("rb", buffering=0) as stream:
        total = path.stat().st_size
        while True:
            count = stream.readinto(buffer)
            if not count:
                break
            hasher.update(view[:count])
            done += count
            if progress is not None:
                progress(done, total)
    return FileDigest(sha256=hasher.hexdigest(), size=done)
