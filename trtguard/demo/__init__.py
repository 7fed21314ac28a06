"""``make demo`` and ``trtguard demo``: the demo's material, its run against a local webhook, and ``demo
engine``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtguard.demo._engine import stand_in_onnx, stand_in_plan

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("stand_in_onnx", "stand_in_plan"), "trtguard.demo._engine"),
}

__all__ = [
    "stand_in_onnx",
    "stand_in_plan",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
