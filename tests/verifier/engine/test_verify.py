"""verifier/engine/_verify.py: every public plan against a signed manifest, the manifest's signature and
predicate, and the gates: no GPU run before the hash matched a manifest signed by a trusted key.

The comparisons themselves are tested beside their modules, in tests/verifier/engine/checks/."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.verifier.engine.helpers import (
    LEGACY_VERSIONS,
    MNIST,
    PLANS,
    gpu_manifest,
    manifest_for,
    message,
    status,
)
from verifier.base._digests import hash_file
from verifier.base._errors import InputError
from verifier.crypto._keys import PrivateKey, PublicKey
from verifier.engine import (
    CheckStatus,
    EngineReport,
    GpuOptions,
    VerifyRequest,
    load_signed_manifest,
    verify_engine,
)

# --- the public plans ---


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_public_plan_matches_its_manifest(
    plans_dir: Path, verify: Callable[..., EngineReport], name: str
) -> None:
    engine = plans_dir / name
    version = PLANS[name] or LEGACY_VERSIONS[name]
    report = verify(engine, manifest_for(engine, **{"toolchain.tensorrt_version": version}))
    assert report.ok, report.render_text()
    for check in (
        "manifest.signature",
        "manifest.format",
        "output_engine.sha256",
        "output_engine.size",
        "plan.format",
        "plan.size",
    ):
        assert status(report, check) is CheckStatus.PASS, check
    expected = CheckStatus.PASS if PLANS[name] else CheckStatus.SKIPPED
    assert status(report, "toolchain.tensorrt_version") is expected
    if PLANS[name] is None:
        assert "do not record the TensorRT version" in message(report, "toolchain.tensorrt_version")
    assert status(report, "gpu.deserialize") is CheckStatus.SKIPPED
    assert report.sha256 == hash_file(engine).sha256
    assert report.manifest is not None and report.manifest.signers == ("builder",)
    assert report.manifest.audit_id == "AUDIT-500"


def test_without_a_manifest_only_the_file_is_checked(plans_dir: Path) -> None:
    report = verify_engine(VerifyRequest(engine=plans_dir / MNIST))
    assert report.ok
    assert status(report, "manifest.signature") is CheckStatus.SKIPPED
    assert status(report, "output_engine.sha256") is CheckStatus.SKIPPED
    assert report.header.tensorrt_version == "10.5.0.18"


# --- the manifest ---


def test_other_engine_hash(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    manifest = manifest_for(engine, **{"output_engine.sha256": "0" * 64})
    report = verify(engine, manifest, gpu=GpuOptions(child_command=("/nonexistent",)))
    assert status(report, "output_engine.sha256") is CheckStatus.FAIL
    assert "not the engine that was built" in message(report, "output_engine.sha256")
    # Never deserialized: the gate stops before the child would start.
    assert status(report, "gpu.deserialize") is CheckStatus.SKIPPED
    assert "hash did not match" in message(report, "gpu.deserialize")
    assert report.gpu is None


def test_untrusted_signer(
    plans_dir: Path, verify: Callable[..., EngineReport], other_key: PrivateKey
) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), key=other_key)
    assert status(report, "manifest.signature") is CheckStatus.FAIL
    assert status(report, "manifest.format") is CheckStatus.SKIPPED
    assert "signature did not verify" in message(report, "output_engine.sha256")
    assert not report.ok
    assert report.manifest is not None and report.manifest.signers == ()


def test_subject_other_than_output_engine(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(engine, manifest_for(engine), sign_options={"subject_sha256": "e" * 64})
    assert status(report, "manifest.format") is CheckStatus.FAIL
    assert "no subject of the Statement" in message(report, "manifest.format")
    assert status(report, "output_engine.sha256") is CheckStatus.SKIPPED


def test_invalid_predicate(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    manifest = manifest_for(engine)
    del manifest["audit_id"]
    report = verify(engine, manifest)
    assert status(report, "manifest.signature") is CheckStatus.PASS
    assert status(report, "manifest.format") is CheckStatus.FAIL
    assert "audit_id" in message(report, "manifest.format")


def test_envelope_that_is_not_json_is_an_input_error(tmp_path: Path, builder_pub: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="not a DSSE envelope"):
        load_signed_manifest(path, {"b": PublicKey.from_pem(builder_pub.read_bytes())})


def test_missing_engine_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the engine file"):
        verify_engine(VerifyRequest(engine=tmp_path / "absent.plan"))


# --- the GPU phase ---


def test_real_child_without_gpu(plans_dir: Path, verify: Callable[..., EngineReport]) -> None:
    engine = plans_dir / MNIST
    report = verify(
        engine, gpu_manifest(engine), gpu=GpuOptions(env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    )
    assert status(report, "gpu.deserialize") is CheckStatus.FAIL
    assert "no GPU" in message(report, "gpu.deserialize")
    assert report.to_json()["sha256"] == hash_file(engine).sha256


def test_gpu_without_a_manifest_is_refused(plans_dir: Path) -> None:
    report = verify_engine(
        VerifyRequest(engine=plans_dir / MNIST, gpu=GpuOptions(child_command=("/nonexistent",)))
    )
    assert status(report, "gpu.deserialize") is CheckStatus.FAIL
    assert "only after its hash matched a manifest signed by a trusted key" in message(
        report, "gpu.deserialize"
    )
    assert report.gpu is None
