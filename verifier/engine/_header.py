"""The fixed header at the start of a TensorRT plan file, read without a GPU.

The rule NVIDIA's own ``trtexec --getPlanVersionOnly`` applies (``printPlanVersion`` in
``samples/common/sampleEngines.cpp``): the little-endian u32 at offset 0 is ``"ftrt"``, the u32 at offset 4
is 0, and bytes 24..27 are the TensorRT major, minor, patch and build numbers. Everything else read here
(the size field, the serialization numbers, the layout of pre-8.6 ``"ptrt"`` plans) was observed in real
plans, is not documented, and is reported as such: final acceptance of a plan is a successful
deserialization on a GPU.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from verifier.base import InputError

#: Bytes to read from the start of a file to parse its header.
HEADER_BYTES = 128


class PlanMagic(StrEnum):
    """The four-byte tag a plan file starts with."""

    #: TensorRT ≥ 8.6: a container whose header carries the TensorRT version.
    FTRT = "ftrt"
    #: A bare serialization archive: a TensorRT < 8.6 plan, or a builder timing cache.
    PTRT = "ptrt"
    #: TensorRT-RTX.
    VTRT = "vtrt"


_DESCRIPTIONS = {
    PlanMagic.FTRT: "TensorRT plan (8.6 or later)",
    PlanMagic.PTRT: "bare 'ptrt' archive: a TensorRT plan older than 8.6, or a builder timing cache",
    PlanMagic.VTRT: "TensorRT-RTX plan",
}


@dataclass(frozen=True, slots=True)
class PlanHeader:
    """What the first bytes of a plan file say.

    ``format_problem`` says what is wrong with the header itself (unknown tag, too short, unsupported
    layout) and ``size_problem`` how the declared size disagrees with the file; both ``None`` means the
    header is consistent with the file. ``magic`` is ``None`` when the file starts with no known tag (and then
    nothing else is read from it).
    """

    #: The first bytes as hexadecimal, to show what an unrecognised file starts with.
    first_bytes: str
    magic: PlanMagic | None = None
    #: "major.minor.patch.build" from bytes 24..27 (``ftrt``/``vtrt`` only; pre-8.6 plans do not carry it).
    tensorrt_version: str | None = None
    #: The file length the header declares, ``None`` when it declares none that could be read.
    declared_size: int | None = None
    #: Serialization format number (informational only: undocumented, e.g. 236 for 8.6, 239 for 10.5).
    serialization_version: int | None = None
    format_problem: str | None = None
    size_problem: str | None = None

    @property
    def problems(self) -> tuple[str, ...]:
        """Every problem found, as sentences."""
        return tuple(p for p in (self.format_problem, self.size_problem) if p is not None)

    @property
    def description(self) -> str:
        """A few words naming the format."""
        if self.magic is None:
            return "not a TensorRT plan (unknown magic)"
        return _DESCRIPTIONS[self.magic]

    @property
    def version_tuple(self) -> tuple[int, ...] | None:
        """The TensorRT version as integers, when the header carries one."""
        if self.tensorrt_version is None:
            return None
        return tuple(int(part) for part in self.tensorrt_version.split("."))

    def to_json(self) -> dict[str, object]:
        """The ``header`` object of the JSON report."""
        return {
            "magic": self.magic.value if self.magic is not None else None,
            "format": self.description,
            "tensorrt_version": self.tensorrt_version,
            "declared_size": self.declared_size,
            "serialization_version": self.serialization_version,
            "first_bytes": self.first_bytes,
            "problems": list(self.problems),
        }


def _u32(data: bytes, offset: int) -> int | None:
    if len(data) < offset + 4:
        return None
    value: int = struct.unpack_from("<I", data, offset)[0]
    return value


def _u64(data: bytes, offset: int) -> int | None:
    if len(data) < offset + 8:
        return None
    value: int = struct.unpack_from("<Q", data, offset)[0]
    return value


def _size_problem(declared: int | None, file_size: int) -> str | None:
    if declared is None:
        return f"the file is too short ({file_size} bytes) to hold the header's size field"
    if declared == file_size:
        return None
    if declared > file_size:
        return (
            f"the header declares {declared} bytes but the file has {file_size}: "
            f"the file is truncated by {declared - file_size} bytes"
        )
    return (
        f"the header declares {declared} bytes but the file has {file_size}: "
        f"{file_size - declared} unexpected bytes follow the plan"
    )


def _parse_container(magic: PlanMagic, data: bytes, file_size: int) -> PlanHeader:
    """``ftrt`` and ``vtrt``: the container layout with version bytes at 24..27 and the size at 0x10."""
    format_problem: str | None = None
    version: str | None = None
    zero = _u32(data, 4)
    if len(data) < 28:
        format_problem = f"the file is too short ({file_size} bytes) to hold a plan header (28 bytes)"
    elif zero != 0:
        # trtexec refuses these too ("Serialization version is not supported"): the version bytes may have
        # moved, so they are not read.
        format_problem = f"unsupported header layout: the u32 at offset 4 is {zero}, trtexec requires 0"
    else:
        version = ".".join(str(byte) for byte in data[24:28])
    declared = _u64(data, 0x10)
    serialization: int | None = None
    if magic is PlanMagic.FTRT and data[0x38:0x3C] == b"ptrt":
        serialization = _u32(data, 0x40)
    elif magic is PlanMagic.VTRT and data[0x70:0x74] == b"ptrt":
        serialization = _u32(data, 0x74)
    return PlanHeader(
        magic=magic,
        tensorrt_version=version,
        declared_size=declared,
        serialization_version=serialization,
        first_bytes=data[:16].hex(),
        format_problem=format_problem,
        size_problem=_size_problem(declared, file_size),
    )


def _parse_bare_archive(data: bytes, file_size: int) -> PlanHeader:
    """Bare ``ptrt``: TensorRT 7.x has a non-zero "safe" version at 4 and the length at 0x0C, later
    versions 0 at 4 and the length at 0x10; the length excludes the 24-byte archive header."""
    safe_version = _u32(data, 4)
    serialization = _u32(data, 8)
    length = _u64(data, 0x10 if safe_version == 0 else 0x0C)
    declared = length + 24 if length is not None else None
    return PlanHeader(
        magic=PlanMagic.PTRT,
        declared_size=declared,
        serialization_version=serialization,
        first_bytes=data[:16].hex(),
        size_problem=_size_problem(declared, file_size),
    )


def parse_plan_header(data: bytes, file_size: int) -> PlanHeader:
    """Parse the header from ``data`` (the first :data:`HEADER_BYTES` bytes, or all of a shorter file).

    ``file_size`` is the length of the whole file, compared with the size the header declares. Never
    raises on malformed input: what is wrong is in ``format_problem`` and ``size_problem``.
    """
    tag = data[:4]
    for magic in PlanMagic:
        if tag == magic.value.encode("ascii"):
            if magic is PlanMagic.PTRT:
                return _parse_bare_archive(data, file_size)
            return _parse_container(magic, data, file_size)
    if file_size == 0:
        problem = "the file is empty"
    elif len(tag) < 4:
        problem = f"the file is too short ({file_size} bytes) to be a TensorRT plan"
    else:
        problem = f"the file starts with {tag!r}, not with a TensorRT plan tag ('ftrt', 'ptrt' or 'vtrt')"
    return PlanHeader(first_bytes=data[:16].hex(), format_problem=problem)


def read_plan_header(path: Path) -> PlanHeader:
    """Read and parse the header of the plan file at ``path``.

    Raises :class:`InputError` when the file cannot be read.
    """
    try:
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            data = stream.read(HEADER_BYTES)
    except OSError as error:
        raise InputError(
            f"cannot read the engine file: {error.strerror}",
            location=str(path),
            hint="check the path and its permissions",
        ) from error
    return parse_plan_header(data, size)
