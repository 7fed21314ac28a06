"""Evaluate a workload against a :class:`~policies.loader.PolicySet`; the order of the checks is the rule
table of :mod:`policies._judging`.

For every policy that matches the resource (:mod:`policies.matching`), every image must match at least one
of the policy's image rules (an unmatched image is a violation) and satisfy each rule it matches; every
engine must satisfy the policy's ``models`` rules (a build manifest signed by its keys, when
``buildManifest`` is set, and the rules over that manifest) and its change control. Each rule family has a
module in :mod:`policies.rules`, registered once in that table. A rule that cannot be checked (offline, a
registry that fails, time running out) is a violation with ``error=True`` whose action is the policy's
``onError``: never a silent pass. Reading the object (and an UPDATE's old one) runs off the event loop
unless small, within a CPU budget (:mod:`policies.workload_model._budget`); past it, every matching policy's
``onError``
answers.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

from policies._judging import judge_policy
from policies.cel.sandbox import CelSandbox, shared_sandbox
from policies.engines import EngineSort, engine_sort, sort_engines
from policies.evaluation import AdmissionHistory, Changes, Evaluation
from policies.loader import CompiledPolicy, PolicySet
from policies.matching import selection
from policies.pinning import apply_patch, patch_for
from policies.requesters import Requester
from policies.results import Action, ArtifactRecord, Decision, Violation
from policies.verified import CacheSettings, VerifiedEvidence, VerifiedManifest
from policies.workload_model import (
    DEFAULT_CPU_SECONDS,
    Budget,
    BudgetExceeded,
    Unjudged,
    Workload,
    changed_since,
    extract,
    identify,
    unknown_kind,
    within,
)
from verifier.base import Deadline, InputError
from verifier.evidence import EvidenceSource

__all__ = ["AdmissionHistory", "CacheSettings", "PolicyEvaluator", "VerifiedManifest"]

#: Name used for violations that belong to no single policy (a resource that cannot be read at all).
EVALUATOR_NAME = "trtguard"
#: The note on a workload that a policy with ``changeControl`` selects, judged without an admission history
#: (``trtguard check`` without ``--decision-log``): the webhook's verdict may differ.
HISTORY_NOT_CONSULTED = (
    "history was not consulted: change control compared each engine with its declared previous manifest "
    "only, not with the engine last admitted for this workload, and could not confirm a declared predecessor "
    "as admitted (pass --decision-log URL to read the webhook's decision log)"
)

#: The note on such a workload whose history cannot be looked up: it names no namespace or no name.
HISTORY_NOT_READ = (
    "history was not consulted: the object names no namespace or no name, so the engines last admitted for "
    "it cannot be looked up; change control compared each engine with its declared previous manifest only "
    "(pass --namespace NS, the namespace it is applied to)"
)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PolicyEvaluator:
    """Evaluates workloads against one policy set with one evidence source.

    An evaluator is immutable with respect to its policy set; a reload makes a new one. Verified evidence
    (signatures, build manifests, attestations) is cached for ``cache.ttl`` seconds by everything its
    verdict depends on (registry, repository and digest, key set, question), so repeated admissions of the
    same image or engine touch neither the registry nor the cryptography, and no verdict depends on what
    was asked before. CEL expressions not proven cheap at load time run in ``cel`` (the process's shared
    sandbox unless given), under its time and memory limits. ``cpu_seconds`` is the CPU one evaluation may
    spend reading the object and preparing data (:mod:`policies.workload_model._budget`), within its deadline.
    """

    def __init__(
        self,
        policy_set: PolicySet,
        evidence: EvidenceSource,
        *,
        clock: Callable[[], datetime] = _utcnow,
        cache: CacheSettings | None = None,
        history: AdmissionHistory | None = None,
        cel: CelSandbox | None = None,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
    ) -> None:
        self.policy_set = policy_set
        self.cpu_seconds = cpu_seconds
        self.evidence = evidence
        self.clock = clock
        self.history = history
        self.cel = cel or shared_sandbox()
        self.verified = VerifiedEvidence(policy_set, evidence, cache or CacheSettings(), clock=clock)

    @property
    def revision(self) -> str:
        """Digest of the loaded policy files."""
        return self.policy_set.revision

    def matching(self, workload: Workload) -> list[CompiledPolicy]:
        """Policies that may select the workload: a policy that selects or excludes by requester counts
        unless no requester could make it select (the requester is not known here)."""
        return [p for p in self.policy_set.policies if selection(p, workload, None) is not False]

    async def evaluate(
        self,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        kind: str | None = None,
        old: Mapping[str, Any] | None = None,
        deadline: Deadline | None = None,
        unknown_kinds: Literal["report", "judge"] = "report",
        requester: Requester | None = None,
        pin: bool = False,
        offload: bool = True,
    ) -> Decision:
        """The decision for ``obj``.

        ``namespace`` and ``kind`` come from the request (they fill in what the object leaves out). ``old``
        is the previous version of the object (an UPDATE): only images and engines that are new or changed
        are judged. An object with nothing to judge gets a decision with ``unjudged`` set (and nothing
        denied). So does one of a kind the policy set does not know, listing the images found in it, unless
        ``unknown_kinds`` is ``judge``: then those images (and the pod specs found) are judged like any
        workload's, and a note says so. ``requester`` made the request; None when it is unknown (``check``
        without ``--as``), which leaves the rules that depend on it unverifiable.

        ``pin`` judges as the admission chain does, the mutating webhook first (``/mutate``, ``check``): a
        ``pinDigest`` rule pins each tag it verifies (:attr:`Decision.pins`), and the verdict is the one the
        object gets with those pins in place, which is what the validating webhook sees after the patch. So
        another policy's ``requireDigest`` (or an engine rule wanting a digest) is met by the pin, and every
        rule judges the pinned digest, on the same answers the pins came from (nothing is resolved again).

        ``offload``: a large object is read in an evaluation thread, so that the event loop goes on with other
        work meanwhile (:func:`~policies.workload_model._budget.within`); False reads every object where
        the evaluation runs, without counting its values first (``check``, which judges one resource after
        another when its evidence comes from memory). The same work either way, charged to the same budget:
        the decision does not depend on it.
        """
        deadline = deadline or Deadline.never()
        budget = Budget(self.cpu_seconds, deadline)
        lookups: dict[tuple[object, ...], Any] = {}
        judge = functools.partial(
            self._evaluate,
            namespace=namespace,
            kind=kind,
            old=old,
            deadline=deadline,
            unknown_kinds=unknown_kinds,
            requester=requester,
            pin=pin,
            budget=budget,
            lookups=lookups,
            offload=offload,
        )
        decision = await judge(obj)
        if not decision.pins:
            return decision
        after = await judge(apply_patch(obj, patch_for(obj, decision)))
        # The pins are those of the object as sent (the patch is built against it); the verdict is the
        # pinned object's.
        pins = {record.path: record for record in decision.pins}
        return replace(after, images=tuple(pins.get(i.path, i) for i in after.images))

    async def _evaluate(
        self,
        obj: Mapping[str, Any],
        *,
        namespace: str | None,
        kind: str | None,
        old: Mapping[str, Any] | None,
        deadline: Deadline,
        unknown_kinds: Literal["report", "judge"],
        requester: Requester | None,
        pin: bool,
        budget: Budget,
        lookups: dict[tuple[object, ...], Any],
        offload: bool,
    ) -> Decision:
        """One pass of :meth:`evaluate` over ``obj``, asking its questions through ``lookups``."""
        try:
            read_all = functools.partial(self._read, obj, namespace, kind, old, budget)
            read = await within(budget, read_all, obj, old) if offload else budget.run(read_all)
        except InputError as error:
            return self._unreadable(obj, namespace, error)
        except BudgetExceeded as error:
            return self.error_decision(obj, namespace=namespace, message=error.message)
        if isinstance(read, Unjudged):
            return Decision(read.kind, read.namespace, read.name, self.revision, unjudged=read.reason)
        workload, previous, judged, changes = read
        notes = list(workload.notes)
        if not workload.known_kind:
            version = workload.api_version or "no apiVersion"
            why = unknown_kind(self.policy_set.kinds, workload.api_version, workload.kind)
            what = f"{workload.kind} ({version}): {why}"
            if unknown_kinds == "report":
                return Decision(
                    workload.kind,
                    workload.namespace,
                    workload.name,
                    self.revision,
                    images=tuple(ArtifactRecord(use.reference, None, use.path) for use in workload.images),
                    unjudged=_unchecked(what, workload),
                )
            notes.append(f"{what}: its images were found by searching the whole object")
        chosen = [(p, selection(p, workload, requester)) for p in self.policy_set.policies]
        policies = [p for p, selected in chosen if selected is not False]
        # a policy that selects by requester, the requester unknown: whether its findings count is unknown
        unknown = {p.name for p, selected in chosen if selected is None}
        run = Evaluation(
            workload=judged,
            context=workload,
            previous=previous,
            deadline=deadline,
            evidence=self.evidence,
            verified=self.verified,
            history=self.history,
            clock=self.clock,
            cel=self.cel,
            requester=requester,
            changes=changes,
            budget=budget,
            pinning=pin,
            lookups=lookups,
        )
        # Which image volumes are engines may need a registry too: asked beside the rules' questions.
        # Sorts that need no look-up are made here: a task for each would cost more than the sort itself.
        known = [engine_sort(p, workload.engines) for p in policies]
        looked_up: list[EngineSort] = []
        if any(sort is None for sort in known) or self.evidence.concurrent_lookups:
            pending = [p for p, sort in zip(policies, known, strict=True) if sort is None]
            sorting = asyncio.gather(*(sort_engines(run, p, workload.engines) for p in pending))
            looked_up, _ = await asyncio.gather(sorting, run.prefetch(policies))
        remaining = iter(looked_up)
        sorted_engines = [sort if sort is not None else next(remaining) for sort in known]
        judged_findings: list[Violation] = []
        for policy, sort in zip(policies, sorted_engines, strict=True):
            findings = await judge_policy(run, policy, sort)
            unverified = policy.name in unknown
            judged_findings += [_requester_unknown(policy, v) for v in findings] if unverified else findings
        violations = tuple(judged_findings)
        notes += run.notes
        if any(p.spec.change_control is not None for p in policies):
            if self.history is None:
                notes.append(HISTORY_NOT_CONSULTED)
            elif not workload.namespace or not workload.name:
                # The history is by namespace and name: one the object does not name has none to read.
                notes.append(HISTORY_NOT_READ)
        if previous is not None:
            notes.append("only new or changed images and engines were judged")
        engines = {use.path for sort in sorted_engines for use in sort.engines} if policies else None
        return Decision(
            kind=workload.kind,
            namespace=workload.namespace,
            name=workload.name,
            policy_revision=self.revision,
            matched_policies=tuple(p.name for p in policies),
            violations=violations,
            images=tuple(run.image_records()),
            engines=tuple(r for r in run.engine_records() if engines is None or r.path in engines),
            notes=tuple(notes),
        )

    def _read(
        self,
        obj: Mapping[str, Any],
        namespace: str | None,
        kind: str | None,
        old: Mapping[str, Any] | None,
        budget: Budget,
    ) -> Unjudged | tuple[Workload, Workload | None, Workload, Changes | None]:
        """What evaluation needs from the objects, read in one go (off the event loop): the workload, the
        old one of an UPDATE (None: none, or unreadable, which makes everything new), what is new in it,
        and what else changed."""
        found = extract(obj, namespace=namespace, kind=kind, kinds=self.policy_set.kinds, budget=budget)
        if isinstance(found, Unjudged) or old is None:
            return found if isinstance(found, Unjudged) else (found, None, found, None)
        try:
            previous = extract(
                old, namespace=namespace, kind=kind, kinds=self.policy_set.kinds, budget=budget
            )
        except InputError:
            previous = None  # an unreadable old object means everything counts as new
        if not isinstance(previous, Workload):
            return found, None, found, None
        return found, previous, changed_since(found, previous), Changes.between(previous, found)

    def error_decision(self, obj: Mapping[str, Any], *, namespace: str | None, message: str) -> Decision:
        """The decision when evaluation could not finish: each matching policy's ``onError`` applies.

        The policies are chosen by the object's metadata alone (its pod templates are not read again: they
        may be what could not be read in time). With no policy readable or matching, the answer is still a
        denial: not knowing is never an allow.
        """
        try:
            workload: Workload | None = identify(obj, namespace=namespace, kinds=self.policy_set.kinds)
        except InputError:
            workload = None
        policies = self.matching(workload) if workload is not None else list(self.policy_set.policies)
        violations = tuple(
            Violation(
                policy=p.name,
                rule="evaluation",
                message=message,
                fix="retry; if it persists, check the registry and the webhook's logs",
                action=p.spec.on_error,
                error=True,
            )
            for p in policies
        ) or (
            Violation(
                policy=EVALUATOR_NAME,
                rule="evaluation",
                message=message,
                fix="retry; if it persists, check the webhook's logs",
                action=Action.DENY,
                error=True,
            ),
        )
        return Decision(
            kind=str(obj.get("kind", "")),
            namespace=workload.namespace if workload else namespace,
            name=workload.name if workload else None,
            policy_revision=self.revision,
            matched_policies=tuple(p.name for p in policies),
            violations=violations,
        )

    def _unreadable(self, obj: Mapping[str, Any], namespace: str | None, error: InputError) -> Decision:
        metadata = obj.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        return Decision(
            kind=str(obj.get("kind", "")),
            namespace=namespace,
            name=name if isinstance(name, str) else None,
            policy_revision=self.revision,
            violations=(
                Violation(
                    policy=EVALUATOR_NAME,
                    rule="workload",
                    message=f"the resource cannot be read: {error}",
                    fix="send a well-formed object with a pod spec",
                    action=Action.DENY,
                    path=error.location,
                ),
            ),
        )


def _unchecked(what: str, workload: Workload) -> str:
    """Why a workload of a kind trtguard does not know was not checked, and what it names."""
    count, unread = len(workload.images), [p.path for p in workload.problems]
    if count:
        were = "were" if count != 1 else "was"
        return (
            f"{what}: the {count} image{'s' if count != 1 else ''} it names {were} not checked (define it "
            "with a WorkloadKind document)"
        )
    if unread:
        listed = "; ".join(f"{p.path}: {p.message}" for p in workload.problems[:3])
        more = f"; {len(unread) - 3} more" if len(unread) > 3 else ""
        return (
            f"{what}: it names no image trtguard can read ({listed}{more}); nothing was checked (define it "
            "with a WorkloadKind document)"
        )
    return f"{what} and names no container image"


def _requester_unknown(policy: CompiledPolicy, found: Violation) -> Violation:
    """A violation of a policy that applies only to some requesters, the requester unknown: it cannot be
    told whether it counts, so it is unverifiable (``onError``)."""
    return replace(
        found,
        message=f"{found.message} (the policy applies to some requesters only, and the requester is unknown)",
        action=policy.spec.on_error,
        error=True,
    )
