"""TensorRT engines as OCI artifacts that a Pod mounts as an image volume.

The layout is specified in docs/engine-artifact.md (for other tools, and tested from that page). In short
(OCI image-spec "artifact" guidance, the form CRI-O mounts as files):

* manifest ``artifactType`` ``application/vnd.trtguard.engine.v1``, ``config`` the OCI empty descriptor;
* one layer per file, **uncompressed**, so that a layer's digest is the file's sha256: the engine layer's
  digest is exactly the ``output_engine.sha256`` a build manifest names as its subject;
* each layer carries ``org.opencontainers.image.title`` = the file name, which CRI-O uses as the file's
  name inside the mounted volume.

Layer media types: ``application/vnd.trtguard.engine.plan.v1`` (the serialized engine; exactly one),
``application/vnd.trtguard.calibration-cache.v1`` and ``application/vnd.trtguard.onnx.v1`` (optional).

Pushing such an artifact is the release tooling's: ``trtguard.release._push_engine``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from verifier.registry._oci import EMPTY_DESCRIPTOR, Descriptor, Manifest, image_manifest

ENGINE_ARTIFACT_TYPE: Final = "application/vnd.trtguard.engine.v1"
ENGINE_LAYER: Final = "application/vnd.trtguard.engine.plan.v1"
CALIBRATION_CACHE_LAYER: Final = "application/vnd.trtguard.calibration-cache.v1"
ONNX_LAYER: Final = "application/vnd.trtguard.onnx.v1"
TITLE_ANNOTATION: Final = "org.opencontainers.image.title"
_LAYER_TYPES = frozenset({ENGINE_LAYER, CALIBRATION_CACHE_LAYER, ONNX_LAYER})


class InvalidEngineArtifact(ValueError):
    """A manifest that says it is an engine artifact but does not follow the layout."""


def engine_layers(manifest: Manifest) -> tuple[Descriptor, Descriptor | None, Descriptor | None]:
    """(engine, calibration cache, ONNX) layers of an engine artifact manifest; strict about the layout.

    Anything unexpected — another layer media type, a second engine, a compressed or untitled layer — is
    refused, so that an artifact cannot smuggle extra files into the volume next to a signed engine.
    """
    if manifest.is_index or manifest.artifact_type != ENGINE_ARTIFACT_TYPE:
        raise InvalidEngineArtifact(f"{manifest.digest} is not a {ENGINE_ARTIFACT_TYPE} artifact")
    found: dict[str, Descriptor] = {}
    titles: set[str] = set()
    for index, layer in enumerate(manifest.layers):
        if layer.media_type not in _LAYER_TYPES:
            raise InvalidEngineArtifact(
                f"layer {index} has media type {layer.media_type}, not an engine file"
            )
        if layer.media_type in found:
            raise InvalidEngineArtifact(f"layer {index} is a second {layer.media_type} layer")
        title = layer.annotations.get(TITLE_ANNOTATION, "")
        if not plain_file_name(title) or title in titles:
            raise InvalidEngineArtifact(f"layer {index} has no unique plain file name in {TITLE_ANNOTATION}")
        titles.add(title)
        found[layer.media_type] = layer
    if ENGINE_LAYER not in found:
        raise InvalidEngineArtifact(f"no {ENGINE_LAYER} layer")
    return found[ENGINE_LAYER], found.get(CALIBRATION_CACHE_LAYER), found.get(ONNX_LAYER)


def engine_layer(name: str, sha256: str, size: int, media_type: str = ENGINE_LAYER) -> Descriptor:
    """The layer descriptor of an engine file (or of a calibration cache or ONNX model) named ``name``."""
    return Descriptor(media_type, f"sha256:{sha256}", size, annotations={TITLE_ANNOTATION: name})


def engine_artifact_manifest(layers: Sequence[Descriptor], *, created: str | None = None) -> bytes:
    """The manifest bytes of an engine artifact with ``layers`` (the engine first): what a registry stores."""
    return image_manifest(
        config=EMPTY_DESCRIPTOR,
        layers=layers,
        artifact_type=ENGINE_ARTIFACT_TYPE,
        annotations={"org.opencontainers.image.created": created} if created else None,
    )


def plain_file_name(name: str) -> bool:
    """Whether ``name`` can name a file in a mounted volume: not empty, ``.`` or ``..``, no ``/`` or NUL."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\x00" not in name
