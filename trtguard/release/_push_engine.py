"""``trtguard push-engine``: a TensorRT engine (and its calibration cache and ONNX model) as an OCI artifact.

The layout is :mod:`verifier.registry.engine_artifact`'s (what the verifier reads): an empty config, one
uncompressed layer per file titled with its file name, so that the engine layer's digest is the engine
file's sha256 and a Pod can mount the artifact as an image volume. The files are checked before anything is
uploaded: each must exist and have a plain file name, and no two may share one (a volume would hold only one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trtguard.release.publish import RegistryWriter
from verifier.base import Deadline, ImageReference, InputError
from verifier.registry import EMPTY_DESCRIPTOR, EMPTY_JSON, OCI_MANIFEST, Descriptor
from verifier.registry.engine_artifact import (
    CALIBRATION_CACHE_LAYER,
    ENGINE_LAYER,
    ONNX_LAYER,
    TITLE_ANNOTATION,
    InvalidEngineArtifact,
    engine_artifact_manifest,
    engine_layers,
    plain_file_name,
)

__all__ = ["CarriedEngine", "EngineArtifact", "carried_engine", "push_engine"]


@dataclass(frozen=True, slots=True)
class EngineArtifact:
    """An engine artifact in a registry: its digest reference and its layers."""

    reference: ImageReference
    engine: Descriptor
    calibration_cache: Descriptor | None = None
    onnx: Descriptor | None = None


async def push_engine(
    writer: RegistryWriter,
    to: ImageReference,
    engine: Path,
    deadline: Deadline,
    *,
    calibration_cache: Path | None = None,
    onnx: Path | None = None,
) -> EngineArtifact:
    """Upload the engine (and optional files) as an engine artifact under ``to``'s tag (or by digest)."""
    if to.digest is not None:
        raise InputError(
            f"{to} carries a digest; an artifact is pushed to a repository or a tag",
            hint="give --to registry/repository[:tag]; the digest is printed after the push",
        )
    files: list[tuple[str, Path]] = [(ENGINE_LAYER, engine)]
    if calibration_cache is not None:
        files.append((CALIBRATION_CACHE_LAYER, calibration_cache))
    if onnx is not None:
        files.append((ONNX_LAYER, onnx))
    _check_files(files)
    await writer.push_blob(to, EMPTY_JSON, EMPTY_DESCRIPTOR.media_type, deadline)
    layers: list[Descriptor] = []
    for media_type, path in files:
        layers.append(
            await writer.push_blob_file(
                to, path, media_type, deadline, annotations={TITLE_ANNOTATION: path.name}
            )
        )
    data = engine_artifact_manifest(layers, created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    pushed = await writer.push_manifest(to, data, OCI_MANIFEST, deadline, tag=to.tag)
    by_type = {layer.media_type: layer for layer in layers}
    return EngineArtifact(
        reference=to.with_digest(pushed.digest),
        engine=by_type[ENGINE_LAYER],
        calibration_cache=by_type.get(CALIBRATION_CACHE_LAYER),
        onnx=by_type.get(ONNX_LAYER),
    )


def _check_files(files: Sequence[tuple[str, Path]]) -> None:
    names: dict[str, Path] = {}
    for _, path in files:
        if not path.is_file():
            raise InputError(
                f"{path} is not a file", location=str(path), hint="give the path of an existing file"
            )
        if not plain_file_name(path.name):
            raise InputError(
                f"the file name {path.name!r} cannot name a file in a volume", location=str(path)
            )
        if path.name in names:
            raise InputError(
                f"{path} and {names[path.name]} have the same file name; the volume would hold only one",
                location=str(path),
                hint="rename one of the files",
            )
        names[path.name] = path


@dataclass(frozen=True, slots=True)
class CarriedEngine:
    """What an artifact in a registry is: the digest of its manifest, and the engine file it carries (its
    engine layer's digest, what change approvals and verifications of it name; None: no engine artifact)."""

    artifact: str
    engine_file: str | None


async def carried_engine(
    writer: RegistryWriter, reference: ImageReference, deadline: Deadline
) -> CarriedEngine:
    """The artifact at ``reference`` (a tag or a digest) and the engine file it carries."""
    manifest = await writer.client.get_manifest(reference, deadline)
    try:
        engine, _, _ = engine_layers(manifest)
    except InvalidEngineArtifact:
        return CarriedEngine(manifest.digest, None)
    return CarriedEngine(manifest.digest, engine.digest)
