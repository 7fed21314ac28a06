"""On a real GPU with a real TensorRT runtime (``@pytest.mark.gpu``; skipped elsewhere, see conftest.py).

No public plan is version-compatible, so the lean runtime (the only one installable here) must refuse each
of them; what is tested is that it is asked on the GPU, that its own message reaches the report, and that
nothing the child suffers reaches the caller.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.verifier.engine.helpers import FAKE_CHILDREN, PLANS, gpu_manifest, trtguard
from verifier.attestations import load_verification
from verifier.base._digests import hash_file
from verifier.crypto._dsse import Envelope, verify_envelope
from verifier.crypto._intoto import statement_from_envelope
from verifier.crypto._keys import encrypt_private_key, generate_private_key
from verifier.engine import GpuOptions, GpuOutcome, GpuRun, inspect_on_gpu

pytestmark = pytest.mark.gpu

MNIST = "sampleMNIST.trt10.5.0.18.engine"


def deserialize(path: Path, **options: object) -> GpuRun:
    return inspect_on_gpu(path, hash_file(path).sha256, GpuOptions(**options))  # type: ignore[arg-type]


def assert_refused_cleanly(run: GpuRun) -> None:
    assert run.outcome is GpuOutcome.DESERIALIZE_FAILED, (run.outcome, run.message, run.stderr_tail)
    assert run.report is not None and run.report.gpu is not None and run.report.gpu.available
    assert run.report.runtime is not None  # a Runtime was created on the GPU
    assert run.errors, "TensorRT's own message must be in the report"
    assert "Error Code" in run.errors[-1]
    assert run.message == run.errors[-1]


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_public_plan_is_refused_with_tensorrts_message(plans_dir: Path, name: str) -> None:
    assert_refused_cleanly(deserialize(plans_dir / name))


def test_host_code_allowed_changes_nothing_for_a_plan_that_is_not_version_compatible(plans_dir: Path) -> None:
    assert_refused_cleanly(deserialize(plans_dir / MNIST, allow_host_code=True))


def _broken(data: bytes) -> dict[str, bytes]:
    return {
        "truncated": data[:4096],
        "padded": data + b"\0" * 4096,
        "random": os.urandom(65536),
        "empty": b"",
        "timing-cache-like": b"ptrt" + bytes(60),
    }


@pytest.mark.parametrize("kind", ["truncated", "padded", "random", "empty", "timing-cache-like"])
def test_garbage_and_truncated_input(plans_dir: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.plan"
    path.write_bytes(_broken((plans_dir / MNIST).read_bytes())[kind])
    assert_refused_cleanly(deserialize(path))


def test_file_changed_after_hashing_is_never_deserialized(plans_dir: Path) -> None:
    run = inspect_on_gpu(plans_dir / MNIST, "0" * 64, GpuOptions())
    assert run.outcome is GpuOutcome.REJECTED
    assert run.report is not None and run.report.runtime is None


def test_child_dying_with_a_cuda_context_leaves_the_caller_and_the_gpu_usable(plans_dir: Path) -> None:
    engine = plans_dir / MNIST
    crashed = inspect_on_gpu(
        engine,
        hash_file(engine).sha256,
        GpuOptions(child_command=(sys.executable, str(FAKE_CHILDREN / "fake_cuda_then_segfaults.py"))),
    )
    assert crashed.outcome is GpuOutcome.CRASHED
    assert crashed.signal == "SIGSEGV"
    assert "64 MiB allocated" in crashed.stderr_tail
    assert_refused_cleanly(deserialize(engine))  # the next child still gets the GPU


def test_hanging_child_on_the_gpu_machine(plans_dir: Path) -> None:
    run = inspect_on_gpu(
        plans_dir / MNIST,
        "0" * 64,
        GpuOptions(timeout_s=2, child_command=(sys.executable, str(FAKE_CHILDREN / "fake_hangs.py"))),
    )
    assert run.outcome is GpuOutcome.TIMEOUT


def test_command_line_reports_and_attests_the_refusal(
    plans_dir: Path,
    tmp_path: Path,
    write_signed: Callable[..., Path],
    builder_pub: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = plans_dir / MNIST
    manifest = write_signed(gpu_manifest(engine))
    key = generate_private_key()
    key_file = tmp_path / "verifier.key"
    key_file.write_bytes(encrypt_private_key(key, b""))
    output = tmp_path / "verification.dsse.json"
    monkeypatch.setenv("TRTGUARD_PASSWORD", "")
    code = trtguard(
        engine, "--manifest", manifest, "--key", builder_pub, "--gpu", "--format", "json",
        "--attest", "--attest-key", key_file, "-o", output,
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1, captured.err
    document = json.loads(captured.out)
    checks = {check["name"]: check for check in document["checks"]}
    assert checks["output_engine.sha256"]["status"] == "pass"
    assert checks["gpu.device"]["status"] == "pass"
    assert checks["gpu.runtime"]["status"] == "pass"
    assert checks["gpu.deserialize"]["status"] == "fail"
    assert "Error Code" in checks["gpu.deserialize"]["message"]
    assert any("version-compatible" in note for note in document["notes"])
    envelope = Envelope.from_json(output.read_bytes())
    verify_envelope(envelope, {"verifier": key.public_key()})
    predicate = load_verification(statement_from_envelope(envelope), str(output))
    assert predicate.result == "fail"
    assert predicate.runtime.plan_tensorrt_version == "10.5.0.18"
