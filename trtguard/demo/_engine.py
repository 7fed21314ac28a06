"""Stand-in engine files for trying the release flow without a GPU (``trtguard demo engine``).

A stand-in plan has the header layout TensorRT ≥ 8.6 writes and trtguard reads
(:mod:`verifier.engine._header`, documented in docs/engine-artifact.md "The plan header"): ``ftrt`` at 0, the
u32 0 at 4, the file's length as a u64 at 0x10, the TensorRT version bytes at 24..27, and a ``ptrt``
serialization archive tag at 0x38 with its format number at 0x40. What follows is a plain-text note saying
that it is a stand-in and the ``--seed`` text, so that two stand-ins of different seeds have different
digests. No TensorRT runtime loads it: ``verify-engine --gpu`` says so, as it should. The ONNX stand-in is a
real ONNX model (one Relu, float32 input ``input`` of shape [batch, 3, 224, 224]), written with the ``onnx``
package (the ``onnx`` extra).
"""

from __future__ import annotations

import struct

from verifier.base import InputError

__all__ = ["SERIALIZATION_VERSIONS", "stand_in_onnx", "stand_in_plan"]

#: Serialization format numbers observed in real plans, by TensorRT minor release (informational).
SERIALIZATION_VERSIONS = {(8, 6): 236, (10, 5): 239}
_NOTE = b"trtguard stand-in engine: a TensorRT plan header and no engine; no GPU can load it.\n"


def stand_in_plan(tensorrt_version: str = "10.8.0.43", seed: str = "") -> bytes:
    """The bytes of a stand-in plan whose header names ``tensorrt_version`` (major.minor.patch.build)."""
    try:
        parts = [int(part) for part in tensorrt_version.split(".")]
    except ValueError:
        parts = []
    if len(parts) != 4 or not all(0 <= part <= 255 for part in parts) or parts[0] < 8:
        raise InputError(
            f"--tensorrt-version {tensorrt_version!r} is not major.minor.patch.build of TensorRT 8.6 or "
            "later",
            hint="e.g. 10.8.0.43 (each number 0..255: the header holds one byte each)",
        )
    body = _NOTE + f"seed: {seed}\n".encode()
    header = bytearray(0x48)
    header[0:4] = b"ftrt"
    header[24:28] = bytes(parts)
    header[0x38:0x3C] = b"ptrt"
    struct.pack_into("<I", header, 0x40, SERIALIZATION_VERSIONS.get((parts[0], parts[1]), 0))
    data = bytes(header) + body
    struct.pack_into("<Q", header, 0x10, len(data))
    return bytes(header) + body


def stand_in_onnx(*, name: str = "stand-in") -> bytes:
    """A minimal real ONNX model, serialized (needs the ``onnx`` package)."""
    try:
        import onnx  # noqa: PLC0415 - an optional extra, loaded only for --onnx
        from onnx import TensorProto, helper  # noqa: PLC0415
    except ImportError:
        raise InputError(
            "writing an ONNX model needs the onnx package", hint="pip install 'trtguard[onnx]'"
        ) from None
    graph = helper.make_graph(
        [helper.make_node("Relu", ["input"], ["output"])],
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3, 224, 224])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="trtguard")
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data
