"""The auditor's tools: a workload's history, the chain check of what is printed, evidence packages
(``package/``) and their HTML report (``report/``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtguard.audit._chain import ChainCheck, check_chain, follows
    from trtguard.audit._history import (
        HistoryEntry,
        ManifestComparison,
        compare_manifests,
        history_json,
        last_carried,
        not_delivered,
        not_delivered_json,
        recorded_objects,
        replay,
        signer_names,
        workload_carried,
        workload_records,
    )

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("ChainCheck", "check_chain", "follows"), "trtguard.audit._chain"),
    **dict.fromkeys(
        (
            "HistoryEntry",
            "ManifestComparison",
            "compare_manifests",
            "history_json",
            "last_carried",
            "not_delivered",
            "not_delivered_json",
            "recorded_objects",
            "replay",
            "signer_names",
            "workload_carried",
            "workload_records",
        ),
        "trtguard.audit._history",
    ),
}

__all__ = [
    "ChainCheck",
    "HistoryEntry",
    "ManifestComparison",
    "check_chain",
    "compare_manifests",
    "follows",
    "history_json",
    "last_carried",
    "not_delivered",
    "not_delivered_json",
    "recorded_objects",
    "replay",
    "signer_names",
    "workload_carried",
    "workload_records",
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
