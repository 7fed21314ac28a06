"""Comparisons of what was read from the files (and the GPU) with what the signed manifest declares.

Each function returns :class:`~verifier.engine._report.Check` objects and never raises for a mismatch. When
there is no usable manifest, the manifest-dependent checks are skipped with the reason the caller gives
(no ``--manifest``, a signature that did not verify, an invalid predicate). One module per thing compared:

* ``plan``: the engine file (hash, size) and its plan header (format, size field, TensorRT version);
* ``calibration``: a calibration cache given with ``--calibration-cache``;
* ``onnx``: an ONNX model given with ``--onnx`` (hash, opset, inputs against the profiles, precisions);
* ``gpu``: what TensorRT reported on deserializing the engine (profiles, compatibility, I/O tensors, layer
  precisions).
"""

from __future__ import annotations

from typing import Any

from verifier.manifest import EngineBuildManifest


def declared_profiles(manifest: EngineBuildManifest) -> list[dict[str, Any]]:
    """The manifest's optimization profiles as JSON (the ``expected`` value of the checks that use them)."""
    return [profile.model_dump(mode="json") for profile in manifest.builder_config.optimization_profiles]
