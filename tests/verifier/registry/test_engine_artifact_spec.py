"""docs/engine-artifact.md, checked from both sides with code written from that page alone.

The reader below fetches what ``trtguard push-engine`` wrote with plain HTTP requests (no trtguard registry
code) and checks every field the page names. The writer uploads an artifact built by the page's rules,
also with plain HTTP, and trtguard's reader must take its engine layer as the engine file; artifacts that
break one rule of "What a reader accepts" must be refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.localregistry import LocalRegistry, plain_config
from trtguard.cli import main
from verifier.base._deadline import Deadline
from verifier.base._errors import VerificationError
from verifier.base._references import ImageReference
from verifier.registry.client import RegistryClient
from verifier.registry.evidence import RegistryEvidence

pytestmark = pytest.mark.registry

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
ARTIFACT_TYPE = "application/vnd.trtguard.engine.v1"
EMPTY = "application/vnd.oci.empty.v1+json"
TITLE = "org.opencontainers.image.title"
ENGINE, CACHE, ONNX = (
    "application/vnd.trtguard.engine.plan.v1",
    "application/vnd.trtguard.calibration-cache.v1",
    "application/vnd.trtguard.onnx.v1",
)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _fetch_manifest(registry: LocalRegistry, repository: str, reference: str) -> bytes:
    response = httpx.get(
        f"http://{registry.host}/v2/{repository}/manifests/{reference}", headers={"Accept": MANIFEST}
    )
    response.raise_for_status()
    return response.content


def _upload(registry: LocalRegistry, repository: str, data: bytes) -> str:
    """A blob uploaded as the distribution API says: POST for a session, PUT with the digest."""
    digest = _digest(data)
    started = httpx.post(f"http://{registry.host}/v2/{repository}/blobs/uploads/")
    assert started.status_code == 202, started.text
    location = httpx.URL(f"http://{registry.host}").join(started.headers["Location"])
    # The upload location carries a query of its own: the digest is added to it.
    finished = httpx.put(location.copy_add_param("digest", digest), content=data)
    assert finished.status_code == 201, finished.text
    return digest


def test_what_push_engine_writes_is_what_the_page_says(registry: LocalRegistry, tmp_path: Path) -> None:
    files = {
        "resnet.plan": b"engine " * 100,
        "calibration.cache": b"TRT-100500-cache\n",
        "resnet.onnx": b"onnx",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{registry.host}":\n    plain_http: true\n')
    args = [
        "push-engine",
        str(tmp_path / "resnet.plan"),
        "--calibration-cache",
        str(tmp_path / "calibration.cache"),
        "--onnx",
        str(tmp_path / "resnet.onnx"),
        "--to",
        f"{registry.host}/spec/engine:v1",
        "--registry-config",
        str(config),
    ]
    assert main(args) == 0
    raw = _fetch_manifest(registry, "spec/engine", "v1")
    manifest: dict[str, Any] = json.loads(raw)
    assert manifest["schemaVersion"] == 2 and manifest["mediaType"] == MANIFEST
    assert manifest["artifactType"] == ARTIFACT_TYPE
    assert manifest["config"] == {
        "mediaType": EMPTY,
        "digest": _digest(b"{}"),
        "size": 2,
        "data": base64.b64encode(b"{}").decode(),
    }
    assert _digest(b"{}") == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    expected = [(ENGINE, "resnet.plan"), (CACHE, "calibration.cache"), (ONNX, "resnet.onnx")]
    assert [(layer["mediaType"], layer["annotations"][TITLE]) for layer in manifest["layers"]] == expected
    for layer in manifest["layers"]:
        data = files[layer["annotations"][TITLE]]
        # Uncompressed: the layer's digest is the file's SHA-256, and the blob is the file.
        assert (layer["digest"], layer["size"]) == (_digest(data), len(data))
        blob = httpx.get(
            f"http://{registry.host}/v2/spec/engine/blobs/{layer['digest']}", follow_redirects=True
        )
        assert blob.content == data
    created = manifest["annotations"]["org.opencontainers.image.created"]
    assert len(created) == 20 and created.endswith("Z")


def _layer(media_type: str, data: bytes, title: str) -> dict[str, Any]:
    return {
        "mediaType": media_type,
        "digest": _digest(data),
        "size": len(data),
        "annotations": {TITLE: title},
    }


def _push_artifact(
    registry: LocalRegistry,
    tag: str,
    layers: list[tuple[str, bytes, str]],
    artifact_type: str = ARTIFACT_TYPE,
) -> str:
    """An artifact built by the page's rules, pushed with plain HTTP; its manifest digest."""
    repository = "spec/written"
    _upload(registry, repository, b"{}")
    for _, data, _ in layers:
        _upload(registry, repository, data)
    document = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": EMPTY, "digest": _digest(b"{}"), "size": 2},
        "layers": [_layer(media_type, data, title) for media_type, data, title in layers],
    }
    raw = json.dumps(document).encode()
    response = httpx.put(
        f"http://{registry.host}/v2/{repository}/manifests/{tag}",
        content=raw,
        headers={"Content-Type": MANIFEST},
    )
    assert response.status_code == 201, response.text
    return f"{registry.host}/{repository}@{_digest(raw)}"


async def _subjects(registry: LocalRegistry, reference: str) -> Any:
    async with RegistryClient(plain_config(registry.host)) as client:
        return await RegistryEvidence(client).subjects(ImageReference.parse(reference), Deadline.after(10))


async def test_an_artifact_written_from_the_page_is_read_as_an_engine(registry: LocalRegistry) -> None:
    plan, onnx = b"a plan written by another tool", b"its onnx"
    reference = _push_artifact(registry, "ok", [(ENGINE, plan, "model.plan"), (ONNX, onnx, "model.onnx")])
    subjects = await _subjects(registry, reference)
    assert subjects.artifact == reference.split("@")[1]
    assert (subjects.engine_file, subjects.onnx_file, subjects.calibration_cache_file) == (
        _digest(plan),
        _digest(onnx),
        None,
    )
    assert subjects.digests == {subjects.artifact, _digest(plan)}


@pytest.mark.parametrize(
    ("layers", "artifact_type"),
    [
        ([(ENGINE, b"one", "a.plan"), (ENGINE, b"two", "b.plan")], ARTIFACT_TYPE),  # a second engine
        (
            [(ENGINE, b"one", "a.plan"), ("application/vnd.oci.image.layer.v1.tar+gzip", b"x", "x")],
            ARTIFACT_TYPE,
        ),
        ([(CACHE, b"cache", "c.cache")], ARTIFACT_TYPE),  # no engine
        ([(ENGINE, b"one", "a.plan"), (ONNX, b"onnx", "a.plan")], ARTIFACT_TYPE),  # a title twice
        ([(ENGINE, b"one", "../a.plan")], ARTIFACT_TYPE),  # not a plain file name
        ([(ENGINE, b"one", "")], ARTIFACT_TYPE),
        ([(ENGINE, b"one", "a.plan")], " Application/vnd.trtguard.engine.v1"),  # the type, but for case
    ],
    ids=["two-engines", "other-layer", "no-engine", "same-title", "path-title", "no-title", "case"],
)
async def test_an_artifact_that_breaks_a_rule_is_refused(
    registry: LocalRegistry, layers: list[tuple[str, bytes, str]], artifact_type: str
) -> None:
    reference = _push_artifact(registry, "broken", layers, artifact_type)
    with pytest.raises(VerificationError, match="not a well-formed engine artifact"):
        await _subjects(registry, reference)


async def test_another_artifact_type_stands_for_its_own_digest(registry: LocalRegistry) -> None:
    reference = _push_artifact(registry, "other", [(ENGINE, b"one", "a.plan")], "application/example")
    subjects = await _subjects(registry, reference)
    assert subjects.engine_file is None and subjects.digests == {reference.split("@")[1]}
