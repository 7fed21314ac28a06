"""``trtguard manifest import|create|diff`` through the real command line.

``nvidia-smi`` is a FAKE script put first on PATH (this machine has no NVIDIA driver); everything else is
real: files, hashes, the shared TensorRT plan fixture, keys and DSSE envelopes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import model_signing
import onnx
import pytest
from onnx import TensorProto, helper

from tests.support.gpg import GnuPG
from tests.verifier.model_signing.conftest import write_key
from trtguard.cli import main
from verifier.base._errors import InputError
from verifier.crypto._dsse import Envelope, sign_envelope, verify_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, statement_from_envelope
from verifier.crypto._keys import encrypt_private_key, generate_private_key
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE, load_manifest

IMAGE = "nvcr.io/nvidia/tensorrt:24.10-py3@sha256:" + "5d" * 32
ACCURACY = "- metric: top1_acc\n  value: 0.981\n  dataset: {name: mnist-test, sha256: '" + "11" * 32 + "'}\n"
BUILDER = """typing: weak
precision_flags: [fp16, int8]
max_workspace_size: 1073741824
optimization_profiles:
  - inputs:
      input: {min: [1, 3, 8, 8], opt: [4, 3, 8, 8], max: [16, 3, 8, 8]}
"""


def write_float_model(path: Path) -> None:
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3, 8, 8])
    graph = helper.make_graph([helper.make_node("Relu", ["input"], ["output"])], "relu", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FAKE nvidia-smi first on PATH, and the variables NVIDIA's CUDA images set."""
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\n# FAKE nvidia-smi written by trtguard\'s tests\necho "NVIDIA H200, 9.0, 580.159.04"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_VERSION", "12.6.2")
    monkeypatch.delenv("CUDNN_VERSION", raising=False)
    monkeypatch.delenv("TRT_VERSION", raising=False)
    monkeypatch.delenv("TENSORRT_VERSION", raising=False)


@pytest.fixture
def build(tmp_path: Path, shared_fixtures: Path) -> dict[str, Path]:
    files = {
        "onnx": tmp_path / "model.onnx",
        "engine": tmp_path / "mnist.plan",
        "data": tmp_path / "calibration.npz",
        "cache": tmp_path / "calibration.cache",
        "builder": tmp_path / "builder.yaml",
        "accuracy": tmp_path / "accuracy.yaml",
    }
    write_float_model(files["onnx"])
    shutil.copyfile(shared_fixtures / "tensorrt/plans/sampleMNIST.trt10.5.0.18.engine", files["engine"])
    files["data"].write_bytes(b"PK\x05\x06" + bytes(18))
    files["cache"].write_bytes(b"TRT-100500-EntropyCalibration2\ninput: 3c010a14\n")
    files["builder"].write_text(BUILDER)
    files["accuracy"].write_text(ACCURACY)
    return files


def create_args(build: dict[str, Path], *extra: str) -> list[str]:
    return [
        "manifest",
        "create",
        "--onnx", str(build["onnx"]),
        "--engine", str(build["engine"]),
        "--calibration-data", str(build["data"]),
        "--calibration-cache", str(build["cache"]),
        "--builder-config", str(build["builder"]),
        "--accuracy", str(build["accuracy"]),
        "--no-progress",
        *extra,
    ]  # fmt: skip


# --- create ----------------------------------------------------------------------------


@pytest.mark.usefixtures("fake_gpu")
def test_create_writes_a_statement(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "manifest.json"
    previous = tmp_path / "previous.dsse.json"
    previous_statement = b'{"_type": "https://in-toto.io/Statement/v1"}'
    previous.write_text(
        json.dumps(
            {
                "payloadType": "application/vnd.in-toto+json",
                "payload": base64.b64encode(previous_statement).decode(),
                "signatures": [],
            },
            indent=2,
        )
    )
    status, out, err = run(
        create_args(
            build,
            "--toolchain-image", IMAGE,
            "--audit-id", "CHG-7",
            "--calibration-sampling", "every 10th frame",
            "--calibration-start", "2025-01-01T00:00:00Z",
            "--calibration-end", "2025-01-31T00:00:00Z",
            "--previous-manifest", str(previous),
            "--previous-engine", f"registry.example.com/models/mnist@sha256:{'ab' * 32}",
            "-o", str(output),
        ),
        capsys,
    )  # fmt: skip
    assert (status, out) == (0, "")
    statement = json.loads(output.read_text())
    assert statement["predicateType"] == ENGINE_BUILD_PREDICATE_TYPE
    engine_sha = hashlib.sha256(build["engine"].read_bytes()).hexdigest()
    assert statement["subject"] == [{"name": "mnist.plan", "digest": {"sha256": engine_sha}}]
    manifest = load_manifest(statement, str(output))
    # The previous manifest is named by its statement, whatever the envelope's formatting or signatures.
    assert manifest.previous_manifest_digest == "sha256:" + hashlib.sha256(previous_statement).hexdigest()
    assert manifest.previous_engine == f"registry.example.com/models/mnist@sha256:{'ab' * 32}"
    assert manifest.build_node.gpu_name == "NVIDIA H200"
    assert manifest.toolchain.cuda_version == "12.6.2"
    assert manifest.calibration is not None and manifest.calibration.dataset is not None
    assert manifest.calibration.dataset.hash_method == "file"
    assert manifest.calibration.dataset.sha256 == hashlib.sha256(build["data"].read_bytes()).hexdigest()
    assert "  toolchain.tensorrt_version: 10.5.0.18 from the engine's plan header" in err
    assert "  toolchain.cudnn_version: could not be determined" in err
    assert err.rstrip().endswith(
        f"wrote the in-toto Statement for mnist.plan (sha256:{engine_sha}) to {output}"
    )


@pytest.mark.usefixtures("fake_gpu")
def test_create_from_a_config_file_to_stdout(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "build.yaml"
    config.write_text(
        f"toolchain_image: '{IMAGE}'\n"
        "audit_id: CHG-8\n"
        "engine_name: mnist-int8.plan\n"
        "cudnn_version: '9.5.0.50'\n"
        "calibration:\n"
        "  sampling: uniform over January\n"
        "  time_range: {start: 2025-01-01T00:00:00Z, end: 2025-01-31T00:00:00Z}\n"
    )
    status, out, _ = run(create_args(build, "--config", str(config), "--predicate-only"), capsys)
    assert status == 0
    predicate = json.loads(out)
    assert "_type" not in predicate
    manifest = load_manifest(predicate, "stdout")
    assert manifest.output_engine.name == "mnist-int8.plan"
    assert manifest.toolchain.cudnn_version == "9.5.0.50"
    assert manifest.calibration is not None and manifest.calibration.dataset is not None
    assert manifest.calibration.dataset.time_range is not None


@pytest.mark.usefixtures("fake_gpu")
def test_create_incomplete_writes_nothing(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "manifest.json"
    status, out, err = run(create_args(build, "-o", str(output)), capsys)
    assert (status, out) == (2, "")
    assert not output.exists()
    assert (
        "manifest create: missing or invalid (2):\n  toolchain.image: cannot be read from inside the "
        "container" in err
    )
    assert "\n  audit_id: not given; pass --audit-id (or audit_id in --config)\n" in err
    assert (
        "trtguard: error: manifest create: the manifest is incomplete: 2 field(s) missing or invalid" in err
    )
    assert "Traceback" not in err


@pytest.mark.usefixtures("fake_gpu")
def test_create_incomplete_draft_on_request(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "draft.json"
    status, _, err = run(create_args(build, "--allow-incomplete", "-o", str(output)), capsys)
    assert status == 0
    assert "wrote an INCOMPLETE draft predicate: 2 field(s) to complete" in err
    draft = json.loads(output.read_text())
    assert draft["toolchain"]["image"] is None and draft["audit_id"] is None
    with pytest.raises(InputError) as caught:
        load_manifest(draft, str(output))
    assert caught.value.message.splitlines()[1:] == [
        "  toolchain.image: expected a string; got null",
        "  audit_id: expected a string; got null",
    ]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "toolchain_imag: x\n",
            "toolchain_imag: expected no field of this name (did you mean 'toolchain_image'?)",
        ),
        ("cuda_version: 12.10\n", "cuda_version: expected a string; quote numbers in YAML"),
        ("audit_id: a\naudit_id: b\n", "the key 'audit_id' appears twice in one mapping"),
        ("[1, 2]\n", "the config file must be a mapping of settings"),
        ("audit_id: [\n", "the config file is not valid YAML"),
    ],
)
def test_create_config_errors(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, message: str
) -> None:
    path = tmp_path / "build.yaml"
    path.write_text(config)
    status, _, err = run(create_args(build, "--config", str(path)), capsys)
    assert status == 2
    assert message in err
    assert "Traceback" not in err


def test_create_time_range_needs_both_ends(
    build: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(create_args(build, "--calibration-start", "2025-01-01T00:00:00Z"), capsys)
    assert status == 2
    assert "trtguard: error: --calibration-end: --calibration-start and --calibration-end go together" in err


def test_create_missing_file(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = create_args(build)
    args[args.index("--onnx") + 1] = str(tmp_path / "absent.onnx")
    status, _, err = run(args, capsys)
    assert status == 2
    assert f"trtguard: error: {tmp_path / 'absent.onnx'}: no such file or directory" in err


@pytest.mark.usefixtures("fake_gpu")
def test_create_with_a_malformed_onnx_is_an_input_error(
    build: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A file given on the command line that is not an ONNX model is the user's input: exit 2, not 1."""
    build["onnx"].write_bytes(b"\x08\x07 not a model at all")
    status, out, err = run(create_args(build, "--toolchain-image", IMAGE, "--audit-id", "A"), capsys)
    assert (status, out) == (2, "")
    assert f"trtguard: error: {build['onnx']}: not a valid ONNX model" in err
    assert "give the .onnx file the engine was built from" in err


@pytest.mark.usefixtures("fake_gpu")
def test_create_with_a_malformed_calibration_cache_is_an_input_error(
    build: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    build["cache"].write_bytes(b"input 0.5\n")
    status, _, err = run(create_args(build, "--toolchain-image", IMAGE, "--audit-id", "A"), capsys)
    assert status == 2
    assert f"trtguard: error: {build['cache']}" in err


# --- import ----------------------------------------------------------------------------


def test_import_sample_record(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "out.json"
    record = data_dir / "201-flat-record-missing-fields.json"
    status, _, err = run(
        ["manifest", "import", str(record), "--engine-name", "r50.plan", "-o", str(output)], capsys
    )
    assert status == 3  # incomplete: apart from 1 (signature) and 2 (unusable input), issue 25
    assert not output.exists()
    lines = err.splitlines()
    assert lines[0] == "manifest import: missing or invalid (12):"
    assert "  output_engine.size: not in the flat record; pass --engine FILE to read it" in lines
    assert "  builder_config.strict_types: not a field of the flat record format; map it by hand" in lines
    assert lines[-1].startswith(
        "manifest import: signature: not given; record: INCOMPLETE: 12 field(s); nothing written (exit 3: "
    )

    status, _, err = run(["manifest", "import", str(record), "--allow-incomplete", "-o", str(output)], capsys)
    assert status == 0
    assert json.loads(output.read_text())["build_node"]["gpu_name"] is None


def test_import_completed_by_flags(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = json.loads((data_dir / "201-flat-record-missing-fields.json").read_text())
    del record["builder_config"]["strict_types"]
    engine = tmp_path / "r50.plan"
    engine.write_bytes(b"engine bytes")
    record["output_engine_hash"] = hashlib.sha256(b"engine bytes").hexdigest()
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    accuracy = tmp_path / "accuracy.yaml"
    accuracy.write_text(ACCURACY)
    status, out, err = run(
        [
            "manifest", "import", str(path), "--engine", str(engine),
            "--build-timestamp", "2024-06-01T10:15:00Z",
            "--toolchain-image", IMAGE, "--tensorrt-version", "8.6.1.6", "--cuda-version", "12.4.1",
            "--gpu-name", "NVIDIA A100-SXM4-80GB", "--compute-capability", "8.0",
            "--driver-version", "550.54.15",
            "--audit-id", "CHG-1", "--accuracy", str(accuracy),
        ],
        capsys,
    )  # fmt: skip
    assert status == 0, err
    manifest = load_manifest(json.loads(out), "stdout")
    assert manifest.output_engine.size == len(b"engine bytes")
    assert manifest.builder_config.max_batch_size == 16


def test_import_engine_mismatch(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = tmp_path / "other.plan"
    engine.write_bytes(b"x")
    record = data_dir / "201-flat-record-missing-fields.json"
    status, _, err = run(["manifest", "import", str(record), "--engine", str(engine)], capsys)
    assert status == 1
    assert "but the record says output_engine_hash" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"build_timestamp": 1, "build_timestamp": 2}',
            "the flat record is ambiguous: the key 'build_timestamp'",
        ),
        (b'{"build_timestamp": ', "the flat record is not valid JSON: Expecting value"),
        (b'{"a": "\xff"}', "the flat record is not UTF-8 text (byte 7 is not valid UTF-8)"),
    ],
)
def test_import_bad_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(content)
    status, _, err = run(["manifest", "import", str(path)], capsys)
    assert status == 2
    assert message in err
    assert "Traceback" not in err


# --- diff ----------------------------------------------------------------------------


def _manifest_files(data_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    old: dict[str, Any] = json.loads((data_dir / "202-manifest-trt10-weak-int8.json").read_text())
    new = json.loads(json.dumps(old))
    new["builder_config"]["optimization_profiles"][0]["inputs"]["images"]["max"] = [64, 3, 224, 224]
    new["toolchain"]["tensorrt_version"] = "10.8.0.43"
    new["accuracy"][0]["value"] = 0.75
    old_path, new_path = tmp_path / "old.json", tmp_path / "new.json"
    old_path.write_text(json.dumps(old))
    new_path.write_text(json.dumps(new))
    return old_path, new_path


def test_diff_text(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _manifest_files(data_dir, tmp_path)
    status, out, err = run(["manifest", "diff", str(old), str(new)], capsys)
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        f"{old} → {new}: 4 classified change(s), 3 field(s) differ",
        "changes:",
        "  TensorRTMinorUpgrade  TensorRT: 10.5.0.18 → 10.8.0.43",
        "  DynamicShapeChange    optimization profiles: profile 0 'images' max [32, 3, 224, 224] → [64, "
        "3, 224, 224]",
        "  BatchSizeChange       largest batch (dimension 0 of the profiles' max shapes): 32 → 64",
        "  AccuracyDrop          top1_acc 0.7612 → 0.75 (worse by 0.0112, 1.47%) on imagenet-val-2012",
        "fields:",
        '  toolchain.tensorrt_version: "10.5.0.18" → "10.8.0.43"',
        "  builder_config.optimization_profiles[0].inputs.images.max: [32, 3, 224, 224] → [64, 3, 224, 224]",
        "  accuracy[metric=top1_acc].value: 0.7612 → 0.75",
    ]


def test_diff_json_and_tolerance(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _manifest_files(data_dir, tmp_path)
    status, out, _ = run(
        ["manifest", "diff", str(old), str(new), "--format", "json", "--accuracy-tolerance", "0.02"], capsys
    )
    assert status == 0
    document = json.loads(out)
    assert (document["old"], document["new"]) == (str(old), str(new))
    assert [change["kind"] for change in document["changes"]] == [
        "TensorRTMinorUpgrade",
        "DynamicShapeChange",
        "BatchSizeChange",
    ]
    assert len(document["fields"]) == 3


@pytest.mark.parametrize("tolerance", ["-0.1", "nan", "inf"])
def test_diff_tolerance_must_be_a_finite_number(
    data_dir: Path, capsys: pytest.CaptureFixture[str], tolerance: str
) -> None:
    path = data_dir / "202-manifest-trt10-weak-int8.json"
    status, out, err = run(
        ["manifest", "diff", str(path), str(path), "--accuracy-tolerance", tolerance], capsys
    )
    assert (status, out) == (2, "")
    assert "--accuracy-tolerance must be a finite number, 0 or more" in err


def test_diff_identical(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = data_dir / "202-manifest-trt10-weak-int8.json"
    status, out, _ = run(["manifest", "diff", str(path), str(path)], capsys)
    assert (status, out) == (0, f"{path} → {path}: no differences\n")


def test_diff_reads_envelopes_and_says_they_were_not_verified(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    statement = (data_dir / "203-manifest-trt11-strong-int8-statement.json").read_bytes()
    envelope = sign_envelope(PAYLOAD_TYPE, statement, generate_private_key())
    enveloped = tmp_path / "manifest.dsse.json"
    enveloped.write_bytes(envelope.to_json())
    status, out, err = run(
        ["manifest", "diff", str(data_dir / "202-manifest-trt10-weak-int8.json"), str(enveloped)], capsys
    )
    assert status == 0
    assert "  TensorRTMajorUpgrade" in out
    assert err == "manifest diff: DSSE signatures were not verified (use trtguard verify-attestation)\n"


def test_diff_invalid_manifest(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"build_timestamp": "yesterday"}))
    status, out, err = run(
        ["manifest", "diff", str(bad), str(data_dir / "202-manifest-trt10-weak-int8.json")], capsys
    )
    assert (status, out) == (2, "")
    assert err.startswith(f"trtguard: error: {bad}: engine build manifest is not valid (7 problems):\n")
    assert "  build_timestamp: expected an RFC 3339 timestamp with a time zone" in err


def test_console_script_runs(data_dir: Path) -> None:
    trtguard = Path(sys.executable).with_name("trtguard")
    path = data_dir / "202-manifest-trt10-weak-int8.json"
    completed = subprocess.run(
        [str(trtguard), "manifest", "diff", str(path), str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["changes"] == []


@pytest.mark.parametrize(
    ("option", "content", "message"),
    [
        (
            "--builder-config",
            "- typing: weak\n",
            "the builder config must be a mapping of builder_config fields",
        ),
        (
            "--accuracy",
            "top1_acc: 0.9\n",
            "the accuracy file must be a list of {metric, value, dataset: {name, sha256}}",
        ),
    ],
)
def test_settings_files_of_the_wrong_shape(
    build: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    content: str,
    message: str,
) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text(content)
    args = create_args(build)
    args[args.index(option) + 1] = str(path)
    status, _, err = run(args, capsys)
    assert status == 2
    assert f"trtguard: error: {path}: {message}" in err


@pytest.mark.usefixtures("fake_gpu")
def test_draft_keeps_yaml_timestamps(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "build.yaml"
    config.write_text(
        "calibration:\n  time_range: {start: 2025-01-01T00:00:00Z, end: 2025-01-31T00:00:00Z}\n"
    )
    status, out, _ = run(create_args(build, "--config", str(config), "--allow-incomplete"), capsys)
    assert status == 0
    draft = json.loads(out)
    # YAML timestamps are read as the text written (verifier.base._yamldoc), as Kubernetes reads them
    assert draft["calibration"]["dataset"]["time_range"] == {
        "start": "2025-01-01T00:00:00Z",
        "end": "2025-01-31T00:00:00Z",
    }
    assert draft["audit_id"] is None


def test_create_jobs_must_be_positive(build: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(create_args(build, "--jobs", "0"), capsys)
    assert status == 2
    assert "trtguard: error: --jobs: --jobs must be at least 1" in err


@pytest.mark.usefixtures("fake_gpu")
def test_create_with_key_writes_a_signed_envelope(
    build: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = generate_private_key()
    key_file = tmp_path / "build.key"
    key_file.write_bytes(encrypt_private_key(key, b"pw"))
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    output = tmp_path / "manifest.dsse.json"
    status, out, err = run(
        create_args(
            build,
            "--toolchain-image",
            IMAGE,
            "--audit-id",
            "CHG-7",
            "--key",
            str(key_file),
            "-o",
            str(output),
        ),
        capsys,
    )
    assert (status, out) == (0, ""), err
    envelope = Envelope.from_json(output.read_bytes())
    assert verify_envelope(envelope, {"build": key.public_key()}) == ("build",)
    manifest = load_manifest(statement_from_envelope(envelope), str(output))
    assert manifest.audit_id == "CHG-7"
    # --push needs a signature to push; --predicate-only cannot be signed.
    assert (
        run(
            create_args(
                build, "--toolchain-image", IMAGE, "--audit-id", "C", "--push", "r.io/a@sha256:" + "a" * 64
            ),
            capsys,
        )[0]
        == 2
    )


def test_import_a_gpg_signed_record_only_once_its_signature_verifies(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], gnupg: GnuPG
) -> None:
    record = tmp_path / "build.json"
    record.write_bytes((data_dir / "201-flat-record-missing-fields.json").read_bytes())
    signer = gnupg.generate("builds <builds@example.com>", "rsa3072", at=datetime(2024, 1, 1, tzinfo=UTC))
    other = gnupg.generate("other <other@example.com>", "ed25519", at=datetime(2024, 1, 1, tzinfo=UTC))
    (tmp_path / "build.json.asc").write_bytes(gnupg.sign(record.read_bytes(), signer, at=datetime.now(UTC)))
    for name, fingerprint in (("signer", signer), ("other", other)):
        (tmp_path / f"{name}.asc").write_bytes(gnupg.export(fingerprint))
    command = [
        "manifest",
        "import",
        str(record),
        "--allow-incomplete",
        "--signature",
        str(tmp_path / "build.json.asc"),
    ]
    keys = ["--openpgp-key", str(tmp_path / "other.asc"), "--openpgp-key", str(tmp_path / "signer.asc")]
    status, _, err = run([*command, *keys], capsys)
    assert status == 0, err
    assert f"the record's OpenPGP signature verifies: signed by {tmp_path / 'signer.asc'} ({signer})" in err
    assert err.splitlines()[-1].startswith(
        "manifest import: signature: verified; record: INCOMPLETE: 13 field(s); written (exit 0: "
    )

    # Issue 25: a verified signature over an incomplete record is exit 3 (not 2, bad input), and the
    # signature's status is reported apart from the completeness, on standard error and in --report.
    report = tmp_path / "report.json"
    status, _, err = run([*command[:3], *command[4:], *keys, "--report", str(report)], capsys)
    assert status == 3, err
    assert "the record's OpenPGP signature verifies" in err
    assert "signature: verified; record: INCOMPLETE: 13 field(s); nothing written (exit 3" in err
    document = json.loads(report.read_text())
    assert document["signature"]["status"] == "verified"
    assert document["signature"]["signers"] == [{"key": str(tmp_path / "signer.asc"), "fingerprint": signer}]
    assert (document["complete"], document["written"], document["exitStatus"]) == (False, False, 3)
    assert len(document["missing"]) == 13

    status, _, err = run(
        [*command, "--openpgp-key", str(tmp_path / "other.asc"), "--report", str(report)], capsys
    )
    assert status == 1
    assert "is not a valid signature over these bytes" in err
    assert "signature: NOT verified; record: INCOMPLETE: 13 field(s); nothing written (exit 1" in err
    document = json.loads(report.read_text())
    assert document["signature"]["status"] == "not verified"
    assert "is not a valid signature over these bytes" in document["signature"]["reason"]
    assert (document["written"], document["draft"], document["exitStatus"]) == (False, False, 1)
    record.write_bytes(record.read_bytes().replace(b"\n", b"\r\n"))  # the same JSON, other bytes
    status, _, err = run([*command, "--openpgp-key", str(tmp_path / "signer.asc")], capsys)
    assert status == 1
    status, _, err = run(command, capsys)
    assert status == 2
    assert "--signature and --openpgp-key go together" in err


def test_import_checks_the_signature_over_the_bytes_it_imports(
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    gnupg: GnuPG,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """F3 (issue 25): the record is read once. The record file is replaced by another one as soon as it has
    been opened (what a writer racing the import could do); reading it twice (verify, then parse) imported
    the unsigned replacement with the signature "verified"."""
    signed = (data_dir / "201-flat-record-missing-fields.json").read_bytes()
    forged = signed.replace(b"tensorrt:24.05-py3", b"tensorrt:99.99-evil")
    assert forged != signed
    signer = gnupg.generate("builds <builds@example.com>", "ed25519", at=datetime(2024, 1, 1, tzinfo=UTC))
    (tmp_path / "build.json.asc").write_bytes(gnupg.sign(signed, signer, at=datetime.now(UTC)))
    (tmp_path / "signer.asc").write_bytes(gnupg.export(signer))
    record = tmp_path / "build.json"
    record.write_bytes(signed)
    opened: list[Path] = []
    real_open = Path.open

    def open_then_replace(self: Path, *args: Any, **kwargs: Any) -> Any:
        stream = real_open(self, *args, **kwargs)
        if self == record:
            opened.append(self)
            (tmp_path / "forged.json").write_bytes(forged)
            (tmp_path / "forged.json").replace(record)  # the open stream still reads the signed bytes
        return stream

    monkeypatch.setattr(Path, "open", open_then_replace)
    output = tmp_path / "manifest.json"
    command = ["manifest", "import", str(record), "--allow-incomplete", "--output", str(output)]
    signature = [
        "--signature",
        str(tmp_path / "build.json.asc"),
        "--openpgp-key",
        str(tmp_path / "signer.asc"),
    ]
    status, _, err = run([*command, *signature], capsys)
    assert status == 0, err
    assert len(opened) == 1  # one read: verified and parsed
    written = output.read_text()
    assert "24.05-py3" in written and "evil" not in written  # the draft is made from the signed bytes


def test_import_judges_the_record_signature_at_now(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], gnupg: GnuPG
) -> None:
    """Issue 25: ``manifest import --now`` (it had none): a record signed after that time does not verify."""
    record = tmp_path / "build.json"
    record.write_bytes((data_dir / "201-flat-record-missing-fields.json").read_bytes())
    signer = gnupg.generate("builds <builds@example.com>", "ed25519", at=datetime(2024, 1, 1, tzinfo=UTC))
    signed = datetime(2024, 6, 1, tzinfo=UTC)
    (tmp_path / "build.json.asc").write_bytes(gnupg.sign(record.read_bytes(), signer, at=signed))
    (tmp_path / "signer.asc").write_bytes(gnupg.export(signer))
    command = ["manifest", "import", str(record), "--allow-incomplete", "--output", str(tmp_path / "m.json")]
    command += [
        "--signature",
        str(tmp_path / "build.json.asc"),
        "--openpgp-key",
        str(tmp_path / "signer.asc"),
    ]
    assert run([*command, "--now", "2024-06-02T00:00:00Z"], capsys)[0] == 0
    status, _, err = run([*command, "--now", "2024-05-01T00:00:00Z"], capsys)
    assert status == 1 and "after the time judged at" in err, err


@pytest.mark.usefixtures("fake_gpu")
def test_create_records_the_onnx_models_signature(
    build: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--onnx-signature``: the publisher's model signature (made by ``model_signing``) of the ONNX model,
    recorded by its SHA-256 and the signed file; one that lists other files is refused."""
    write_key(tmp_path / "publisher.pem")
    signer = model_signing.signing.Config().use_elliptic_key_signer(private_key=tmp_path / "publisher.pem")
    signature = tmp_path / "model.sig"
    signer.sign(build["onnx"], signature)
    output = tmp_path / "manifest.json"
    argv = create_args(build, "--toolchain-image", IMAGE, "--audit-id", "CHG-8", "-o", str(output))
    status, _, err = run([*argv, "--onnx-signature", str(signature)], capsys)
    assert status == 0, err
    recorded = load_manifest(json.loads(output.read_text()), str(output)).onnx.signature
    assert recorded is not None
    assert recorded.sha256 == hashlib.sha256(signature.read_bytes()).hexdigest()
    assert (recorded.model_name, recorded.file) == ("model.onnx", ".")
    signer.sign(build["data"], signature)  # a signature of the calibration data, not of the model
    output.unlink()
    status, _, err = run([*argv, "--onnx-signature", str(signature)], capsys)
    assert status == 2
    assert "the model signature lists no file with the ONNX model's SHA-256" in err
    assert not output.exists()
