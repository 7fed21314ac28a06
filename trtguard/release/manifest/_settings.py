"""Manifest values given by the user (flags or a ``--config`` file) to ``manifest create`` and ``import``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic_core import PydanticCustomError


def _text(value: Any) -> Any:
    # YAML reads an unquoted 12.10 as the number 12.1: refuse numbers rather than store the wrong version.
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise PydanticCustomError(
            "quoted_text",
            "a string; quote numbers in YAML (cuda_version: '12.10', not 12.10, which reads as 12.1)",
        )
    return value


Text = Annotated[str | None, BeforeValidator(_text)]


class CalibrationSettings(BaseModel):
    """What describes the calibration dataset beyond its bytes."""

    model_config = ConfigDict(extra="forbid")

    sampling: Text = None
    time_range: dict[str, Any] | None = None
    name: Text = None
    uri: Text = None


class ManifestSettings(BaseModel):
    """Values given by flags or by the ``--config`` file (YAML or JSON with these snake_case keys).

    Types are loose on purpose: the values are checked by the manifest model, whose error messages name the
    manifest field.
    """

    model_config = ConfigDict(extra="forbid")

    toolchain_image: Text = None
    tensorrt_version: Text = None
    cuda_version: Text = None
    cudnn_version: Text = None
    gpu_name: Text = None
    compute_capability: Text = None
    driver_version: Text = None
    audit_id: Text = None
    engine_name: Text = None
    onnx_name: Text = None
    onnx_uri: Text = None
    build_timestamp: Any = None
    previous_manifest_digest: Text = None
    previous_engine: Text = None
    calibration: CalibrationSettings | None = None
    builder_config: dict[str, Any] | None = None
    accuracy: list[Any] | None = None
