"""trtguard/cli/demo.py (and trtguard/demo/_engine.py): a stand-in engine whose header trtguard reads as a
plan's, and a real ONNX model, for trying the release flow without a GPU (issue 28 item 4)."""

from __future__ import annotations

import contextlib
import hashlib
import io
from pathlib import Path

import pytest

from trtguard.cli import main
from verifier.engine._header import PlanMagic, read_plan_header
from verifier.engine._onnx_model import read_onnx_model


def cli(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def test_the_stand_in_has_a_plan_header_with_no_problem(tmp_path: Path) -> None:
    plan, onnx = tmp_path / "model.plan", tmp_path / "model.onnx"
    status, out, err = cli("demo", "engine", plan, "--onnx", onnx, "--tensorrt-version", "10.5.0.18")
    assert status == 0, err
    assert f"sha256:{hashlib.sha256(plan.read_bytes()).hexdigest()}" in out
    header = read_plan_header(plan)
    assert header.magic is PlanMagic.FTRT and header.problems == ()
    assert header.tensorrt_version == "10.5.0.18" and header.serialization_version == 239
    assert header.declared_size == plan.stat().st_size
    model = read_onnx_model(onnx)
    assert [tensor.name for tensor in model.inputs] == ["input"]


def test_seeds_give_other_digests_and_files_are_not_overwritten(tmp_path: Path) -> None:
    assert cli("demo", "engine", tmp_path / "a.plan", "--seed", "a")[0] == 0
    assert cli("demo", "engine", tmp_path / "b.plan", "--seed", "b")[0] == 0
    assert (tmp_path / "a.plan").read_bytes() != (tmp_path / "b.plan").read_bytes()
    status, _, err = cli("demo", "engine", tmp_path / "a.plan")
    assert status == 2 and "exists" in err and "--force" in err


@pytest.mark.parametrize("version", ["10.5", "7.2.3.4", "10.300.0.1", "ten"])
def test_a_version_the_header_cannot_hold_is_refused(tmp_path: Path, version: str) -> None:
    status, _, err = cli("demo", "engine", tmp_path / "x.plan", "--tensorrt-version", version)
    assert status == 2 and "is not major.minor.patch.build of TensorRT 8.6 or later" in err


def test_an_unwritable_path_is_one_error_line_and_nothing_is_written(tmp_path: Path) -> None:
    """Attack 28 finding 4: a missing folder, a folder as OUT, a bad --onnx path after a good plan path and
    a file under /proc crashed with a traceback (the plan already written for the bad --onnx)."""
    plan = tmp_path / "ok.plan"
    cases = [
        (
            (tmp_path / "no" / "z.plan",),
            f"{tmp_path / 'no' / 'z.plan'}: the plan cannot be written: the folder",
        ),
        ((tmp_path, "--force"), f"{tmp_path}: the plan cannot be written: it is a folder"),
        (
            (plan, "--onnx", tmp_path / "no" / "m.onnx"),
            f"{tmp_path / 'no' / 'm.onnx'}: the ONNX model cannot",
        ),
    ]
    if Path("/proc/version").is_file():
        cases.append((("/proc/version", "--force"), "/proc/version: the plan cannot be written: no file can"))
    for args, message in cases:
        status, out, err = cli("demo", "engine", *args)
        assert status == 2 and out == "", (args, out, err)
        assert err.startswith(f"trtguard: error: {message}") and err.count("\n") == 1, (args, err)
    assert list(tmp_path.iterdir()) == []  # no plan, no temporary file left behind
