"""verifier/engine/_calibration.py: the two public caches, both version encodings, and malformed caches."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from verifier.base._digests import sha256_bytes
from verifier.base._errors import InputError
from verifier.engine._calibration import (
    InvalidCalibrationCache,
    decode_version_number,
    parse_calibration_cache,
    read_calibration_cache,
)


def _hex(value: float) -> str:
    return struct.pack(">f", value).hex()


def test_trt7_cache(shared_fixtures: Path) -> None:
    path = shared_fixtures / "tensorrt" / "calibration" / "hackathon-TRT-7000-calibration.cache"
    cache = read_calibration_cache(path)
    assert cache.header == "TRT-7000-EntropyCalibration2"
    assert cache.tensorrt_version == "7.0.0"
    assert cache.version_encoding == "TensorRT <= 9"
    assert cache.algorithm == "EntropyCalibration2"
    # The name contains spaces and brackets: split on the last ": ".
    assert list(cache.scales) == ["inputTensor", "(Unnamed Layer* 0) [Convolution]_output"]
    assert cache.sha256 == sha256_bytes(path.read_bytes())
    assert cache.size == 101


def test_trt8204_cache_scale_value(shared_fixtures: Path) -> None:
    cache = read_calibration_cache(
        shared_fixtures / "tensorrt" / "calibration" / "hackathon-TRT-8204-int8.cache"
    )
    assert cache.tensorrt_version == "8.2.4"
    assert len(cache.scales) == 3
    # 0x3f4014c9 is the big-endian float32 0.7503 (research notes §5).
    assert cache.scales["inputT0"] == pytest.approx(0.7503, abs=1e-4)
    assert cache.to_json()["tensors"] == 3


@pytest.mark.parametrize(
    ("number", "version", "encoding"),
    [
        (7000, (7, 0, 0), "TensorRT <= 9"),
        (8204, (8, 2, 4), "TensorRT <= 9"),
        (8601, (8, 6, 1), "TensorRT <= 9"),
        (9300, (9, 3, 0), "TensorRT <= 9"),
        (100000, (10, 0, 0), "TensorRT >= 10"),
        (100900, (10, 9, 0), "TensorRT >= 10"),
        (101000, (10, 10, 0), "TensorRT >= 10"),
        (110401, (11, 4, 1), "TensorRT >= 10"),
    ],
)
def test_version_encodings(number: int, version: tuple[int, int, int], encoding: str) -> None:
    assert decode_version_number(number) == (version, encoding)


@pytest.mark.parametrize("number", [0, 999, 10000, 99999])
def test_impossible_version_numbers(number: int) -> None:
    with pytest.raises(ValueError, match="not a TensorRT version number"):
        decode_version_number(number)


def test_trt10_cache_parses() -> None:
    data = f"TRT-101000-EntropyCalibration2\ninput: {_hex(0.5)}\nout: {_hex(2.0)}\n".encode()
    cache = parse_calibration_cache(data)
    assert cache.tensorrt_version == "10.10.0"
    assert cache.scales == {"input": 0.5, "out": 2.0}


def test_name_containing_colon_space() -> None:
    cache = parse_calibration_cache(f"TRT-8601-MinMaxCalibration\nblock: 3: out: {_hex(1.5)}".encode())
    assert cache.scales == {"block: 3: out": 1.5}


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("", "the file is empty", None),
        ("TRT-8601-EntropyCalibration2\n", "no tensor scales", None),
        ("TRT8601-EntropyCalibration2\nx: 3f800000\n", "is not 'TRT-<version>-<algorithm>'", 1),
        ("TRT-12345-EntropyCalibration2\nx: 3f800000\n", "not a TensorRT version number", 1),
        ("TRT-8601-EntropyCalibration2\nx 3f800000\n", "is not '<tensor name>: <8 hex digits>'", 2),
        ("TRT-8601-EntropyCalibration2\nx: 3f8000\n", "not 8 hexadecimal digits", 2),
        ("TRT-8601-EntropyCalibration2\nx: 3f80000g\n", "not 8 hexadecimal digits", 2),
        ("TRT-8601-EntropyCalibration2\nx: 00000000\n", "must be finite and positive", 2),
        ("TRT-8601-EntropyCalibration2\nx: bf800000\n", "must be finite and positive", 2),
        ("TRT-8601-EntropyCalibration2\nx: 7f800000\n", "must be finite and positive", 2),
        ("TRT-8601-EntropyCalibration2\nx: 7fc00000\n", "must be finite and positive", 2),
        ("TRT-8601-EntropyCalibration2\nx: 3f800000\ny: 3f800000\nx: 40000000\n", "appears twice", 4),
        ("TRT-8601-EntropyCalibration2\r\nx: 3f800000\r\n", "is not 'TRT-<version>-<algorithm>'", 1),
        ("TRT-8601-EntropyCalibration2\nx: 3f800000\r\n", "carriage return", 2),
        ("TRT-8601-EntropyCalibration2\n\nx: 3f800000\n", "is not '<tensor name>: <8 hex digits>'", 2),
    ],
)
def test_malformed_caches(text: str, message: str, line: int | None) -> None:
    with pytest.raises(InvalidCalibrationCache) as caught:
        parse_calibration_cache(text.encode(), location="c.cache")
    assert message in caught.value.message
    assert caught.value.location == ("c.cache" if line is None else f"c.cache:{line}")
    assert caught.value.hint


def test_binary_file_is_not_a_cache() -> None:
    with pytest.raises(InvalidCalibrationCache, match="not text"):
        parse_calibration_cache(b"\xff\xfe\x00garbage")


def test_onnxruntime_cache_gets_its_own_hint() -> None:
    with pytest.raises(InvalidCalibrationCache) as caught:
        parse_calibration_cache(b"input 0.123\nconv 1.5\n")
    assert "ONNX Runtime" in (caught.value.hint or "")


def test_plan_file_is_not_a_cache(shared_fixtures: Path) -> None:
    with pytest.raises(InvalidCalibrationCache):
        read_calibration_cache(shared_fixtures / "tensorrt" / "plans" / "sampleMNIST.trt10.5.0.18.engine")


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the calibration cache"):
        read_calibration_cache(tmp_path / "nope.cache")
