"""Building and publishing: registry writing on the verifier's transport, push-engine, attach-attestation, and
build manifests (``manifest/``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtguard.release._attach import (
        Attached,
        attach_attestation,
        attach_model_signature,
        attach_notation_signature,
        attach_openpgp_statement,
    )
    from trtguard.release._push_engine import CarriedEngine, carried_engine, push_engine

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "Attached",
            "attach_attestation",
            "attach_model_signature",
            "attach_notation_signature",
            "attach_openpgp_statement",
        ),
        "trtguard.release._attach",
    ),
    **dict.fromkeys(("CarriedEngine", "carried_engine", "push_engine"), "trtguard.release._push_engine"),
}

__all__ = [
    "Attached",
    "CarriedEngine",
    "attach_attestation",
    "attach_model_signature",
    "attach_notation_signature",
    "attach_openpgp_statement",
    "carried_engine",
    "push_engine",
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
