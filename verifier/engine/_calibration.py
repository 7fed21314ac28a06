"""INT8 calibration caches written by TensorRT's calibrators (TensorRT ≤ 10, implicit quantization).

The format is text: a header line ``TRT-<N>-<Algorithm>`` and one line per tensor, ``<name>: <8 hex>``,
where the hex digits are the big-endian IEEE-754 float32 bits of the tensor's scale. ``N`` is
``NV_TENSORRT_VERSION``, whose encoding changed in TensorRT 10: ``major*1000 + minor*100 + patch`` up to 9.x
(``include/NvInferRuntimeBase.h`` on ``release/8.6``), ``major*10000 + minor*100 + patch`` from 10.0 on.
Tensor names may contain spaces, brackets and ``": "``, so each line is split on its *last* ``": "`` (as
NVIDIA ModelOpt's ``import_scales_from_calib_cache`` does).
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from verifier.base import InputError, VerificationError, sha256_bytes

_HEADER = re.compile(r"TRT-(?P<number>[0-9]+)-(?P<algorithm>[A-Za-z0-9_]+)")
_HEX8 = re.compile(r"[0-9A-Fa-f]{8}")
# ONNX Runtime's TensorRT execution provider writes "name float" lines under the same file name.
_ORT_LINE = re.compile(r"\S+ [-+0-9.eE]+")
#: Caches are a few hundred kilobytes at most; anything far larger is not a calibration cache.
MAX_CACHE_BYTES = 64 * 1024 * 1024


class InvalidCalibrationCache(VerificationError):
    """The file is not a well-formed TensorRT INT8 calibration cache."""


@dataclass(frozen=True, slots=True)
class CalibrationCacheFile:
    """A calibration cache file as parsed, and the hash of its exact bytes.

    What a manifest declares about the cache is :class:`verifier.manifest.CalibrationCache`.
    """

    sha256: str
    size: int
    header: str
    #: ``N`` of the header, as written.
    version_number: int
    #: ``N`` decoded as "major.minor.patch".
    tensorrt_version: str
    #: Which encoding ``N`` uses: "TensorRT <= 9" or "TensorRT >= 10".
    version_encoding: str
    algorithm: str
    #: Per-tensor scale, in file order.
    scales: dict[str, float]

    def to_json(self) -> dict[str, object]:
        """The ``calibration_cache`` object of the JSON report (without the scales themselves)."""
        return {
            "sha256": self.sha256,
            "size": self.size,
            "header": self.header,
            "tensorrt_version": self.tensorrt_version,
            "version_encoding": self.version_encoding,
            "algorithm": self.algorithm,
            "tensors": len(self.scales),
        }


def decode_version_number(number: int) -> tuple[tuple[int, int, int], str]:
    """Decode ``NV_TENSORRT_VERSION`` into (major, minor, patch) and the name of its encoding.

    Raises :class:`ValueError` for numbers that neither encoding produces.
    """
    if number >= 100_000:
        return (number // 10_000, (number // 100) % 100, number % 100), "TensorRT >= 10"
    if 1_000 <= number < 10_000:
        return (number // 1_000, (number // 100) % 10, number % 100), "TensorRT <= 9"
    raise ValueError(
        f"{number} is not a TensorRT version number: TensorRT <= 9 writes major*1000+minor*100+patch "
        "(1000..9999) and TensorRT >= 10 writes major*10000+minor*100+patch (100000 and above)"
    )


def parse_calibration_cache(data: bytes, *, location: str = "calibration cache") -> CalibrationCacheFile:
    """Parse and validate a calibration cache.

    Every tensor must have exactly one finite, positive scale. Raises :class:`InvalidCalibrationCache`
    with the offending line as the location.
    """
    digest = sha256_bytes(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidCalibrationCache(
            f"not text: byte {error.start} is not UTF-8",
            location=location,
            hint="a TensorRT calibration cache is a text file; check that the right file was given",
        ) from error
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    if not lines:
        raise InvalidCalibrationCache(
            "the file is empty",
            location=location,
            hint="give the cache the calibrator wrote; its first line reads like "
            "'TRT-8601-EntropyCalibration2'",
        )
    header_line = lines[0]
    match = _HEADER.fullmatch(header_line)
    if match is None:
        hint = "the first line of a TensorRT calibration cache reads like 'TRT-8601-EntropyCalibration2'"
        if _ORT_LINE.fullmatch(header_line):
            hint = (
                "this looks like ONNX Runtime's TensorRT execution provider cache ('name value' lines), "
                "which is a different format; give the cache written by a TensorRT calibrator"
            )
        raise InvalidCalibrationCache(
            f"the header line {header_line[:80]!r} is not 'TRT-<version>-<algorithm>'",
            location=f"{location}:1",
            hint=hint,
        )
    number = int(match["number"])
    try:
        (major, minor, patch), encoding = decode_version_number(number)
    except ValueError as error:
        raise InvalidCalibrationCache(
            str(error), location=f"{location}:1", hint="the header line may have been edited"
        ) from error
    scales: dict[str, float] = {}
    first_line: dict[str, int] = {}
    for line_number, line in enumerate(lines[1:], start=2):
        where = f"{location}:{line_number}"
        if line.endswith("\r"):
            raise InvalidCalibrationCache(
                "the line ends with a carriage return",
                location=where,
                hint="TensorRT writes '\\n' line ends; the file was converted to CRLF after calibration",
            )
        name, separator, value = line.rpartition(": ")
        if not separator or not name:
            raise InvalidCalibrationCache(
                f"{line[:80]!r} is not '<tensor name>: <8 hex digits>'",
                location=where,
                hint="each line after the header names one tensor and its scale",
            )
        if _HEX8.fullmatch(value) is None:
            raise InvalidCalibrationCache(
                f"the scale of {name!r} is {value[:20]!r}, not 8 hexadecimal digits",
                location=where,
                hint="scales are the big-endian float32 bit patterns TensorRT writes",
            )
        scale: float = struct.unpack(">f", bytes.fromhex(value))[0]
        if not math.isfinite(scale) or scale <= 0.0:
            raise InvalidCalibrationCache(
                f"tensor {name!r} has scale {scale!r} (bits {value}); a scale must be finite and positive",
                location=where,
                hint="recalibrate: the calibration data or the calibrator produced an unusable range",
            )
        if name in scales:
            raise InvalidCalibrationCache(
                f"tensor {name!r} appears twice (first on line {first_line[name]})",
                location=where,
                hint="a calibrator writes one scale per tensor; the file was edited or concatenated",
            )
        scales[name] = scale
        first_line[name] = line_number
    if not scales:
        raise InvalidCalibrationCache(
            "the cache has a header but no tensor scales",
            location=location,
            hint="give the cache written after calibration finished",
        )
    return CalibrationCacheFile(
        sha256=digest,
        size=len(data),
        header=header_line,
        version_number=number,
        tensorrt_version=f"{major}.{minor}.{patch}",
        version_encoding=encoding,
        algorithm=match["algorithm"],
        scales=scales,
    )


def read_calibration_cache(path: Path) -> CalibrationCacheFile:
    """Read, hash and parse the calibration cache at ``path``.

    Raises :class:`InputError` when the file cannot be read and :class:`InvalidCalibrationCache` when it
    is malformed.
    """
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_CACHE_BYTES + 1)
    except OSError as error:
        raise InputError(
            f"cannot read the calibration cache: {error.strerror}",
            location=str(path),
            hint="check the path given to --calibration-cache",
        ) from error
    if len(data) > MAX_CACHE_BYTES:
        raise InvalidCalibrationCache(
            f"the file is larger than {MAX_CACHE_BYTES // (1024 * 1024)} MiB",
            location=str(path),
            hint="a calibration cache holds one short line per tensor; check that the right file was given",
        )
    return parse_calibration_cache(data, location=str(path))
