"""verifier/engine/_onnx_model.py: real ONNX models written with the onnx package, and files that are not."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from verifier.base._digests import hash_file
from verifier.base._errors import InputError
from verifier.engine._onnx_model import InvalidOnnxModel, read_onnx_model


def conv_model(path: Path, *, dtype: int = TensorProto.FLOAT, batch: int | str = "batch") -> Path:
    """A one-Conv model with a (possibly symbolic) batch dimension; weights in the input's dtype."""
    weights = np.ones((4, 3, 3, 3), dtype=np.float16 if dtype == TensorProto.FLOAT16 else np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "W"], ["output"], pads=[1, 1, 1, 1])],
        "conv",
        [helper.make_tensor_value_info("input", dtype, [batch, 3, 32, 32])],
        [helper.make_tensor_value_info("output", dtype, [batch, 4, 32, 32])],
        [numpy_helper.from_array(weights, name="W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


def qdq_model(path: Path) -> Path:
    """Q/DQ around an input: INT8 through the zero point's type."""
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"]),
        ],
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [
            helper.make_tensor("scale", TensorProto.FLOAT, [], [0.1]),
            helper.make_tensor("zero", TensorProto.INT8, [], [0]),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_inputs_outputs_and_hash(tmp_path: Path) -> None:
    path = conv_model(tmp_path / "m.onnx")
    info = read_onnx_model(path)
    assert info.sha256 == hash_file(path).sha256
    assert info.opset == 17
    assert [t.name for t in info.inputs] == ["input"]  # the initializer W is not an input
    assert info.inputs[0].dtype == "float32"
    assert info.inputs[0].shape == ("batch", 3, 32, 32)
    assert info.inputs[0].is_dynamic
    assert info.outputs[0].name == "output"
    assert info.precisions == frozenset({"fp32"})
    assert info.input("input") is info.inputs[0]
    assert info.input("W") is None


def test_fp16_model(tmp_path: Path) -> None:
    info = read_onnx_model(conv_model(tmp_path / "m.onnx", dtype=TensorProto.FLOAT16, batch=1))
    assert info.inputs[0].dtype == "float16"
    assert not info.inputs[0].is_dynamic
    assert info.precisions == frozenset({"fp16"})


def test_qdq_model_carries_int8(tmp_path: Path) -> None:
    info = read_onnx_model(qdq_model(tmp_path / "q.onnx"))
    assert info.precisions == frozenset({"fp32", "int8"})


def test_cast_and_constant_precisions(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["h"], to=TensorProto.BFLOAT16),
            helper.make_node(
                "Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.FLOAT16, [1], [1.0])
            ),
            helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT),
        ],
        "casts",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "c.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert read_onnx_model(path).precisions == frozenset({"fp32", "bf16", "fp16"})


def test_legacy_model_listing_initializers_as_inputs(tmp_path: Path) -> None:
    weights = helper.make_tensor("W", TensorProto.FLOAT, [2], [1.0, 2.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "W"], ["y"])],
        "legacy",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("W", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [weights],
    )
    path = tmp_path / "legacy.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3), path)
    assert [t.name for t in read_onnx_model(path).inputs] == ["x"]


def test_unknown_dimension(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
    )
    path = tmp_path / "u.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    info = read_onnx_model(path)
    assert info.inputs[0].shape == (None, 4)
    assert info.inputs[0].is_dynamic
    assert info.inputs[0].to_json()["shape"] == [None, 4]


def test_sequence_input_is_not_a_tensor(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("SequenceLength", ["s"], ["n"])],
        "seq",
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
    )
    path = tmp_path / "s.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    info = read_onnx_model(path)
    assert info.inputs[0].dtype == "non-tensor"
    assert info.inputs[0].shape is None


@pytest.mark.parametrize("content", [b"", os.urandom(2048), b"not an onnx model at all"])
def test_files_that_are_not_models(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(InvalidOnnxModel) as caught:
        read_onnx_model(path)
    assert "not a valid ONNX model" in caught.value.message
    assert caught.value.location == str(path)


def test_truncated_model(tmp_path: Path) -> None:
    path = conv_model(tmp_path / "m.onnx")
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(InvalidOnnxModel):
        read_onnx_model(path)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the ONNX model"):
        read_onnx_model(tmp_path / "absent.onnx")
