"""verifier/engine/_header.py: the plan header of every public plan, and broken files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.verifier.engine.helpers import PLANS
from verifier.base._errors import InputError
from verifier.engine._header import HEADER_BYTES, PlanMagic, parse_plan_header, read_plan_header

#: SOURCES.md §5: the magic and serialization number of each public file.
EXPECTED = {
    "controlnet-fork-model.trt8.6.1.6.plan": (PlanMagic.FTRT, 236),
    "guorbit-model.trt8.2.engine": (PlanMagic.PTRT, 205),
    "hackathon-engine-int8-3-2.trt7.trt": (PlanMagic.PTRT, 194),
    "hackathon-model-Dim1.trt10.0.1.6.plan": (PlanMagic.FTRT, 237),
    "hackathon-model-Dim4.trt10.0.1.6.plan": (PlanMagic.FTRT, 237),
    "ppo-hil-jetson-model.trt7.1.trt": (PlanMagic.PTRT, 211),
    "sampleMNIST.trt10.5.0.18.engine": (PlanMagic.FTRT, 239),
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_public_plan(plans_dir: Path, name: str) -> None:
    path = plans_dir / name
    header = read_plan_header(path)
    magic, serialization = EXPECTED[name]
    assert header.magic is magic
    assert header.tensorrt_version == PLANS[name]
    assert header.serialization_version == serialization
    assert header.declared_size == path.stat().st_size
    assert header.problems == ()


@pytest.mark.parametrize("name", ["sd_clip_fp16.TimingCache", "sd_control_fp16.TimingCache"])
def test_timing_caches_are_bare_archives(shared_fixtures: Path, name: str) -> None:
    path = shared_fixtures / "tensorrt" / "timing-cache" / name
    header = read_plan_header(path)
    assert header.magic is PlanMagic.PTRT
    assert header.serialization_version == 236
    assert header.declared_size == path.stat().st_size
    assert "timing cache" in header.description


def test_version_tuple_and_json(plans_dir: Path) -> None:
    header = read_plan_header(plans_dir / "sampleMNIST.trt10.5.0.18.engine")
    assert header.version_tuple == (10, 5, 0, 18)
    document = header.to_json()
    assert document["magic"] == "ftrt"
    assert document["tensorrt_version"] == "10.5.0.18"


@pytest.mark.parametrize("name", sorted(PLANS))
def test_truncated_plan_reports_missing_bytes(plans_dir: Path, name: str) -> None:
    data = (plans_dir / name).read_bytes()
    header = parse_plan_header(data[:HEADER_BYTES], len(data) - 100)
    assert header.size_problem is not None
    assert "truncated by 100 bytes" in header.size_problem
    assert header.format_problem is None


@pytest.mark.parametrize("name", sorted(PLANS))
def test_padded_plan_reports_extra_bytes(plans_dir: Path, name: str) -> None:
    data = (plans_dir / name).read_bytes()
    header = parse_plan_header(data[:HEADER_BYTES], len(data) + 7)
    assert header.size_problem is not None
    assert "7 unexpected bytes follow the plan" in header.size_problem


def test_flipped_magic_byte_is_not_a_plan(plans_dir: Path) -> None:
    data = bytearray((plans_dir / "sampleMNIST.trt10.5.0.18.engine").read_bytes()[:HEADER_BYTES])
    data[0] ^= 0x01
    header = parse_plan_header(bytes(data), 284092)
    assert header.magic is None
    assert header.format_problem is not None
    assert "not with a TensorRT plan tag" in header.format_problem


def test_flipped_layout_word_is_refused_like_trtexec(plans_dir: Path) -> None:
    data = bytearray((plans_dir / "sampleMNIST.trt10.5.0.18.engine").read_bytes()[:HEADER_BYTES])
    data[4] = 1
    header = parse_plan_header(bytes(data), 284092)
    assert header.magic is PlanMagic.FTRT
    assert header.tensorrt_version is None
    assert header.format_problem is not None
    assert "offset 4" in header.format_problem


def test_flipped_version_byte_changes_the_version(plans_dir: Path) -> None:
    data = bytearray((plans_dir / "sampleMNIST.trt10.5.0.18.engine").read_bytes()[:HEADER_BYTES])
    data[25] ^= 0x01
    header = parse_plan_header(bytes(data), 284092)
    assert header.tensorrt_version == "10.4.0.18"


def test_vtrt_container(plans_dir: Path) -> None:
    # TensorRT-RTX plans use the ftrt container layout with another tag (research notes §3.2); built here
    # from a real ftrt header so that the layout is the observed one.
    data = bytearray((plans_dir / "sampleMNIST.trt10.5.0.18.engine").read_bytes()[:HEADER_BYTES])
    data[0:4] = b"vtrt"
    data[24:28] = bytes([1, 7, 1, 116])
    header = parse_plan_header(bytes(data), 284092)
    assert header.magic is PlanMagic.VTRT
    assert header.tensorrt_version == "1.7.1.116"
    assert header.description == "TensorRT-RTX plan"


@pytest.mark.parametrize(
    ("data", "size", "problem"),
    [
        (b"", 0, "the file is empty"),
        (b"ft", 2, "too short (2 bytes) to be a TensorRT plan"),
        (b"ftrt\0\0\0\0", 8, "too short (8 bytes) to hold a plan header"),
        (b"ptrt\0\0\0\0\xcd\0\0\0", 12, "too short (12 bytes) to hold the header's size field"),
    ],
)
def test_short_files(data: bytes, size: int, problem: str) -> None:
    header = parse_plan_header(data, size)
    assert any(problem in text for text in header.problems), header.problems


def test_random_bytes_are_not_a_plan() -> None:
    for _ in range(50):
        data = os.urandom(HEADER_BYTES)
        if data[:4] in (b"ftrt", b"ptrt", b"vtrt"):
            continue
        header = parse_plan_header(data, 4096)
        assert header.magic is None
        assert header.first_bytes == data[:16].hex()


def test_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read_plan_header(tmp_path / "missing.plan")
    assert caught.value.location == str(tmp_path / "missing.plan")
    assert caught.value.hint
