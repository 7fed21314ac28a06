"""verifier/engine/_private/child.py: what the child reads from an engine, and that it asks the real API.

``FakeEngine`` mimics the ``ICudaEngine`` calls the child makes, so that the collection logic runs on a
machine without a GPU; ``test_real_runtime_has_every_call_the_child_makes`` checks those calls against the
real TensorRT module wherever one is importable (on the GPU machine: tensorrt_lean 11.4).
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import json
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from verifier.engine._private import child
from verifier.engine._runtime import ChildReport, EngineFacts


class Mode(enum.Enum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class DataType(enum.Enum):
    FLOAT = 0
    HALF = 1
    INT32 = 3


class Location(enum.Enum):
    DEVICE = 0


class Level(enum.Enum):
    NONE = 0
    AMPERE_PLUS = 1


class Verbosity(enum.Enum):
    LAYER_NAMES_ONLY = 0


class Capability(enum.Enum):
    STANDARD = 0


class FakeEngine:
    """FAKE ICudaEngine: a dynamic-batch image input, a shape-tensor input and one FP16 output."""

    _tensors: ClassVar[dict[str, tuple[Mode, DataType, tuple[int, ...], str, bool]]] = {
        "images": (Mode.INPUT, DataType.FLOAT, (-1, 3, 224, 224), "Row major linear FP32 format", False),
        "size": (Mode.INPUT, DataType.INT32, (2,), "Row major linear INT32 format", True),
        "logits": (Mode.OUTPUT, DataType.HALF, (-1, 1000), "Row major linear FP16 format", False),
    }
    num_io_tensors = 3
    num_optimization_profiles = 2
    name = "resnet"
    num_layers = 57
    hardware_compatibility_level = Level.AMPERE_PLUS
    profiling_verbosity = Verbosity.LAYER_NAMES_ONLY
    engine_capability = Capability.STANDARD
    device_memory_size_v2 = 123456
    refittable = False

    def get_tensor_name(self, index: int) -> str:
        return list(self._tensors)[index]

    def get_tensor_mode(self, name: str) -> Mode:
        return self._tensors[name][0]

    def get_tensor_dtype(self, name: str) -> DataType:
        return self._tensors[name][1]

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self._tensors[name][2]

    def get_tensor_format_desc(self, name: str) -> str:
        return self._tensors[name][3]

    def get_tensor_location(self, name: str) -> Location:
        return Location.DEVICE

    def is_shape_inference_io(self, name: str) -> bool:
        return self._tensors[name][4]

    def get_tensor_profile_shape(self, name: str, profile: int) -> list[tuple[int, ...]]:
        if name == "size":
            return [(2,), (2,), (2,)]
        top = 8 if profile == 0 else 32
        return [(1, 3, 224, 224), (top // 2, 3, 224, 224), (top, 3, 224, 224)]

    def get_tensor_profile_values(self, name: str, profile: int) -> list[tuple[int, ...]]:
        return [(64, 64), (224, 224), (512, 512)]

    def create_engine_inspector(self) -> Any:
        raise TypeError("Unable to convert function return value to a Python type!")


def test_describe_engine_reads_tensors_profiles_and_facts() -> None:
    facts = child.describe_engine(FakeEngine())
    parsed = EngineFacts.model_validate(facts)  # the parent accepts what the child produces
    assert [t.name for t in parsed.io_tensors] == ["images", "size", "logits"]
    images = parsed.io_tensors[0]
    assert (images.mode, images.dtype, images.shape, images.canonical_dtype) == (
        "INPUT",
        "FLOAT",
        [-1, 3, 224, 224],
        "float32",
    )
    assert parsed.io_tensors[2].canonical_dtype == "float16"
    assert len(parsed.optimization_profiles) == 2
    assert parsed.optimization_profiles[1].inputs["images"].max == [32, 3, 224, 224]
    assert "logits" not in parsed.optimization_profiles[0].inputs
    size = parsed.optimization_profiles[0].inputs["size"]
    assert size.values is not None and size.values.max == [512, 512]
    assert parsed.hardware_compatibility_level == "AMPERE_PLUS"
    assert parsed.device_memory_size == 123456
    assert parsed.num_layers == 57
    assert parsed.unavailable == []


def test_missing_attributes_are_listed_not_fatal() -> None:
    class OldEngine(FakeEngine):
        device_memory_size = 99

        @property
        def device_memory_size_v2(self) -> int:  # type: ignore[override]
            raise AttributeError("no device_memory_size_v2 before TensorRT 10")

    facts = child.describe_engine(OldEngine())
    assert facts["device_memory_size"] == 99
    assert any("device_memory_size_v2" in entry for entry in facts["unavailable"])


def test_inspector_missing_in_lean_is_said() -> None:
    lean_like = SimpleNamespace()  # no EngineInspector, no LayerInformationFormat
    result = child.inspect_layers(lean_like, "tensorrt_lean_bindings", FakeEngine())
    assert result["available"] is False
    assert "tensorrt_lean_bindings has no EngineInspector binding" in result["reason"]


def test_inspector_type_error_is_reported() -> None:
    full_like = SimpleNamespace(EngineInspector=object, LayerInformationFormat=SimpleNamespace(JSON=1))
    result = child.inspect_layers(full_like, "tensorrt", FakeEngine())
    assert result["available"] is False
    assert "TypeError" in result["reason"]


def test_inspector_json_is_returned() -> None:
    class DetailedEngine(FakeEngine):
        def create_engine_inspector(self) -> Any:
            return SimpleNamespace(get_engine_information=lambda fmt: json.dumps({"Layers": ["a"]}))

    full_like = SimpleNamespace(EngineInspector=object, LayerInformationFormat=SimpleNamespace(JSON=1))
    result = child.inspect_layers(full_like, "tensorrt", DetailedEngine())
    assert result == {"available": True, "reason": None, "information": '{"Layers": ["a"]}'}


def test_logger_keeps_messages_and_drops_verbose() -> None:
    class ILogger:
        def __init__(self) -> None:
            self.initialised = True

    Severity = enum.Enum("Severity", ["ERROR", "VERBOSE", "INFO"])
    logger = child.make_logger(SimpleNamespace(ILogger=ILogger))
    assert logger.initialised
    logger.log(Severity.ERROR, "Error Code 1: Serialization (boom)")
    logger.log(Severity.VERBOSE, "chatter")
    logger.log(Severity.INFO, "x" * 10_000)
    assert logger.messages[0] == {"severity": "ERROR", "message": "Error Code 1: Serialization (boom)"}
    assert len(logger.messages) == 2
    assert len(logger.messages[1]["message"]) == 4000
    for _ in range(300):
        logger.log(Severity.INFO, "more")
    assert len(logger.messages) == 200
    assert logger.dropped == 102


def test_child_report_schema_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="surprise"):
        ChildReport.model_validate(
            {"protocol": 1, "status": "ok", "message": "", "timings": {}, "surprise": 1}
        )


def _importable_runtime() -> str | None:
    return next((name for name in child.RUNTIME_MODULES if importlib.util.find_spec(name) is not None), None)


@pytest.mark.skipif(_importable_runtime() is None, reason="no TensorRT module installed here")
def test_real_runtime_has_every_call_the_child_makes() -> None:
    name = _importable_runtime()
    assert name is not None
    trt = importlib.import_module(name)
    engine_calls = {n for n in vars(FakeEngine) if not n.startswith("_")}
    missing = sorted(n for n in engine_calls if not hasattr(trt.ICudaEngine, n))
    assert missing == [], f"{name}.ICudaEngine lacks {missing}"
    for attribute in ("deserialize_cuda_engine", "engine_host_code_allowed", "temporary_directory"):
        assert hasattr(trt.Runtime, attribute), attribute
    assert hasattr(trt, "ILogger")
    assert isinstance(trt.__version__, str)
    logger = child.make_logger(trt)  # subclassing the real ILogger works without a GPU
    assert logger.messages == []
    if name != "tensorrt":
        # research notes §0.3: the lean module exports no EngineInspector; the child must say so.
        assert child.inspect_layers(trt, name, FakeEngine())["available"] is False
