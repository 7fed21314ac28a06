"""``trtguard verify-engine`` (trtguard.cli.verify_engine): exit codes, formats, usage errors, progress."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.verifier.engine.helpers import gpu_manifest, manifest_for, trtguard
from trtguard.cli import verify_engine as engine_cli
from verifier.crypto._keys import encrypt_private_key, generate_private_key

MNIST = "sampleMNIST.trt10.5.0.18.engine"


def test_text_report_of_a_matching_engine(
    plans_dir: Path, write_signed: Callable[..., Path], builder_pub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = plans_dir / MNIST
    manifest = write_signed(manifest_for(engine))
    assert trtguard(engine, "--manifest", manifest, "--key", builder_pub) == 0
    out = capsys.readouterr().out
    assert "PASS     output_engine.sha256" in out
    assert "SKIPPED  gpu.deserialize" in out
    assert "result: PASSED" in out
    assert "signed by builder.pub" in out


def test_json_report_keeps_the_hash_when_checks_fail(
    plans_dir: Path, write_signed: Callable[..., Path], builder_pub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = plans_dir / MNIST
    manifest = write_signed(manifest_for(engine, **{"toolchain.tensorrt_version": "10.4.0.18"}))
    code = trtguard(engine, "--manifest", manifest, "--key", builder_pub, "--format", "json")
    assert code == 1
    document = json.loads(capsys.readouterr().out)
    assert document["sha256"] == "1cc17aeb1e732de12fe946c6785f5d323df7719d9a03690f858dd3ac3f2346cc"
    assert document["size"] == 284092
    assert document["header"]["magic"] == "ftrt"
    assert document["header"]["tensorrt_version"] == "10.5.0.18"
    assert document["result"] == "fail"
    for check in document["checks"]:
        assert set(check) == {"name", "status", "expected", "observed", "message"}
        assert check["status"] in ("pass", "fail", "skipped")
        assert check["message"]
    version = next(c for c in document["checks"] if c["name"] == "toolchain.tensorrt_version")
    assert (version["status"], version["expected"], version["observed"]) == ("fail", "10.4.0.18", "10.5.0.18")


def test_garbage_engine_still_reports_its_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = tmp_path / "garbage.plan"
    engine.write_bytes(b"\x00" * 1000)
    assert trtguard(engine, "--format", "json") == 1
    document = json.loads(capsys.readouterr().out)
    assert len(document["sha256"]) == 64
    assert document["header"]["magic"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--manifest", "m.json"], "--manifest needs --key"),
        (["--key", "k.pub"], "give the manifest with --manifest"),
        (["--gpu"], "--gpu needs --manifest and --key"),
        (["--allow-host-code"], "--allow-host-code only applies with --gpu"),
        (["--attest"], "--attest needs --gpu"),
        (["--attest-key", "k"], "only apply with --attest"),
    ],
)
def test_usage_errors(
    plans_dir: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trtguard(plans_dir / MNIST, *argv) == 2
    assert message in capsys.readouterr().err


def test_attest_needs_key_and_output(
    plans_dir: Path, write_signed: Callable[..., Path], builder_pub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = plans_dir / MNIST
    manifest = write_signed(manifest_for(engine))
    assert trtguard(engine, "--manifest", manifest, "--key", builder_pub, "--gpu", "--attest") == 2
    assert "--attest needs --attest-key KEY and -o FILE" in capsys.readouterr().err


def test_missing_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert trtguard(tmp_path / "none.plan") == 2
    assert "no such engine file" in capsys.readouterr().err


def test_timeout_must_be_positive(plans_dir: Path) -> None:
    with pytest.raises(SystemExit):
        trtguard(plans_dir / MNIST, "--timeout", "0")


def test_manifest_that_is_not_an_envelope(
    plans_dir: Path, tmp_path: Path, builder_pub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text("[]")
    assert trtguard(plans_dir / MNIST, "--manifest", manifest, "--key", builder_pub) == 2
    assert str(manifest) in capsys.readouterr().err


def test_wrong_attest_key_password_fails_before_any_work(
    plans_dir: Path,
    tmp_path: Path,
    write_signed: Callable[..., Path],
    builder_pub: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = plans_dir / MNIST
    key_file = tmp_path / "verifier.key"
    key_file.write_bytes(encrypt_private_key(generate_private_key(), b"right"))
    monkeypatch.setenv("TRTGUARD_PASSWORD", "wrong")
    argv: list[str | Path] = ["--manifest", write_signed(gpu_manifest(engine)), "--key", builder_pub, "--gpu"]
    code = trtguard(engine, *argv, "--attest", "--attest-key", key_file, "-o", tmp_path / "att.json")
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no report: the key was opened first
    assert "password" in captured.err.lower()


def test_gpu_without_a_gpu_fails_and_cannot_attest(
    plans_dir: Path,
    tmp_path: Path,
    write_signed: Callable[..., Path],
    builder_pub: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = plans_dir / MNIST
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the same on a GPU machine: the driver sees no device
    password = tmp_path / "password"
    password.write_text("pw\n")
    key_file = tmp_path / "verifier.key"
    key_file.write_bytes(encrypt_private_key(generate_private_key(), b"pw"))
    output = tmp_path / "att.json"
    argv: list[str | Path] = [
        "--manifest",
        write_signed(gpu_manifest(engine)),
        "--key",
        builder_pub,
        "--gpu",
        "--format",
        "json",
    ]
    code = trtguard(
        engine, *argv, "--attest", "--attest-key", key_file, "--password-file", password, "-o", output
    )
    assert code == 1
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    checks = {check["name"]: check for check in document["checks"]}
    assert checks["gpu.deserialize"]["status"] == "fail"
    assert "no GPU" in checks["gpu.deserialize"]["message"]
    assert document["gpu"]["runtime"] is None  # no Runtime was created
    assert "nothing to attest" in captured.err
    assert not output.exists()


def test_progress_line_for_large_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(engine_cli, "PROGRESS_FROM_BYTES", 1024)
    engine = tmp_path / "big.plan"
    engine.write_bytes(b"ftrt" + bytes(8 * 1024 * 1024))
    trtguard(engine)
    assert "hashing big.plan: 0.01 / 0.01 GiB (100%)" in capsys.readouterr().err


def test_installed_command(plans_dir: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trtguard", "verify-engine", str(plans_dir / MNIST), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["header"]["tensorrt_version"] == "10.5.0.18"


def test_the_command_module_alone_loads_neither_sigstore_nor_the_registry_client() -> None:
    # What lets a slim GPU environment run verify-engine: only --attest needs the sigstore group.
    probe = (
        "import sys; from trtguard.cli import verify_engine as engine; "
        "print(sorted(m for m in ('sigstore', 'httpx', 'verifier.signatures') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
