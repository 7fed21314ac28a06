"""verifier/registry/engine_artifact.py: the engine artifact layout, read strictly."""

from __future__ import annotations

import pytest

from verifier.registry._oci import EMPTY_DESCRIPTOR, OCI_MANIFEST, Descriptor, Manifest, image_manifest
from verifier.registry.engine_artifact import (
    CALIBRATION_CACHE_LAYER,
    ENGINE_ARTIFACT_TYPE,
    ENGINE_LAYER,
    ONNX_LAYER,
    TITLE_ANNOTATION,
    InvalidEngineArtifact,
    engine_layers,
)


def _artifact(layers: list[Descriptor], artifact_type: str = ENGINE_ARTIFACT_TYPE) -> Manifest:
    data = image_manifest(config=EMPTY_DESCRIPTOR, layers=layers, artifact_type=artifact_type)
    return Manifest.parse(data, content_type=OCI_MANIFEST, where="test")


def _layer(media_type: str, title: str | None, content: bytes = b"x") -> Descriptor:
    annotations = {TITLE_ANNOTATION: title} if title is not None else {}
    return Descriptor.for_bytes(media_type, content, annotations=annotations)


@pytest.mark.parametrize(
    ("layers", "artifact_type", "words"),
    [
        ([_layer(ENGINE_LAYER, "a.plan")], "application/other", "is not a"),
        (
            [_layer(CALIBRATION_CACHE_LAYER, "c.cache")],
            ENGINE_ARTIFACT_TYPE,
            "no application/vnd.trtguard.engine",
        ),
        (
            [_layer(ENGINE_LAYER, "a.plan"), _layer(ENGINE_LAYER, "b.plan", b"y")],
            ENGINE_ARTIFACT_TYPE,
            "second",
        ),
        (
            [_layer(ENGINE_LAYER, "a.plan"), _layer("application/x-sharedlib", "evil.so")],
            ENGINE_ARTIFACT_TYPE,
            "not an engine file",
        ),
        (
            [_layer("application/vnd.oci.image.layer.v1.tar+gzip", "a.tgz")],
            ENGINE_ARTIFACT_TYPE,
            "not an engine file",
        ),
        ([_layer(ENGINE_LAYER, None)], ENGINE_ARTIFACT_TYPE, "file name"),
        ([_layer(ENGINE_LAYER, "../a.plan")], ENGINE_ARTIFACT_TYPE, "file name"),
        ([_layer(ENGINE_LAYER, "a"), _layer(ONNX_LAYER, "a", b"y")], ENGINE_ARTIFACT_TYPE, "unique"),
    ],
)
def test_engine_layers_is_strict(layers: list[Descriptor], artifact_type: str, words: str) -> None:
    with pytest.raises(InvalidEngineArtifact, match=words):
        engine_layers(_artifact(layers, artifact_type))
