"""Which policies select a workload: ``spec.match`` and ``spec.exclude`` by namespace, kind and labels."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from policies.kinds import named_kinds
from policies.loader import CompiledPolicy
from policies.schema import LabelSelector, ResourceFilter
from policies.workload import Workload

__all__ = ["selects"]


def selects(policy: CompiledPolicy, workload: Workload) -> bool:
    """Whether the policy's match selects the workload and its exclude does not."""
    spec = policy.document.spec
    if not _filter_selects(spec.match, policy.namespace_patterns, workload, empty=True):
        return False
    exclude = spec.exclude
    return exclude is None or not _filter_selects(
        exclude, policy.exclude_namespace_patterns, workload, empty=False
    )


def _glob_any(patterns: Iterable[str], value: str) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _labels_match(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for expression in selector.match_expressions:
        present = expression.key in labels
        value = labels.get(expression.key)
        ok = {
            "In": present and value in expression.values,
            "NotIn": not present or value not in expression.values,
            "Exists": present,
            "DoesNotExist": not present,
        }[expression.operator]
        if not ok:
            return False
    return True


def _filter_selects(
    selection: ResourceFilter, namespaces: tuple[str, ...] | None, workload: Workload, *, empty: bool
) -> bool:
    """Whether a match/exclude filter selects the workload; ``empty`` answers for a filter with no terms."""
    terms = 0
    if namespaces is not None:
        terms += 1
        if not _glob_any(namespaces, workload.namespace or "default"):
            return False
    if selection.kinds is not None:
        terms += 1
        # By group and kind: `Job` is batch/v1's, never Volcano's Job.batch.volcano.sh.
        if not (
            workload.known_kind
            and any((workload.group, workload.kind) in named_kinds(k) for k in selection.kinds)
        ):
            return False
    if selection.labels is not None:
        terms += 1
        if not _labels_match(selection.labels, workload.labels):
            return False
    return empty if terms == 0 else True
