"""Per-layer precision from TensorRT's engine inspector JSON (``IEngineInspector.get_engine_information``).

Two schemas exist. Up to TensorRT 10 each layer's tensors carry one ``"Format/Datatype"`` string ("Channel
major FP16 format where channel % 8 == 0"); TensorRT 11 splits it into ``"Format"`` and ``"Datatype"``.
Layers are objects only when the engine was built with ``ProfilingVerbosity.DETAILED``; with the default
(``LAYER_NAMES_ONLY``) each layer is a bare name and carries no precision at all.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from verifier.base import VerificationError

_WORD = re.compile(r"[A-Za-z0-9]+")
_PRECISION_WORDS = {
    "fp32": "fp32",
    "float": "fp32",
    "float32": "fp32",
    "fp16": "fp16",
    "half": "fp16",
    "float16": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "int8": "int8",
    "fp8": "fp8",
    "int4": "int4",
    "fp4": "fp4",
}
_DATATYPE_KEYS = ("Datatype", "DataType", "Format/Datatype")


class InvalidInspectorOutput(VerificationError):
    """The inspector's output is not the JSON this module knows."""


@dataclass(frozen=True, slots=True)
class LayerPrecisions:
    """Which precisions the engine's layers compute in."""

    layers: int
    #: False when the layers are bare names (the engine was not built with DETAILED profiling verbosity).
    detailed: bool
    #: Number of layers per precision; a layer counts under every precision among its tensors.
    per_precision: dict[str, int]

    @property
    def precisions(self) -> frozenset[str]:
        """The precisions seen in any layer."""
        return frozenset(self.per_precision)


def precision_in(description: str) -> str | None:
    """The precision named in a format/datatype string, e.g. "Four wide channel vectorized row major Int8
    format" → "int8"; ``None`` for index and boolean types (Int32, Int64, Bool, UInt8)."""
    for word in _WORD.findall(description):
        precision = _PRECISION_WORDS.get(word.lower())
        if precision is not None:
            return precision
    return None


def _tensor_precision(tensor: Any) -> str | None:
    if not isinstance(tensor, dict):
        return None
    for key in _DATATYPE_KEYS:
        value = tensor.get(key)
        if isinstance(value, str):
            return precision_in(value)
    return None


def parse_engine_information(text: str) -> LayerPrecisions:
    """Read the layers out of ``get_engine_information(LayerInformationFormat.JSON)``.

    Raises :class:`InvalidInspectorOutput` for text that is not such JSON.
    """
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InvalidInspectorOutput(
            f"the engine inspector's output is not JSON: {error}",
            hint="report this with the TensorRT version; the inspector's format may have changed",
        ) from error
    layers = document.get("Layers") if isinstance(document, dict) else None
    if not isinstance(layers, list):
        raise InvalidInspectorOutput(
            "the engine inspector's JSON has no 'Layers' list",
            hint="report this with the TensorRT version; the inspector's format may have changed",
        )
    detailed = any(isinstance(layer, dict) for layer in layers)
    counts: Counter[str] = Counter()
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        tensors = [*(layer.get("Inputs") or []), *(layer.get("Outputs") or [])]
        found = {p for p in (_tensor_precision(t) for t in tensors) if p is not None}
        counts.update(found)
    return LayerPrecisions(layers=len(layers), detailed=detailed, per_precision=dict(sorted(counts.items())))
