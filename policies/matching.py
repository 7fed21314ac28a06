"""Which policies select a workload: ``spec.match`` and ``spec.exclude`` by namespace, kind and labels, and
by who makes the request (``requesters``), which may be unknown (``trtguard check`` without ``--as``)."""

from __future__ import annotations

from collections.abc import Mapping

from policies.loader import CompiledPolicy, FilterTerms
from policies.requesters import Requester, RequesterSet, in_set
from policies.schema import LabelSelector
from policies.workload_model import Workload, named_kinds

__all__ = ["selection", "selects", "selects_by_requester"]


def selects(policy: CompiledPolicy, workload: Workload) -> bool:
    """Whether the policy's match selects the workload and its exclude does not."""
    if not _filter_selects(policy.match, workload, empty=True):
        return False
    exclude = policy.exclude
    return exclude is None or not _filter_selects(exclude, workload, empty=False)


def selects_by_requester(policy: CompiledPolicy) -> bool:
    """Whether the policy's ``match`` or ``exclude`` names requesters."""
    exclude = policy.exclude
    return policy.match.requesters is not None or (exclude is not None and exclude.requesters is not None)


def selection(policy: CompiledPolicy, workload: Workload, requester: Requester | None) -> bool | None:
    """Whether the policy selects the workload requested by ``requester``; None when that depends on the
    requester and it is unknown.

    :func:`selects` judges the workload terms; a ``requesters`` term in ``match`` must also hold, and one in
    ``exclude`` removes the workload only together with the exclude's other terms.
    """
    match, exclude = policy.match, policy.exclude
    if not selects(policy, workload):
        if exclude is None or exclude.requesters is None:
            return False
        # `selects` was false: either match failed, or exclude's workload terms removed it
        if not _filter_selects(match, workload, empty=True):
            return False
    matched = _requester_term(match.requesters, requester)
    if matched is False:
        return False
    excluded: bool | None = False
    if exclude is not None and exclude.requesters is not None:
        others = (exclude.namespaces, exclude.kinds, exclude.labels)
        workload_terms = any(term is not None for term in others)
        if not workload_terms or _filter_selects(exclude, workload, empty=False):
            excluded = _requester_term(exclude.requesters, requester)
    if excluded is True:
        return False
    return None if matched is None or excluded is None else True


def _requester_term(term: RequesterSet | None, requester: Requester | None) -> bool | None:
    if term is None:
        return True
    return None if requester is None else in_set(requester, term)


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


def _filter_selects(selection: FilterTerms, workload: Workload, *, empty: bool) -> bool:
    """Whether a match/exclude filter selects the workload; ``empty`` answers for a filter with no terms."""
    terms = 0
    namespaces = selection.namespaces
    if namespaces is not None:
        terms += 1
        if namespaces.match(workload.namespace or "default") is None:
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
