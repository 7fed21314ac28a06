"""trtguard/release/_push_engine.py: engine artifacts pushed to a real registry and read back."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.support.localregistry import LocalRegistry
from trtguard.release._push_engine import push_engine
from trtguard.release.publish import RegistryWriter
from verifier.base._deadline import Deadline
from verifier.base._errors import InputError
from verifier.base._references import ImageReference
from verifier.registry._oci import EMPTY_DESCRIPTOR
from verifier.registry.client import RegistryClient
from verifier.registry.engine_artifact import (
    CALIBRATION_CACHE_LAYER,
    ENGINE_ARTIFACT_TYPE,
    ENGINE_LAYER,
    ONNX_LAYER,
    TITLE_ANNOTATION,
    engine_layers,
)


def _files(folder: Path) -> tuple[Path, Path, Path]:
    engine = folder / "model.plan"
    engine.write_bytes(b"ftrt" + bytes(range(256)) * 64)
    calibration = folder / "calib.cache"
    calibration.write_bytes(b"TRT-8601-EntropyCalibration2\ninput: 3c010a14\n")
    onnx = folder / "model.onnx"
    onnx.write_bytes(b"\x08\x07\x12\x07pytorch" + b"\x00" * 100)
    return engine, calibration, onnx


def _sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


async def test_engine_artifact_layout(
    client: RegistryClient, writer: RegistryWriter, registry: LocalRegistry, tmp_path: Path
) -> None:
    engine, calibration, onnx = _files(tmp_path)
    to = ImageReference.parse(f"{registry.host}/models/resnet:v1")
    artifact = await push_engine(
        writer, to, engine, Deadline.after(30), calibration_cache=calibration, onnx=onnx
    )
    assert artifact.reference.tag == "v1" and artifact.reference.digest is not None
    assert artifact.engine.digest == _sha(engine)  # uncompressed: the layer digest is the file's sha256
    assert artifact.engine.size == engine.stat().st_size
    manifest = await client.get_manifest(to, Deadline.after(10))
    assert manifest is not None and manifest.digest == artifact.reference.digest
    assert manifest.artifact_type == ENGINE_ARTIFACT_TYPE
    assert manifest.config == EMPTY_DESCRIPTOR
    assert [(layer.media_type, layer.annotations[TITLE_ANNOTATION]) for layer in manifest.layers] == [
        (ENGINE_LAYER, "model.plan"),
        (CALIBRATION_CACHE_LAYER, "calib.cache"),
        (ONNX_LAYER, "model.onnx"),
    ]
    found = engine_layers(manifest)
    assert [d.digest if d else None for d in found] == [_sha(engine), _sha(calibration), _sha(onnx)]
    assert await client.get_blob(to, manifest.layers[0], Deadline.after(10)) == engine.read_bytes()


async def test_engine_alone_and_pushed_again(
    writer: RegistryWriter, registry: LocalRegistry, tmp_path: Path
) -> None:
    engine, _, _ = _files(tmp_path)
    to = ImageReference.parse(f"{registry.host}/models/alone:v1")
    first = await push_engine(writer, to, engine, Deadline.after(30))
    assert first.calibration_cache is None and first.onnx is None
    untagged = ImageReference(to.registry, to.repository, None, None)
    second = await push_engine(writer, untagged, engine, Deadline.after(30))
    assert second.reference.tag is None and second.engine == first.engine


@pytest.mark.parametrize("problem", ["digest", "missing", "same-name"])
async def test_bad_push_requests(
    writer: RegistryWriter, registry: LocalRegistry, tmp_path: Path, problem: str
) -> None:
    engine, calibration, _ = _files(tmp_path)
    to = ImageReference.parse(f"{registry.host}/models/bad:v1")
    if problem == "digest":
        with pytest.raises(InputError, match="carries a digest"):
            await push_engine(writer, to.with_digest("sha256:" + "1" * 64), engine, Deadline.after(5))
    elif problem == "missing":
        with pytest.raises(InputError, match="is not a file"):
            await push_engine(writer, to, tmp_path / "absent.plan", Deadline.after(5))
    else:
        other = tmp_path / "sub"
        other.mkdir()
        clash = other / engine.name
        clash.write_bytes(b"x")
        with pytest.raises(InputError, match="same file name"):
            await push_engine(writer, to, engine, Deadline.after(5), onnx=clash)
    assert calibration.exists()
