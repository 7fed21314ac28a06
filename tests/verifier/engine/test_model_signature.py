"""``verify-engine --model-signature``: an OpenSSF Model Signing signature of the engine file (made here by
the real ``model_signing`` library, key and certificate methods; keyless with sigstore/model-transparency's
own signature), with or without a manifest."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import model_signing
import pytest

from tests.conftest import DATA
from tests.verifier.engine.helpers import manifest_for, trtguard
from tests.verifier.model_signing.conftest import write_ca, write_key, write_leaf

MNIST = "sampleMNIST.trt10.5.0.18.engine"


def _sign(model: Path, signature: Path, key: Path) -> None:
    model_signing.signing.Config().use_elliptic_key_signer(private_key=key).sign(model, signature)


def _checks(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    return {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}


def test_an_engine_signed_by_its_publisher_passes(
    copy_plan: Callable[[str], Path],
    tmp_path: Path,
    write_signed: Callable[..., Path],
    builder_pub: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = copy_plan(MNIST)
    write_key(tmp_path / "publisher.pem")
    _sign(engine, tmp_path / "engine.sig", tmp_path / "publisher.pem")
    manifest = write_signed(manifest_for(engine))
    argv: list[str | Path] = [
        engine,
        "--manifest",
        manifest,
        "--key",
        builder_pub,
        "--model-signature",
        tmp_path / "engine.sig",
    ]
    assert trtguard(*argv, "--model-key", tmp_path / "publisher.pub", "--format", "json") == 0
    checks = _checks(capsys)
    assert checks["model_signature.signers"]["status"] == "pass"
    assert checks["model_signature.signers"]["observed"] == [str(tmp_path / "publisher.pub")]
    engine_check = checks["model_signature.engine"]
    assert engine_check["status"] == "pass"
    assert engine_check["message"] == f"the engine file is {engine.name} of the signed model"


def test_another_engine_or_another_key_fails(
    copy_plan: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = copy_plan(MNIST)
    write_key(tmp_path / "publisher.pem")
    write_key(tmp_path / "other.pem")
    _sign(engine, tmp_path / "engine.sig", tmp_path / "publisher.pem")
    signature: list[str | Path] = ["--model-signature", tmp_path / "engine.sig", "--format", "json"]
    assert trtguard(engine, *signature, "--model-key", tmp_path / "other.pub") == 1
    checks = _checks(capsys)
    assert checks["model_signature.signers"]["status"] == "fail"
    assert "signed with another key" in str(checks["model_signature.signers"]["message"])
    engine.write_bytes(engine.read_bytes() + b"\0")  # another build: the signature lists it not
    assert trtguard(engine, *signature, "--model-key", tmp_path / "publisher.pub") == 1
    checks = _checks(capsys)
    assert checks["model_signature.signers"]["status"] == "pass"
    assert checks["model_signature.engine"]["status"] == "fail"


def test_a_folder_signature_and_the_certificate_method(
    copy_plan: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Signed as a file of a folder (the engine beside its config), by a certificate the CA issued."""
    folder = tmp_path / "release"
    folder.mkdir()
    engine = shutil.copy(copy_plan(MNIST), folder / "model.plan")
    (folder / "config.pbtxt").write_text('name: "mnist"\n')
    key = write_key(tmp_path / "publisher.pem")
    write_leaf(tmp_path / "leaf.pem", key, write_ca(tmp_path / "ca.pem", "publisher CA"))
    model_signing.signing.Config().use_certificate_signer(
        private_key=tmp_path / "publisher.pem",
        signing_certificate=tmp_path / "leaf.pem",
        certificate_chain=[tmp_path / "ca.pem"],
    ).sign(folder, tmp_path / "release.sig")
    argv: list[str | Path] = [engine, "--model-signature", tmp_path / "release.sig", "--format", "json"]
    assert trtguard(*argv, "--model-certificate-chain", tmp_path / "ca.pem") == 0
    checks = _checks(capsys)
    assert checks["model_signature.engine"]["message"] == "the engine file is model.plan of the signed model"
    assert checks["model_signature.engine"]["observed"] == ["config.pbtxt", "model.plan"]


def test_keyless_with_upstreams_signature(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """sigstore/model-transparency's keyless signature, of ``signme-1`` standing for an engine file."""
    upstream = DATA / "model-transparency" / "v1.1.0-sigstore"
    engine = shutil.copy(upstream / "signme-1", tmp_path / "signme-1")
    keyless = ["--model-identity", "stefanb@us.ibm.com", "--model-oidc-issuer"]
    keyless += ["https://sigstore.verify.ibm.com/oauth2", "--model-trusted-root"]
    keyless.append(str(DATA / "model-transparency" / "trusted_root.json"))
    argv: list[str | Path] = [
        engine,
        "--model-signature",
        upstream / "model.sig",
        *keyless,
        "--format",
        "json",
    ]
    trtguard(*argv)  # fails plan.format: signme-1 is no TensorRT plan
    checks = _checks(capsys)
    assert checks["model_signature.signers"]["observed"] == [
        "stefanb@us.ibm.com (https://sigstore.verify.ibm.com/oauth2)"
    ]
    assert checks["model_signature.engine"]["status"] == "pass"
    trtguard(*[a.replace("stefanb", "someone") if isinstance(a, str) else a for a in argv])
    assert _checks(capsys)["model_signature.signers"]["status"] == "fail"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model-signature", "x.sig"], "--model-signature needs who may have signed it"),
        (["--model-key", "k.pub"], "only apply with --model-signature"),
        (["--model-signature", "x.sig", "--model-identity", "a@b"], "a keyless signer needs"),
    ],
)
def test_usage_errors(
    copy_plan: Callable[[str], Path], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert trtguard(copy_plan(MNIST), *extra) == 2
    assert message in capsys.readouterr().err


def test_a_key_signature_loads_no_sigstore_verifier(copy_plan: Callable[[str], Path], tmp_path: Path) -> None:
    """A slim GPU environment checks key and certificate signatures without verifier.signatures."""
    engine = copy_plan(MNIST)
    write_key(tmp_path / "publisher.pem")
    _sign(engine, tmp_path / "engine.sig", tmp_path / "publisher.pem")
    probe = (
        "import sys\n"
        "from tests.verifier.engine.helpers import trtguard\n"
        f"code = trtguard({str(engine)!r}, '--model-signature', {str(tmp_path / 'engine.sig')!r}, "
        f"'--model-key', {str(tmp_path / 'publisher.pub')!r})\n"
        "print(code, sorted(m for m in ('sigstore', 'httpx', 'verifier.signatures') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "0 []"
