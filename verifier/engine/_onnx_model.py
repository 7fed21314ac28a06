"""The ONNX model an engine was built from: its hash, inputs, outputs and the precisions it carries.

Read with the ``onnx`` package (the ``onnx`` extra), imported only when a model is read. External weight
files are not loaded: names, types and shapes live in the model file itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.base import InputError, VerificationError, hash_file
from verifier.engine._dtypes import ONNX_DTYPES, precision_of

#: A dimension: a fixed size, a symbolic name (``"batch"``) or ``None`` when the model leaves it unknown.
Dim = int | str | None


class InvalidOnnxModel(VerificationError):
    """The file is not a valid ONNX model."""


@dataclass(frozen=True, slots=True)
class OnnxTensor:
    """One graph input or output."""

    name: str
    #: Canonical dtype name (see :mod:`verifier.engine._dtypes`), e.g. "float32"; "non-tensor" for
    #: sequence, map and optional types.
    dtype: str
    #: ``None`` when the model declares no shape at all (not even the rank).
    shape: tuple[Dim, ...] | None

    @property
    def is_dynamic(self) -> bool:
        """True when any dimension (or the rank) is not fixed."""
        return self.shape is None or any(not isinstance(dim, int) for dim in self.shape)

    def to_json(self) -> dict[str, object]:
        """JSON form: shape as a list with symbolic dimensions as strings."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape is not None else None,
        }


@dataclass(frozen=True, slots=True)
class OnnxModelInfo:
    """What the verifier reads from an ONNX model."""

    sha256: str
    size: int
    ir_version: int
    #: Opset of the default ("ai.onnx") domain.
    opset: int | None
    inputs: tuple[OnnxTensor, ...]
    outputs: tuple[OnnxTensor, ...]
    #: Precisions ("fp32", "fp16", "int8", …) of the tensors, weights, casts and quantize nodes.
    precisions: frozenset[str]

    def input(self, name: str) -> OnnxTensor | None:
        """The graph input called ``name``, if any."""
        return next((tensor for tensor in self.inputs if tensor.name == name), None)

    def to_json(self) -> dict[str, object]:
        """The ``onnx`` object of the JSON report."""
        return {
            "sha256": self.sha256,
            "size": self.size,
            "ir_version": self.ir_version,
            "opset": self.opset,
            "inputs": [tensor.to_json() for tensor in self.inputs],
            "outputs": [tensor.to_json() for tensor in self.outputs],
            "precisions": sorted(self.precisions),
        }


def _onnx() -> Any:
    try:
        return importlib.import_module("onnx")
    except ImportError as error:
        raise InputError(
            "the 'onnx' package is not installed",
            location="--onnx",
            hint="install it with: pip install 'trtguard[onnx]'",
        ) from error


def _dtype_name(onnx: Any, elem_type: int) -> str:
    name: str = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "UNDEFINED"
    return ONNX_DTYPES.get(name, name.lower())


def _tensor(onnx: Any, value_info: Any) -> OnnxTensor:
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        return OnnxTensor(name=value_info.name, dtype="non-tensor", shape=None)
    tensor_type = value_info.type.tensor_type
    shape: tuple[Dim, ...] | None = None
    if tensor_type.HasField("shape"):
        dims: list[Dim] = []
        for dim in tensor_type.shape.dim:
            which = dim.WhichOneof("value")
            if which == "dim_value":
                dims.append(int(dim.dim_value))
            elif which == "dim_param":
                dims.append(str(dim.dim_param))
            else:
                dims.append(None)
        shape = tuple(dims)
    return OnnxTensor(name=value_info.name, dtype=_dtype_name(onnx, tensor_type.elem_type), shape=shape)


def _graphs(onnx: Any, graph: Any) -> Iterator[Any]:
    """``graph`` and every subgraph (If/Loop/Scan bodies) inside it."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(onnx, attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attribute.graphs:
                    yield from _graphs(onnx, subgraph)


def _precisions(onnx: Any, model: Any) -> frozenset[str]:
    """Precisions the model carries: tensor element types, weights (initializers and Constant nodes), Cast
    targets and the quantized type of QuantizeLinear nodes (its zero point's type, or ``output_dtype``
    from opset 21)."""
    found: set[str] = set()

    def add(elem_type: int) -> None:
        precision = precision_of(_dtype_name(onnx, elem_type))
        if precision is not None:
            found.add(precision)

    for graph in _graphs(onnx, model.graph):
        initializer_types = {init.name: init.data_type for init in graph.initializer}
        for value_info in (*graph.input, *graph.output, *graph.value_info):
            if value_info.type.WhichOneof("value") == "tensor_type":
                add(value_info.type.tensor_type.elem_type)
        for elem_type in initializer_types.values():
            add(elem_type)
        for node in graph.node:
            if node.op_type == "Cast":
                for attribute in node.attribute:
                    if attribute.name == "to":
                        add(attribute.i)
            elif node.op_type == "Constant":
                for attribute in node.attribute:
                    if attribute.name == "value":
                        add(attribute.t.data_type)
            elif node.op_type == "QuantizeLinear":
                for attribute in node.attribute:
                    if attribute.name == "output_dtype" and attribute.i:
                        add(attribute.i)
                if len(node.input) > 2 and node.input[2] in initializer_types:
                    add(initializer_types[node.input[2]])
    return frozenset(found)


def read_onnx_model(path: Path) -> OnnxModelInfo:
    """Hash and read the ONNX model at ``path``.

    Raises :class:`InputError` when the file cannot be read or the ``onnx`` package is missing, and
    :class:`InvalidOnnxModel` when the file is not a valid ONNX model.
    """
    onnx = _onnx()
    try:
        digest = hash_file(path)
    except OSError as error:
        raise InputError(
            f"cannot read the ONNX model: {error.strerror}",
            location=str(path),
            hint="check the path given to --onnx",
        ) from error
    # protobuf's DecodeError is what onnx.load raises on bytes that are not a ModelProto.
    decode_error = importlib.import_module("google.protobuf.message").DecodeError
    try:
        model = onnx.load(str(path), load_external_data=False)
        # check_model catches what protobuf's lenient parser lets through (random bytes often decode as an
        # empty model).
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, decode_error, ValueError) as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InvalidOnnxModel(
            f"not a valid ONNX model: {first_line}",
            location=str(path),
            hint="give the .onnx file the engine was built from",
        ) from error
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    opset = next(
        (int(entry.version) for entry in model.opset_import if entry.domain in ("", "ai.onnx")),
        None,
    )
    return OnnxModelInfo(
        sha256=digest.sha256,
        size=digest.size,
        ir_version=int(model.ir_version),
        opset=opset,
        # Models exported with IR < 4 list initializers among the inputs; they are weights, not inputs.
        inputs=tuple(_tensor(onnx, value) for value in graph.input if value.name not in initializers),
        outputs=tuple(_tensor(onnx, value) for value in graph.output),
        precisions=_precisions(onnx, model),
    )
