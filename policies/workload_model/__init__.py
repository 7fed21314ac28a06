"""The workload model: a Kubernetes object → its images and engines, each with its JSON path, through the
kinds trtguard knows (built in, operators', WorkloadKind documents), their pod templates and pod specs, which
nodes a Pod may run on and which containers can read an engine; and the CPU budget that reading, and the
evaluation, may spend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.workload_model._budget import DEFAULT_CPU_SECONDS, UNLIMITED, Budget, BudgetExceeded, within
    from policies.workload_model._discovery import find_images
    from policies.workload_model._extraction import (
        Unjudged,
        Workload,
        changed_since,
        extract,
        identify,
        iter_resources,
        unknown_kind,
    )
    from policies.workload_model._kinds import (
        GroupKind,
        KindDefinition,
        KindRegistry,
        group_of,
        named_kinds,
        parse_kind_name,
        template,
    )
    from policies.workload_model._operator_kinds import DEFAULT_KINDS
    from policies.workload_model._paths import PathError, PathPattern
    from policies.workload_model._pods import EngineUse, ImageUse, PodTemplate, SameImage, by_image
    from policies.workload_model._podspec import ImageField
    from policies.workload_model._scheduling import NodeTerm

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        ("DEFAULT_CPU_SECONDS", "UNLIMITED", "Budget", "BudgetExceeded", "within"),
        "policies.workload_model._budget",
    ),
    "find_images": "policies.workload_model._discovery",
    **dict.fromkeys(
        ("Unjudged", "Workload", "changed_since", "extract", "identify", "iter_resources", "unknown_kind"),
        "policies.workload_model._extraction",
    ),
    **dict.fromkeys(
        (
            "GroupKind",
            "KindDefinition",
            "KindRegistry",
            "group_of",
            "named_kinds",
            "parse_kind_name",
            "template",
        ),
        "policies.workload_model._kinds",
    ),
    "DEFAULT_KINDS": "policies.workload_model._operator_kinds",
    **dict.fromkeys(("PathError", "PathPattern"), "policies.workload_model._paths"),
    **dict.fromkeys(
        ("EngineUse", "ImageUse", "PodTemplate", "SameImage", "by_image"), "policies.workload_model._pods"
    ),
    "ImageField": "policies.workload_model._podspec",
    "NodeTerm": "policies.workload_model._scheduling",
}

__all__ = [
    "DEFAULT_CPU_SECONDS",
    "DEFAULT_KINDS",
    "UNLIMITED",
    "Budget",
    "BudgetExceeded",
    "EngineUse",
    "GroupKind",
    "ImageField",
    "ImageUse",
    "KindDefinition",
    "KindRegistry",
    "NodeTerm",
    "PathError",
    "PathPattern",
    "PodTemplate",
    "SameImage",
    "Unjudged",
    "Workload",
    "by_image",
    "changed_since",
    "extract",
    "find_images",
    "group_of",
    "identify",
    "iter_resources",
    "named_kinds",
    "parse_kind_name",
    "template",
    "unknown_kind",
    "within",
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
