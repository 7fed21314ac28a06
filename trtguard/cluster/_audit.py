"""What already runs, judged: every workload of every kind the policies cover, listed from the API server.

:func:`served_kinds` asks discovery which of the policy set's kinds (built-in, shipped operator kinds and
``WorkloadKind`` documents) the cluster serves, at which version and under which resource name (a
``WorkloadKind`` names none: discovery does). :func:`list_workloads` reads each kind page by page;
:func:`judge` evaluates every object as the validating webhook does (with the decision log's history when
the engine has one; what runs is judged as it is stored, not pinned first as ``check`` pins), and
:func:`apply_reports` writes the PolicyReports (create, or update at the resourceVersion read: a report
changed in between is read again, never overwritten blind).

A kind the cluster does not serve (an operator that is not installed) is skipped and said so; a kind that
cannot be listed whole (RBAC, a failing API server, an answer too large, a list that never ends) is a gap,
which makes the audit incomplete (exit status 2); past the audit's deadline it stops (:class:`AuditTimeout`).
:func:`outcome` says what each verdict is: a workload that would be denied is one a rule refuses, never one
that could not be checked (the registry down: ``onError`` decides what admission does, but the audit does
not know what the rules would find), which makes the audit incomplete too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from policies.evaluator import PolicyEvaluator
from policies.policy_report import API_VERSION, SOURCE, Subject
from policies.results import Action, Decision
from policies.workload_model import KindDefinition, KindRegistry
from trtguard.cluster._api import KubeApi, resource_path
from trtguard.cluster._errors import ApiError, AuditTimeout
from verifier.base import Deadline, InputError

__all__ = [
    "OUTCOMES",
    "Audit",
    "ListedKind",
    "Outcome",
    "apply_reports",
    "judge",
    "list_workloads",
    "outcome",
    "served_kinds",
]

_REPORT_GROUP, _, _REPORT_VERSION = API_VERSION.partition("/")
_MANAGED: Final = f"app.kubernetes.io/managed-by={SOURCE}"

Outcome = Literal["allowed", "denied", "unchecked", "skipped", "unreadable"]
#: Every :data:`Outcome`, in the order the audit counts them.
OUTCOMES: Final[tuple[Outcome, ...]] = ("allowed", "denied", "unchecked", "skipped", "unreadable")


def outcome(verdict: Decision | InputError) -> Outcome:
    """What the audit makes of one verdict: ``denied`` when a rule refuses the workload (whatever else could
    not be checked); ``unchecked`` when, short of that, a rule could not be checked (its violation is an
    ``error``: the registry down, out of time), whatever ``onError`` makes of it at admission; ``skipped``
    when there was nothing to judge; ``unreadable`` when the object could not be read; else ``allowed``."""
    if isinstance(verdict, InputError):
        return "unreadable"
    if verdict.unjudged is not None:
        return "skipped"
    if any(v.action is Action.DENY and not v.error for v in verdict.violations):
        return "denied"
    if any(v.error for v in verdict.violations):
        return "unchecked"
    return "allowed"


@dataclass(frozen=True, slots=True)
class ListedKind:
    """A workload kind as the cluster serves it."""

    definition: KindDefinition
    version: str
    resource: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``v1``, ``apps/v1``, ``ray.io/v1``."""
        group = self.definition.group
        return f"{group}/{self.version}" if group else self.version


@dataclass
class Audit:
    """What one audit listed and found."""

    kinds: list[ListedKind] = field(default_factory=list)
    not_served: list[str] = field(default_factory=list)
    """Kinds the policies cover that the cluster does not serve (``Kind.group``)."""
    gaps: list[str] = field(default_factory=list)
    """What could not be listed, and why: the audit is incomplete."""
    pages: int = 0
    verdicts: list[tuple[Subject, Decision | InputError]] = field(default_factory=list)

    def counts(self) -> dict[Outcome, int]:
        """How many verdicts have each :func:`outcome`."""
        found = dict.fromkeys(OUTCOMES, 0)
        for _, verdict in self.verdicts:
            found[outcome(verdict)] += 1
        return found

    def unchecked(self) -> list[tuple[Subject, Decision]]:
        """The workloads that could not be checked (:func:`outcome`): the audit is incomplete."""
        return [
            (subject, verdict)
            for subject, verdict in self.verdicts
            if isinstance(verdict, Decision) and outcome(verdict) == "unchecked"
        ]


def served_kinds(api: KubeApi, kinds: KindRegistry, audit: Audit) -> None:
    """Fill ``audit.kinds`` (and ``not_served``, ``gaps``) from the API server's discovery."""
    core_versions = api.get("/api").get("versions") or []
    groups = {g.get("name"): g for g in api.get("/apis").get("groups") or [] if isinstance(g, dict)}
    resources: dict[str, list[dict[str, Any]] | None] = {}
    for definition in kinds:
        if definition.group:
            group = groups.get(definition.group)
            served = [v.get("version") for v in (group or {}).get("versions") or []]
            preferred = ((group or {}).get("preferredVersion") or {}).get("version")
        else:
            served, preferred = list(core_versions), "v1"
        wanted = [
            v for v in served if isinstance(v, str) and (not definition.versions or v in definition.versions)
        ]
        wanted.sort(key=lambda v: v != preferred)
        found = None
        for version in wanted:
            group_version = f"{definition.group}/{version}" if definition.group else version
            if group_version not in resources:
                resources[group_version] = _resource_list(api, definition.group, version, audit)
            found = next(
                (
                    r
                    for r in resources[group_version] or []
                    if r.get("kind") == definition.kind
                    and "/" not in str(r.get("name", ""))
                    and "list" in (r.get("verbs") or [])
                ),
                None,
            )
            if found is not None:
                audit.kinds.append(
                    ListedKind(definition, version, str(found["name"]), bool(found.get("namespaced")))
                )
                break
        # extensions/v1beta1 Deployments and their kin are served by no supported cluster: not worth a line
        if found is None and definition.group != "extensions":
            audit.not_served.append(definition.name)


def _resource_list(api: KubeApi, group: str, version: str, audit: Audit) -> list[dict[str, Any]] | None:
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    try:
        listed = api.get(path).get("resources")
    except ApiError as error:
        audit.gaps.append(f"discovery of {path}: {error.message}")
        return None
    return [r for r in listed or [] if isinstance(r, dict)]


def list_workloads(
    api: KubeApi, kind: ListedKind, namespace: str | None, audit: Audit
) -> list[dict[str, Any]]:
    """Every object of ``kind`` (in ``namespace`` when given), each once, with its ``apiVersion`` and
    ``kind`` set (a list's items carry neither); a kind that cannot be listed whole is added to
    ``audit.gaps`` and none of it is judged. :class:`AuditTimeout` is raised: the audit stops there."""
    if namespace is not None and not kind.namespaced:
        return []
    path = resource_path(kind.definition.group, kind.version, kind.resource, namespace)
    try:
        listed = api.list(path)
    except AuditTimeout:
        raise
    except ApiError as error:
        audit.gaps.append(f"{kind.definition.name}: {error.message}")
        return []
    audit.pages += listed.pages
    return [{"apiVersion": kind.api_version, "kind": kind.definition.kind, **item} for item in listed.items]


async def judge(
    evaluator: PolicyEvaluator, objects: Sequence[dict[str, Any]], *, concurrency: int = 32
) -> list[tuple[Subject, Decision | InputError]]:
    """Each object's decision, as ``trtguard check`` reaches it (``concurrency`` at once)."""
    limit = asyncio.Semaphore(concurrency if evaluator.evidence.concurrent_lookups else 1)

    async def one(obj: dict[str, Any]) -> tuple[Subject, Decision | InputError]:
        found = obj.get("metadata")
        metadata: dict[str, Any] = found if isinstance(found, dict) else {}
        subject = Subject(
            obj["apiVersion"],
            obj["kind"],
            _text(metadata, "namespace"),
            _text(metadata, "name"),
            _text(metadata, "uid"),
        )
        async with limit:
            try:
                decision = await evaluator.evaluate(obj, deadline=Deadline.never())
            except InputError as error:
                return subject, error
        return subject, decision

    return list(await asyncio.gather(*(one(obj) for obj in objects)))


def apply_reports(
    api: KubeApi, reports: Iterable[dict[str, Any]], *, namespaces: Iterable[str] | None = None
) -> list[str]:
    """Create or update each report; a report trtguard wrote before in a namespace now without workloads
    (of ``namespaces``, every namespace when None) is emptied. Returns what was done, one line each."""
    done: list[str] = []
    written: set[tuple[str | None, str]] = set()
    for report in reports:
        done.append(_put(api, report))
        written.add((report["metadata"].get("namespace"), report["metadata"]["name"]))
    scope = None if namespaces is None else set(namespaces)
    for kind, resource in (
        ("PolicyReport", "policyreports"),
        ("ClusterPolicyReport", "clusterpolicyreports"),
    ):
        path = resource_path(_REPORT_GROUP, _REPORT_VERSION, resource)
        for old in api.list(path, {"labelSelector": _MANAGED}).items:
            metadata = old.get("metadata") or {}
            key = (metadata.get("namespace"), metadata.get("name"))
            if key in written or (scope is not None and key[0] not in scope):
                continue
            emptied = {
                "apiVersion": API_VERSION,
                "kind": kind,
                "metadata": {k: v for k, v in metadata.items() if k in ("name", "namespace", "labels")},
                "summary": {"pass": 0, "skip": 0, "warn": 0, "fail": 0, "error": 0},
                "results": [],
            }
            done.append(_put(api, emptied))
    return done


def _put(api: KubeApi, report: dict[str, Any], attempts: int = 3) -> str:
    metadata = report["metadata"]
    namespace, name = metadata.get("namespace"), metadata["name"]
    resource = "policyreports" if report["kind"] == "PolicyReport" else "clusterpolicyreports"
    collection = resource_path(_REPORT_GROUP, _REPORT_VERSION, resource, namespace)
    where = f"{report['kind']} {namespace + '/' if namespace else ''}{name}"
    for _ in range(attempts):
        try:
            current = api.get(f"{collection}/{name}")
        except ApiError as error:
            if error.status != 404:
                raise
            try:
                api.request("POST", collection, body=report)
            except ApiError as created:
                if created.status == 409:  # made in between: read it and update
                    continue
                raise
            return f"created {where}"
        version = (current.get("metadata") or {}).get("resourceVersion")
        updated = {**report, "metadata": {**metadata, "resourceVersion": version}}
        try:
            api.request("PUT", f"{collection}/{name}", body=updated)
        except ApiError as error:
            if error.status == 409:  # changed since it was read: read it again
                continue
            raise
        return f"updated {where}"
    raise ApiError(f"{where} kept changing while it was written", status=409)


def _text(metadata: dict[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    return value if isinstance(value, str) else None
