"""``trtguard audit-cluster``: judge what already runs in a cluster; publish the verdicts as PolicyReports.

:func:`connect` reaches the API server through the official ``kubernetes`` client (kubeconfig or in-cluster
configuration, timeouts, retries on 429 and 5xx); the audit lists every workload kind the policies cover,
page by page, judges each object as ``trtguard check`` does and writes ``wgpolicyk8s.io`` reports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtguard.cluster._api import ClusterSettings, KubeApi, Listed, connect, resource_path
    from trtguard.cluster._audit import (
        Audit,
        ListedKind,
        apply_reports,
        judge,
        list_workloads,
        outcome,
        served_kinds,
    )
    from trtguard.cluster._errors import ApiError, AuditTimeout

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        ("ClusterSettings", "KubeApi", "Listed", "connect", "resource_path"), "trtguard.cluster._api"
    ),
    **dict.fromkeys(
        (
            "Audit",
            "ListedKind",
            "apply_reports",
            "judge",
            "list_workloads",
            "outcome",
            "served_kinds",
        ),
        "trtguard.cluster._audit",
    ),
    **dict.fromkeys(("ApiError", "AuditTimeout"), "trtguard.cluster._errors"),
}

__all__ = [
    "ApiError",
    "Audit",
    "AuditTimeout",
    "ClusterSettings",
    "KubeApi",
    "Listed",
    "ListedKind",
    "apply_reports",
    "connect",
    "judge",
    "list_workloads",
    "outcome",
    "resource_path",
    "served_kinds",
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
