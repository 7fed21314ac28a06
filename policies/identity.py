"""Which workload a decision is about: API group, kind, namespace and name — never kind and name alone.

Change control's history (the workload's last admission), the state rotation carries forward, ``audit
history`` and evidence packages all key a workload by :class:`WorkloadIdentity`. A Volcano ``Job``
(``batch.volcano.sh``) and a ``batch/v1`` ``Job`` of the same name are two workloads: admitting one must not
replace the other's baseline. The identity is the group, not the version (``apps/v1`` and ``apps/v1beta2``
name one Deployment), and the old ``extensions`` group of Deployments, ReplicaSets and DaemonSets (before
Kubernetes 1.16 the same objects were served there too) is ``apps``.

Written as text, an identity is ``NAMESPACE/KIND/NAME`` with the kind as the policy language writes it
(``Kind.group``; a core kind bare: ``prod/Job.batch.volcano.sh/train``, ``prod/Deployment.apps/resnet``,
``prod/Pod/p``). :func:`parse_kind` reads a kind as policies name one: ``Kind.group``, or a built-in kind by
its bare name (``Job`` is ``batch/v1``'s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from policies.workload_model import GroupKind, group_of, named_kinds, parse_kind_name
from verifier.base import InputError

__all__ = [
    "MOVED_TO_APPS",
    "WorkloadIdentity",
    "canonical_group",
    "identity_group",
    "kind_name",
    "parse_kind",
]

#: Kinds the ``extensions`` group served before Kubernetes 1.16: the same objects as in ``apps``.
MOVED_TO_APPS: Final = frozenset({"Deployment", "ReplicaSet", "DaemonSet"})


def identity_group(api_version: str, kind: str) -> str:
    """The API group that identifies a ``kind`` object of ``api_version``: the part before its last ``/``
    (``""``, the core group, without one), ``apps`` for the Deployments, ReplicaSets and DaemonSets of the
    old ``extensions`` group."""
    return canonical_group(group_of(api_version), kind)


def canonical_group(group: str, kind: str) -> str:
    """``group`` as it identifies a ``kind`` object: ``apps`` for the kinds the old ``extensions`` served."""
    return "apps" if group == "extensions" and kind in MOVED_TO_APPS else group


def kind_name(group: str, kind: str) -> str:
    """``Kind.group`` (``Kind`` for the core group)."""
    return f"{kind}.{group}" if group else kind


def parse_kind(text: str) -> GroupKind:
    """``(group, kind)`` of a kind named as policies name one; raises :class:`InputError`.

    ``Kind.group`` is that kind; a bare name is the built-in Kubernetes kind of that name (``Job``:
    ``batch``; ``Pod``: the core group); any other bare name needs its group.
    """
    try:
        kind, group = parse_kind_name(text)
    except ValueError as error:
        raise InputError(str(error), hint="for example: Deployment, Job, Job.batch.volcano.sh") from None
    if group is not None:
        return canonical_group(group, kind), kind
    groups = {canonical_group(g, k) for g, k in named_kinds(kind)}
    if len(groups) != 1:
        raise InputError(
            f"{kind!r} is not a built-in Kubernetes kind: name it with its API group",
            hint=f"for example: {kind}.example.com (Kind.group, as policies name kinds)",
        )
    return groups.pop(), kind


@dataclass(frozen=True, slots=True, order=True)
class WorkloadIdentity:
    """One workload: ``(group, kind, namespace, name)``; the core group is ``""``."""

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, group: str, kind: str, namespace: str, name: str) -> WorkloadIdentity:
        """The identity of a ``kind`` object of API ``group`` (:func:`canonical_group`)."""
        return cls(canonical_group(group, kind), kind, namespace, name)

    @classmethod
    def of_api_version(cls, api_version: str, kind: str, namespace: str, name: str) -> WorkloadIdentity:
        """The identity of a ``kind`` object of ``api_version`` (any version of its group)."""
        return cls(identity_group(api_version, kind), kind, namespace, name)

    @property
    def kind_name(self) -> str:
        """``Kind.group`` (``Kind`` for the core group)."""
        return kind_name(self.group, self.kind)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind_name}/{self.name}"

    @classmethod
    def parse(cls, text: str, *, where: str | None = None) -> WorkloadIdentity:
        """``NAMESPACE/KIND/NAME`` (:func:`parse_kind` reads the kind); raises :class:`InputError`."""
        parts = text.split("/")
        if len(parts) != 3 or not all(parts):
            raise InputError(
                f"expected NAMESPACE/KIND/NAME, got {text!r}",
                location=where,
                hint="for example: prod/Job.batch.volcano.sh/train or prod/Deployment/resnet50",
            )
        namespace, kind, name = parts
        try:
            group, kind = parse_kind(kind)
        except InputError as error:
            error.location = where
            raise
        return cls(group, kind, namespace, name)
