"""The evidence package container: a reproducible tar.gz, written in one pass and read back defensively.

Why tar.gz rather than zip: a tar stream has one directory of members (its headers, in order), where zip has
two that can disagree (local headers and the central directory, the root of several parser-differential
attacks on signed zips); with fixed times, owners and member order the same package always compresses to the
same bytes; one gzip stream over many similar JSON records compresses them together (the stream is written in
segments, a member's data apart from the tar framing, so that the records deflate on a thread while the log is
verified: ``_deflate``); and every auditor's
machine lists it with ``tar -tzvf``. Random access, zip's advantage, is of no use: ``verify`` reads every
member anyway.

Reading never extracts to disk. The whole gzip stream is read, so that its trailer (CRC-32 and length) is
checked, and nothing but padding may follow the tar archive's end; the gzip header's own fields (time,
operating system) and the compression itself are not checked, and the evidence package's signature covers
the files, not these bytes. Members are read into memory under :class:`ArchiveLimits`; the decompressed
stream itself is capped, so that a gzip bomb, a huge pax header or a billion tiny members cost bounded memory
and time. Only regular files with plain relative names are accepted: no links, devices, directories, sparse
files, absolute paths, ``..`` components or duplicate names.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import struct
import tarfile
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from trtguard.audit.package._deflate import Deflated, crc32_combine, deflate
from verifier.base import InputError

#: Longest member name accepted (bytes of ASCII).
MAX_NAME: Final = 512


#: A member's content: its bytes, or their deflate segment (the decision records of a large export).
Member = bytes | Deflated


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Bounds on a package read back; the defaults fit a full decision log of about a million records."""

    max_archive_bytes: int = 1 << 30
    max_total_bytes: int = 2 << 30
    max_member_bytes: int = 1 << 30
    max_members: int = 10_000


class UnsafeArchive(InputError):
    """The file is not a package this program will read: damaged, not tar.gz, hostile or over a limit."""


def check_name(name: str, *, location: str) -> str:
    """``name`` if it is a safe relative member name; raises :class:`UnsafeArchive` otherwise.

    Printable ASCII only (no backslash), ``/``-separated, no empty, ``.`` or ``..`` component.
    """
    problem = None
    if not name or len(name) > MAX_NAME:
        problem = f"a name of 1 to {MAX_NAME} characters"
    elif not all(" " <= char <= "~" and char != "\\" for char in name):
        problem = "printable ASCII without backslashes"
    elif name.startswith("/"):
        problem = "a relative path (it is absolute)"
    elif any(part in ("", ".", "..") for part in name.split("/")):
        problem = "a path without empty, '.' or '..' components"
    if problem is not None:
        raise UnsafeArchive(
            f"member name {name!r} is not {problem}",
            location=location,
            hint="the archive was not written by `trtguard evidence export`; do not extract it",
        )
    return name


def write_archive(path: Path, members: Iterable[tuple[str, Member]], *, mtime: int, overwrite: bool) -> int:
    """Write ``members`` (in the given order) as a reproducible tar.gz; returns the archive's size.

    The archive appears under ``path`` only once complete (written beside it, then renamed).
    """
    refuse_overwrite(path, overwrite)
    directory = path.parent if str(path.parent) else Path()
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=directory)
    except OSError as error:
        raise InputError(f"cannot write the archive: {error.strerror}", location=str(path)) from error
    try:
        with os.fdopen(descriptor, "wb") as raw:
            _write_tar_gz(raw, members, mtime, str(path))
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(temporary, 0o644)  # noqa: PTH101 - mkstemp made it 0600; a package is meant to be shared
        Path(temporary).replace(path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)  # noqa: PTH108
        if isinstance(error, OSError):  # a full disk, or -o naming a folder: no traceback, no partial file
            raise InputError(f"cannot write the archive: {error.strerror}", location=str(path)) from None
        raise
    return path.stat().st_size


def _write_tar_gz(raw: IO[bytes], members: Iterable[tuple[str, Member]], mtime: int, location: str) -> None:
    """The tar stream of ``members`` (the bytes ``tarfile`` writes in PAX format) as gzip, in segments
    (``_deflate``): the framing since the previous member's data, then each member's data on its own."""
    # The gzip header (RFC 1952): deflate, no flags (so no file name), the time, no extra flags, OS unknown.
    raw.write(b"\x1f\x8b\x08\x00" + struct.pack("<I", mtime) + b"\x00\xff")
    crc, size = 0, 0
    framing = b""
    for name, data in members:
        info = tarfile.TarInfo(check_name(name, location=location))
        info.mtime = mtime
        info.mode = 0o644
        info.size = data.size if isinstance(data, Deflated) else len(data)
        framing += info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
        segment, segment_crc = deflate(framing)
        raw.write(segment)
        crc, size = crc32_combine(crc, segment_crc, len(framing)), size + len(framing)
        if isinstance(data, Deflated):
            data.file.seek(0)
            shutil.copyfileobj(data.file, raw)
            segment_crc = data.crc32
        else:
            segment, segment_crc = deflate(data)
            raw.write(segment)
        crc, size = crc32_combine(crc, segment_crc, info.size), size + info.size
        framing = tarfile.NUL * (-info.size % tarfile.BLOCKSIZE)  # the data padded to whole blocks
    # The archive's end, two zero blocks, padded to a whole record as tarfile pads it.
    framing += tarfile.NUL * (2 * tarfile.BLOCKSIZE)
    framing += tarfile.NUL * (-(size + len(framing)) % tarfile.RECORDSIZE)
    segment, segment_crc = deflate(framing, last=True)
    raw.write(segment)
    crc, size = crc32_combine(crc, segment_crc, len(framing)), size + len(framing)
    raw.write(struct.pack("<II", crc, size & 0xFFFFFFFF))


def refuse_overwrite(path: Path, overwrite: bool) -> None:
    """Raise :class:`InputError` when ``path`` exists and may not be replaced."""
    if path.exists() and not overwrite:
        raise InputError(
            "refusing to overwrite an existing file", location=str(path), hint="choose another -o or --force"
        )


class _Capped(io.RawIOBase):
    """The decompressed stream, failing once more than ``limit`` bytes came out of it."""

    def __init__(self, source: gzip.GzipFile, limit: int, location: str) -> None:
        self._source = source
        self._left = limit
        self._limit = limit
        self._location = location

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        want = min(len(buffer), self._left + 1)
        data = self._source.read(want)
        if len(data) > self._left:
            raise UnsafeArchive(
                f"the archive decompresses to more than {_size(self._limit)}",
                location=self._location,
                hint="a decompression bomb, or a package larger than this reader accepts",
            )
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def read_archive(path: Path, limits: ArchiveLimits) -> dict[str, bytes]:
    """Every member of the tar.gz at ``path`` by name, read under ``limits``.

    Raises :class:`UnsafeArchive` for anything but a well-formed tar.gz of regular files with safe, distinct
    names within the limits, and :class:`InputError` when the file cannot be read.
    """
    location = str(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise InputError(f"cannot read the package: {error.strerror}", location=location) from error
    if size > limits.max_archive_bytes:
        raise UnsafeArchive(
            f"the package is larger than {_size(limits.max_archive_bytes)}", location=location
        )
    members: dict[str, bytes] = {}
    try:
        with (
            path.open("rb") as raw,
            gzip.GzipFile(fileobj=raw, mode="rb") as unpacked,
            _Capped(unpacked, limits.max_total_bytes, location) as capped,
            tarfile.open(fileobj=capped, mode="r|") as tar,
        ):
            for info in tar:
                _admit(info, members, limits, location)
                stream = tar.extractfile(info)
                if stream is None:  # pragma: no cover - _admit lets only regular files through
                    raise UnsafeArchive(f"member {info.name!r} has no data", location=location)
                data = stream.read()
                if len(data) != info.size:
                    raise UnsafeArchive(f"member {info.name!r} is truncated", location=location)
                members[info.name] = data
            _read_to_the_end(capped, location)
    except (tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise UnsafeArchive(
            f"not a readable tar.gz archive ({error or type(error).__name__})",
            location=location,
            hint="give the file written by `trtguard evidence export`",
        ) from None
    except OSError as error:
        raise InputError(f"cannot read the package: {error}", location=location) from None
    return members


def _read_to_the_end(stream: io.RawIOBase, location: str) -> None:
    """Read what follows the tar archive's end: only its zero padding may, and reaching the end of the gzip
    stream checks its trailer (the CRC-32 and length of the data), which stopping at the tar end would not."""
    while chunk := stream.read(1 << 16):
        if chunk.strip(b"\0"):
            raise UnsafeArchive(
                "data follows the end of the tar archive",
                location=location,
                hint="the archive was changed after `trtguard evidence export` wrote it",
            )


def _admit(info: tarfile.TarInfo, members: dict[str, bytes], limits: ArchiveLimits, location: str) -> None:
    name = check_name(info.name, location=location)
    if not info.isreg() or info.issparse():
        raise UnsafeArchive(
            f"member {name!r} is not a regular file ({_kind(info)})",
            location=location,
            hint="packages hold regular files only; links and devices are refused",
        )
    if name in members:
        raise UnsafeArchive(f"member {name!r} appears twice", location=location)
    if len(members) >= limits.max_members:
        raise UnsafeArchive(f"the archive has more than {limits.max_members} members", location=location)
    if info.size > limits.max_member_bytes:
        raise UnsafeArchive(
            f"member {name!r} is {_size(info.size)}, more than {_size(limits.max_member_bytes)}",
            location=location,
        )


def _kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return f"a symbolic link to {info.linkname!r}"
    if info.islnk():
        return f"a hard link to {info.linkname!r}"
    if info.isdir():
        return "a directory"
    if info.issparse():
        return "a sparse file"
    return "a device or FIFO"


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.4g} {unit}"
    return f"{count} bytes"
