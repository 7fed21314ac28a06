"""verifier/engine/_inspector.py: NVIDIA's real DETAILED inspector dumps, the 11.x schema, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifier.engine._inspector import InvalidInspectorOutput, parse_engine_information, precision_in


def _graph(shared_fixtures: Path, build: str) -> str:
    return (
        shared_fixtures / "tensorrt" / "inspector" / f"resnet50-A100-{build}.engine.graph.json"
    ).read_text()


def test_fp32_build(shared_fixtures: Path) -> None:
    layers = parse_engine_information(_graph(shared_fixtures, "fp32"))
    assert layers.detailed
    assert layers.layers == 32
    assert layers.precisions == frozenset({"fp32"})


def test_fp16_build(shared_fixtures: Path) -> None:
    layers = parse_engine_information(_graph(shared_fixtures, "fp16"))
    assert layers.precisions == frozenset({"fp32", "fp16"})
    assert layers.per_precision["fp16"] == 36


def test_qat_int8_build(shared_fixtures: Path) -> None:
    layers = parse_engine_information(_graph(shared_fixtures, "qat-int8"))
    assert layers.precisions == frozenset({"fp32", "fp16", "int8"})
    assert layers.per_precision["int8"] > 0


def test_tensorrt11_schema_with_split_datatype() -> None:
    document = {
        "Layers": [
            {
                "Name": "conv",
                "Inputs": [{"Name": "x", "Format": "Row major linear", "Datatype": "BF16"}],
                "Outputs": [{"Name": "y", "Format": "Row major linear", "DataType": "FP8"}],
            }
        ],
        "I/O Tensors": [{"Name": "x", "IOMode": "Input", "DataType": "BF16"}],
    }
    layers = parse_engine_information(json.dumps(document))
    assert layers.per_precision == {"bf16": 1, "fp8": 1}


def test_layer_names_only_has_no_precision() -> None:
    layers = parse_engine_information(json.dumps({"Layers": ["conv1 + relu", "fc"], "Bindings": ["x", "y"]}))
    assert not layers.detailed
    assert layers.layers == 2
    assert layers.per_precision == {}


@pytest.mark.parametrize(
    ("text", "precision"),
    [
        ("Row major linear FP32", "fp32"),
        ("Channel major FP16 format where channel % 8 == 0", "fp16"),
        ("Four wide channel vectorized row major Int8 format", "int8"),
        ("Row major linear BF16 format", "bf16"),
        ("Row major linear Int32 format", None),
        ("Row major linear Bool format", None),
        ("Half", "fp16"),
        ("Float", "fp32"),
    ],
)
def test_precision_words(text: str, precision: str | None) -> None:
    assert precision_in(text) == precision


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"Bindings": []}', '{"Layers": {}}'])
def test_unknown_output(text: str) -> None:
    with pytest.raises(InvalidInspectorOutput):
        parse_engine_information(text)
