"""Which workload an audit command names: ``NAMESPACE/KIND/NAME``, or ``NAMESPACE/NAME`` when it is one.

A workload is its API group, kind, namespace and name (:mod:`policies.identity`): a Volcano ``Job`` and a
``batch/v1`` ``Job`` called ``train`` are two. ``NAMESPACE/KIND/NAME`` names one (``prod/Job.batch/train``,
``prod/Job.batch.volcano.sh/train``; a built-in kind may be written bare, ``prod/Job/train``). The shorter
``NAMESPACE/NAME`` still works while the log knows a single workload of that name (in its live records or
what rotation carried forward); when it knows several, the command says which and asks for the kind.
"""

from __future__ import annotations

import difflib

from decisionlog import DecisionStore, RecordQuery
from policies.identity import WorkloadIdentity
from verifier.base import InputError

__all__ = ["closest_workloads", "named_workloads", "resolve_workload"]

#: How many of the newest records :func:`closest_workloads` reads for the workloads the log knows.
SCANNED_FOR_NAMES = 10_000


async def named_workloads(store: DecisionStore, namespace: str, name: str) -> list[WorkloadIdentity]:
    """Every workload called ``namespace/name`` that the log knows, sorted."""
    found = {
        stored.record.workload
        for stored in await store.query(RecordQuery(namespace=namespace, name=name))
        if stored.record.workload is not None
    }
    found.update(entry.identity for entry in (await store.carried(namespace, name)).workloads)
    return sorted(found)


async def resolve_workload(store: DecisionStore, text: str, *, where: str) -> WorkloadIdentity | None:
    """The workload ``text`` names (None: ``NAMESPACE/NAME`` the log knows nothing of); raises
    :class:`InputError` for text of neither form, and for a ``NAMESPACE/NAME`` of several workloads."""
    parts = text.split("/")
    if len(parts) == 3:
        return WorkloadIdentity.parse(text, where=where)
    if len(parts) != 2 or not all(parts):
        raise InputError(
            f"expected NAMESPACE/KIND/NAME or NAMESPACE/NAME, got {text!r}",
            location=where,
            hint="for example: prod/Deployment/resnet50, prod/Job.batch.volcano.sh/train or prod/resnet50",
        )
    namespace, name = parts
    found = await named_workloads(store, namespace, name)
    if len(found) > 1:
        raise InputError(
            f"{text} names {len(found)} workloads in the decision log: {', '.join(map(str, found))}",
            location=where,
            hint=f"name one with its kind: {found[0]}",
        )
    return found[0] if found else None


async def closest_workloads(store: DecisionStore, text: str, *, limit: int = 5) -> list[str]:
    """The workloads of the log's newest records whose names are closest to ``text`` (a mistyped name), as
    ``NAMESPACE/KIND/NAME``; empty when none is close."""
    known = {
        str(stored.record.workload)
        for stored in await store.query(RecordQuery(newest_first=True, limit=SCANNED_FOR_NAMES))
        if stored.record.workload is not None
    }
    # NAMESPACE/NAME is compared with each workload's namespace and name, the long form with the long form.
    forms: dict[str, set[str]] = {}
    for name in known:
        parts = name.split("/")
        forms.setdefault(f"{parts[0]}/{parts[-1]}" if text.count("/") == 1 else name, set()).add(name)
    close = difflib.get_close_matches(text, list(forms), n=limit, cutoff=0.6)
    return sorted({name for match in close for name in forms[match]})[:limit]
