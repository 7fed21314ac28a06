"""Which policies select a workload: ``spec.match`` and ``spec.exclude`` by namespace, kind and labels, and
by who makes the request (``requesters``), which may be unknown (``trtguard check`` without ``--as``)."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Mapping

from policies.loader import CompiledPolicy
from policies.requesters import Requester, RequesterSet, in_set
from policies.schema import LabelSelector, ResourceFilter
from policies.workload_model import Workload, named_kinds

__all__ = ["selection", "selects", "selects_by_requester"]


def selects(policy: CompiledPolicy, workload: Workload) -> bool:
    """Whether the policy's match selects the workload and its exclude does not."""
    spec = policy.document.spec
    if not _filter_selects(spec.match, policy.namespace_patterns, workload, empty=True):
        return False
    exclude = spec.exclude
    return exclude is None or not _filter_selects(
        exclude, policy.exclude_namespace_patterns, workload, empty=False
    )


def selects_by_requester(policy: CompiledPolicy) -> bool:
    """Whether the policy's ``match`` or ``exclude`` names requesters."""
    spec = policy.document.spec
    return spec.match.requesters is not None or (
        spec.exclude is not None and spec.exclude.requesters is not None
    )


def selection(policy: CompiledPolicy, workload: Workload, requester: Requester | None) -> bool | None:
    """Whether the policy selects the workload requested by ``requester``; None when that depends on the
    requester and it is unknown.

    :func:`selects` judges the workload terms; a ``requesters`` term in ``match`` must also hold, and one in
    ``exclude`` removes the workload only together with the exclude's other terms.
    """
    spec = policy.document.spec
    if not selects(policy, workload):
        if spec.exclude is None or spec.exclude.requesters is None:
            return False
        # `selects` was false: either match failed, or exclude's workload terms removed it
        if not _filter_selects(spec.match, policy.namespace_patterns, workload, empty=True):
            return False
    matched = _requester_term(spec.match.requesters, requester)
    if matched is False:
        return False
    excluded: bool | None = False
    exclude = spec.exclude
    if exclude is not None and exclude.requesters is not None:
        others = (exclude.namespaces, exclude.kinds, exclude.labels)
        workload_terms = any(term is not None for term in others)
        if not workload_terms or _filter_selects(
            exclude, policy.exclude_namespace_patterns, workload, empty=False
        ):
            excluded = _requester_term(exclude.requesters, requester)
    if excluded is True:
        return False
    return None if matched is None or excluded is None else True


def _requester_term(term: RequesterSet | None, requester: Requester | None) -> bool | None:
    if term is None:
        return True
    return None if requester is None else in_set(requester, term)


def _glob_any(patterns: tuple[str, ...], value: str) -> bool:
    return _globs(patterns)(value) is not None


@functools.lru_cache(maxsize=1024)
def _globs(patterns: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """One compiled regex for ``fnmatchcase`` against any of ``patterns`` (a policy's few namespace globs,
    asked on every admission); none matches nothing."""
    if not patterns:
        return lambda _value: None
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)).match


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
