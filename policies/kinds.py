"""The kinds trtguard reads: each Pod-bearing kind and where it keeps its pod spec.

Kinds are recognised by ``kind`` alone, whatever the API group, so an old ``batch/v1beta1`` CronJob is read
like a ``batch/v1`` one (and a custom resource that borrows a built-in kind's name is checked as that kind).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["WORKLOAD_KINDS", "is_workload_kind", "pod_spec_keys"]

# Where the PodSpec sits in each Pod-bearing kind.
_POD_SPEC_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
#: The Pod-bearing kinds :func:`~policies.workload.extract` reads.
WORKLOAD_KINDS: Final = frozenset(_POD_SPEC_KEYS)


def is_workload_kind(kind: str) -> bool:
    """True for the Pod-bearing kinds that :func:`~policies.workload.extract` reads."""
    return kind in _POD_SPEC_KEYS


def pod_spec_keys(kind: str) -> tuple[str, ...] | None:
    """The keys from the object down to its pod spec (``("spec", "template", "spec")``); None for a kind that
    runs no Pods."""
    return _POD_SPEC_KEYS.get(kind)
