"""The state of one evaluation, shared by the evaluator and every rule family: what is judged, what an UPDATE
changed, what each rule counted, and each evidence question asked once; and the subjects the rules judge.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.evaluation._state import (
        CLOCK_SKEW,
        AdmissionHistory,
        Changes,
        Counted,
        EngineSubject,
        Evaluation,
        ImageSubject,
        VerifiedBuild,
        WorkloadSubject,
    )

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "CLOCK_SKEW",
            "AdmissionHistory",
            "Changes",
            "Counted",
            "EngineSubject",
            "Evaluation",
            "ImageSubject",
            "VerifiedBuild",
            "WorkloadSubject",
        ),
        "policies.evaluation._state",
    ),
}

__all__ = [
    "CLOCK_SKEW",
    "AdmissionHistory",
    "Changes",
    "Counted",
    "EngineSubject",
    "Evaluation",
    "ImageSubject",
    "VerifiedBuild",
    "WorkloadSubject",
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
