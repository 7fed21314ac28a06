"""One vocabulary for tensor element types across ONNX, TensorRT and the build manifest.

ONNX (``TensorProto.DataType`` names) and TensorRT (``DataType`` members) name the same types differently;
both are mapped to one canonical name ("float32", "float16", …) so that an engine's I/O tensors can be
compared with the model's. :func:`precision_of` maps a canonical name to the manifest's precision
vocabulary ("fp32", "fp16", "bf16", "int8", "fp8", "int4", "fp4").
"""

from __future__ import annotations

#: ONNX ``TensorProto.DataType`` name → canonical name. Unlisted names are lower-cased.
ONNX_DTYPES: dict[str, str] = {
    "FLOAT": "float32",
    "DOUBLE": "float64",
    "FLOAT16": "float16",
    "BFLOAT16": "bfloat16",
    "INT8": "int8",
    "UINT8": "uint8",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
    "FLOAT8E4M3FN": "fp8",
    "INT4": "int4",
    "FLOAT4E2M1": "fp4",
    "FLOAT8E8M0": "e8m0",
}

#: TensorRT ``DataType`` member name → canonical name.
TENSORRT_DTYPES: dict[str, str] = {
    "FLOAT": "float32",
    "HALF": "float16",
    "BF16": "bfloat16",
    "INT8": "int8",
    "UINT8": "uint8",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
    "FP8": "fp8",
    "INT4": "int4",
    "FP4": "fp4",
    "E8M0": "e8m0",
}

_PRECISIONS: dict[str, str] = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int8": "int8",
    "fp8": "fp8",
    "int4": "int4",
    "fp4": "fp4",
}


def precision_of(dtype: str) -> str | None:
    """The manifest precision a canonical dtype computes in, or ``None`` for index and boolean types."""
    return _PRECISIONS.get(dtype)
