"""Judging one AdmissionRequest: operation rules, the deadline, the policy evaluator, and the decision record.

:class:`Reviewer` turns a parsed request into the AdmissionReview answer. Everything it decides is written to
the decision log *before* the answer is returned; if the record cannot be written the answer is a denial.
Nothing that goes wrong here (a timeout, an exception, a policy evaluator that fails) becomes an allow: the
policies' ``onError`` decides, and without a policy to ask, the answer is a denial.

One module on purpose: the flow of one request, from the parsed request to the recorded answer, is one
concern that a reader follows top to bottom; the wire format and the history live in their own modules.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from decisionlog import DecisionLogUnavailable, DecisionRecord, DecisionStore, engines_left_out
from policies.evaluator import PolicyEvaluator
from policies.requesters import Requester
from policies.results import Action, Decision, Violation
from policies.workload_model import group_of
from verifier.base import Deadline, TrtguardError, quick_init
from webhook._json import json_list
from webhook._logging import log_fields
from webhook._metrics import ERROR_DENIAL_REASONS, Metrics
from webhook._mutation import settle, with_patch
from webhook._policy_store import PolicyStore
from webhook._tracing import AttributeValue, Tracing
from webhook._wire import (
    MAX_ANNOTATION_CHARS,
    OPERATIONS,
    AdmissionRequest,
    allow_response,
    deny_response,
)

_log = logging.getLogger(__name__)

#: Shortest evaluation budget; below it even a cached verdict is unlikely to be computed in time.
MIN_BUDGET: Final = 0.05
#: Violations listed in the ``violations`` audit annotation (the decision log has them all).
MAX_ANNOTATED: Final = 20


@quick_init
@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of judging one request, before it is recorded and encoded."""

    allowed: bool
    reason: str
    """Machine-readable: Allowed, PolicyViolation, EvaluationTimeout, EvaluationError, NotAWorkload, …"""
    message: str | None = None
    warnings: tuple[str, ...] = ()
    decision: Decision | None = None
    causes: tuple[tuple[str, str], ...] = ()
    failure: str | None = None
    """Metric label when the request could not be judged normally (timeout, evaluation_error, …)."""
    code: int = 403
    """HTTP status code of a denial (400 for a malformed request, 500 for a failure inside the webhook)."""
    patch: tuple[Any, ...] = ()  # an allow of /mutate: the JSONPatch pinning what was verified


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    """Timing and identity settings of a :class:`Reviewer`."""

    default_timeout: float = 10.0
    timeout_margin: float = 0.5
    replica: str | None = None


@dataclass(slots=True)
class Reviewer:
    """Judges AdmissionRequests against the policies in force and records every decision."""

    policies: PolicyStore
    store: DecisionStore
    metrics: Metrics
    tracing: Tracing = field(default_factory=lambda: Tracing(None))
    settings: ReviewSettings = field(default_factory=ReviewSettings)
    pinning: bool = False  # answers /mutate (webhook._mutation)

    async def review(
        self, request: AdmissionRequest, *, api_timeout: float | None, started: float
    ) -> dict[str, Any]:
        """The AdmissionReview answer for ``request``; ``api_timeout`` is the API server's ``?timeout=``.

        ``started`` is the ``time.perf_counter()`` reading when the request arrived. Raises only
        ``CancelledError`` (the caller went away: nobody receives an answer).
        """
        return await self._answer(request, None, api_timeout=api_timeout, started=started)

    async def refuse(
        self,
        request: AdmissionRequest,
        *,
        reason: str,
        message: str,
        code: int,
        failure: str,
        api_timeout: float | None,
        started: float,
    ) -> dict[str, Any]:
        """A denial of ``request`` without judging it, recorded like every answer.

        For a request that could not be read whole (``request`` holds what could) and for a failure inside the
        webhook. A record that cannot be written leaves the denial as it is (it is logged and counted).
        """
        refusal = Verdict(False, reason, message=message, failure=failure, code=code)
        return await self._answer(request, refusal, api_timeout=api_timeout, started=started)

    async def _answer(
        self, request: AdmissionRequest, refusal: Verdict | None, *, api_timeout: float | None, started: float
    ) -> dict[str, Any]:
        total = api_timeout if api_timeout is not None and api_timeout > 0 else self.settings.default_timeout
        budget = max(MIN_BUDGET, total - self.settings.timeout_margin - (time.perf_counter() - started))
        deadline = Deadline.after(budget)
        # While tracing is off, the span's attributes are not even built (three spans an admission).
        attributes = _span_attributes(request) if self.tracing.enabled else {}
        with self.tracing.span("admission.review", **attributes) as span:
            verdict = refusal or await self._judge(request, deadline, budget)
            if self.pinning and refusal is None:
                verdict = replace(verdict, **settle(request.object, verdict))
            latency = time.perf_counter() - started
            record = self._record(request, verdict, latency)
            if verdict.allowed and (left_out := engines_left_out(record)) is not None:
                verdict = _deny("EnginesNotRecorded", left_out, "decision_log")  # change control reads them
                record = self._record(request, verdict, latency)
            # Half the margin is left for the record, so that a slow evaluation still gets logged in time. A
            # record not confirmed by then is answered as a denial; one landing later is followed by an
            # undelivered record (decisionlog._undelivered). Latency is stamped from the arrival.
            log_deadline = Deadline.after(deadline.remaining() + self.settings.timeout_margin / 2)
            arrived = time.monotonic() - (time.perf_counter() - started)
            written = await self._write(record, verdict, log_deadline, arrived)
            # A refusal is a denial either way, and says best why.
            verdict = written if refusal is None else verdict
            span.set_attribute("trtguard.allowed", verdict.allowed)
            span.set_attribute("trtguard.reason", verdict.reason)
        self._observe(request, verdict, record, time.perf_counter() - started)
        return self._response(request, verdict)

    async def _judge(self, request: AdmissionRequest, deadline: Deadline, budget: float) -> Verdict:
        loaded = self.policies.current
        if loaded is None:
            return _deny(
                "PoliciesNotLoaded", "trtguard has no policies loaded yet; retry shortly", "no_policies"
            )
        if request.operation in ("DELETE", "CONNECT"):
            # Neither carries new images; they reach the webhook only if the configuration registers them.
            return Verdict(True, "OperationNotJudged")
        if request.sub_resource == "ephemeralcontainers" and request.kind.kind != "Pod":
            # Kubernetes before 1.22 sent an EphemeralContainers object here; it cannot be judged like a Pod.
            return _deny(
                "UnsupportedRequest",
                f"pods/ephemeralcontainers sent as {request.kind}, expected v1/Pod (Kubernetes >= 1.22)",
                "evaluation_error",
            )
        obj = request.object
        if obj is None:
            return _deny(
                "UnsupportedRequest",
                f"{request.operation} of {request.kind} carries no object, so nothing can be checked",
                "evaluation_error",
            )
        own_kind = obj.get("kind")
        if own_kind is not None and own_kind != request.kind.kind:
            # Decode by `kind`: an object that says otherwise is not what the API server describes.
            return _deny(
                "UnsupportedRequest",
                f"the object is a {own_kind} but the request says {request.kind.kind}; nothing was checked",
                "evaluation_error",
            )
        own_group = _group(obj, request)
        if own_group != request.kind.group:
            # The workload is recorded, and its history looked up, by the request's group: judging an object
            # of another group would compare it with another workload's history.
            return _deny(
                "UnsupportedRequest",
                f"the object is of API group {own_group!r} but the request says {request.kind}; nothing was "
                "checked",
                "evaluation_error",
            )
        if request.operation == "UPDATE" and (_being_deleted(obj) or _being_deleted(request.old_object)):
            # Admitted unjudged, on purpose (and recorded like any answer). The API server keeps the
            # stored deletionTimestamp on every UPDATE (none can set or clear it), so it marks a deletion
            # already under way, and nothing new starts from such an object: workload controllers create no
            # Pods from an object being deleted, and the kubelet only tears a terminating Pod down, whatever
            # its spec now says. These UPDATEs are clean-up, above all finalizer removal; blocking them would
            # leave the object undeletable (kyverno#8815).
            return Verdict(True, "DeletionInProgress")
        obj = _with_kind(obj, request)
        old = _with_kind(request.old_object, request) if request.old_object is not None else None
        evaluator = loaded.evaluator
        try:
            with self.tracing.span("policy.evaluate", **{"trtguard.policy_revision": loaded.revision}):
                async with asyncio.timeout(deadline.remaining()):
                    # A kind the policies do not know reaches the webhook only if its rules were widened:
                    # what it names is judged as found (never admitted unjudged), with a warning.
                    decision = await evaluator.evaluate(
                        obj,
                        namespace=request.namespace,
                        old=old,
                        deadline=deadline,
                        unknown_kinds="judge",
                        requester=_requester(request),
                        pin=self.pinning,
                    )
        except TimeoutError:
            message = f"ran out of time after {budget:.1f} s"
            return self._error_verdict(
                evaluator,
                obj=obj,
                request=request,
                message=message,
                reason="EvaluationTimeout",
                failure="timeout",
            )
        except TrtguardError as error:
            return self._error_verdict(
                evaluator,
                obj=obj,
                request=request,
                message=str(error),
                reason="EvaluationError",
                failure="evaluation_error",
            )
        except Exception as error:  # a bug in a policy or the evaluator: onError decides, not a default allow
            _log.exception("policy evaluation failed", extra={"fields": {"uid": request.uid}})
            message = f"internal error while evaluating ({type(error).__name__})"
            return self._error_verdict(
                evaluator,
                obj=obj,
                request=request,
                message=message,
                reason="EvaluationError",
                failure="evaluation_error",
            )
        if decision.unjudged is not None:
            return _not_a_workload(decision.unjudged)
        verdict = _from_decision(decision, "PolicyViolation")
        if loaded.policy_set.kinds.get(request.kind.group, request.kind.kind, request.kind.version) is None:
            warning = f"trtguard does not know {request.kind}; it judged the images found in the whole object"
            verdict = replace(verdict, warnings=(warning, *verdict.warnings))
        return verdict

    def _error_verdict(
        self,
        evaluator: PolicyEvaluator,
        *,
        obj: Mapping[str, Any],
        request: AdmissionRequest,
        message: str,
        reason: str,
        failure: str,
    ) -> Verdict:
        try:
            decision = evaluator.error_decision(obj, namespace=request.namespace, message=message)
        except Exception:  # the fallback itself failed: deny rather than guess what the policies meant
            _log.exception("error decision failed", extra={"fields": {"uid": request.uid}})
            return _deny(reason, f"trtguard could not check this request: {message}", failure)
        verdict = _from_decision(decision, reason)
        return Verdict(
            verdict.allowed,
            reason,
            verdict.message,
            verdict.warnings,
            decision,
            verdict.causes,
            failure,
        )

    def _record(self, request: AdmissionRequest, verdict: Verdict, latency: float) -> DecisionRecord:
        decision = verdict.decision
        violations: tuple[Mapping[str, Any], ...] = ()
        images: tuple[Mapping[str, Any], ...] = ()
        engines: tuple[Mapping[str, Any], ...] = ()
        revision = self.policies.current.revision if self.policies.current is not None else None
        if decision is not None:
            violations = tuple(v.to_json() for v in decision.violations)
            images = tuple(i.to_json() for i in decision.images)
            engines = () if self.pinning else tuple(e.to_json() for e in decision.engines)
            revision = decision.policy_revision
        return DecisionRecord(
            uid=request.uid,
            operation=request.operation,
            kind=request.kind.kind,
            api_version=request.kind.api_version,
            sub_resource=request.sub_resource,
            namespace=request.namespace,
            name=request.name or _object_name(request.object or request.old_object),
            user=request.username,
            groups=request.groups,
            dry_run=request.dry_run,
            allowed=verdict.allowed,
            reason=verdict.reason,
            message=verdict.message,
            violations=violations,
            warnings=verdict.warnings,
            images=images,
            engines=engines,
            policy_revision=revision,
            latency_us=round(latency * 1_000_000),
            replica=self.settings.replica,
        )

    async def _write(
        self, record: DecisionRecord, verdict: Verdict, deadline: Deadline, arrived: float
    ) -> Verdict:
        with self.tracing.span("decisionlog.append") as span:
            try:
                receipt = await self.store.append(record, deadline=deadline, arrived=arrived)
            except DecisionLogUnavailable as error:
                self.metrics.count_write("failed")
                _log.error(
                    "decision not recorded; denying",
                    extra={"fields": {"uid": record.uid, "error": error.message, "verdict": verdict.reason}},
                )
                span.set_attribute("trtguard.recorded", False)
                return _deny(
                    "DecisionLogUnavailable",
                    "trtguard could not record this decision in its decision log, so it denies the request; "
                    "retry shortly",
                    "decision_log",
                )
            span.set_attribute("trtguard.recorded", True)
        self.metrics.count_write("spooled" if receipt.spooled else "written")
        return verdict

    def _observe(
        self, request: AdmissionRequest, verdict: Verdict, record: DecisionRecord, seconds: float
    ) -> None:
        decision = "allow" if verdict.allowed else "deny"
        loaded = self.policies.current
        known = loaded is not None and loaded.policy_set.kinds.get(
            request.kind.group, request.kind.kind, request.kind.version
        )
        kind = request.kind.kind if known else "other"
        # A malformed request may carry any operation: labels stay a fixed set.
        operation = request.operation if request.operation in OPERATIONS else "other"
        self.metrics.count_review(decision, operation, kind, request.dry_run, seconds)
        if verdict.failure is not None:
            self.metrics.review_failures.labels(verdict.failure).inc()
        if not verdict.allowed and (cause := _error_cause(verdict)) is not None:
            self.metrics.error_denials.labels(cause).inc()
        log_fields(
            _log,
            logging.INFO,
            "admission decision",
            {
                "uid": request.uid,
                "operation": request.operation,
                "kind": str(request.kind),
                "sub_resource": request.sub_resource,
                "namespace": request.namespace,
                "name": record.name,
                "user": request.username,
                "dry_run": request.dry_run,
                "allowed": verdict.allowed,
                "reason": verdict.reason,
                "status_message": verdict.message,
                "warnings": list(verdict.warnings),
                "policy_revision": record.policy_revision,
                "latency_ms": round(seconds * 1000, 3),
            },
        )

    def _response(self, request: AdmissionRequest, verdict: Verdict) -> dict[str, Any]:
        annotations = {"decision": "allow" if verdict.allowed else "deny", "reason": verdict.reason}
        if verdict.decision is not None:
            annotations["policy-revision"] = verdict.decision.policy_revision
            annotations["policies"] = json_list(verdict.decision.matched_policies)  # [] for none
            if verdict.decision.violations:
                annotations["violations"] = _violations_annotation(verdict.decision.violations)
        if request.dry_run:
            annotations["dry-run"] = "true"
        if verdict.allowed:
            answer = allow_response(request.uid, warnings=verdict.warnings, audit_annotations=annotations)
            return with_patch(answer, verdict.patch)
        return deny_response(
            request.uid,
            message=verdict.message or verdict.reason,
            reason=verdict.reason,
            code=verdict.code,
            causes=verdict.causes,
            warnings=verdict.warnings,
            audit_annotations=annotations,
        )


def _span_attributes(request: AdmissionRequest) -> dict[str, AttributeValue | None]:
    return {
        "k8s.admission.uid": request.uid,
        "k8s.admission.operation": request.operation,
        "k8s.admission.kind": str(request.kind),
        "k8s.namespace.name": request.namespace,
        "k8s.admission.dry_run": request.dry_run,
    }


def _from_decision(decision: Decision, deny_reason: str) -> Verdict:
    warnings = tuple(v.one_line() for v in decision.warnings)
    if decision.allowed:
        return Verdict(True, "Allowed", warnings=warnings, decision=decision)
    denials = decision.denials
    return Verdict(
        False,
        deny_reason,
        message=_message(denials),
        warnings=warnings,
        decision=decision,
        causes=tuple((v.path, v.one_line()) for v in denials if v.path),
    )


def _message(denials: Sequence[Violation]) -> str:
    # The same finding from several policies (the same rule on the same image or engine, with the same text)
    # is said once, naming every policy: a readable message matters more than one line per policy.
    groups: dict[tuple[str, str | None, str | None, str, str], list[str]] = {}
    for v in denials:
        groups.setdefault((v.rule, v.image, v.engine, v.message, v.fix), []).append(v.policy)
    lines = [
        Violation(", ".join(policies), rule, message, fix, Action.DENY, image, engine).one_line()
        for (rule, image, engine, message, fix), policies in groups.items()
    ]
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} policy violations: " + " | ".join(
        f"({n}) {line}" for n, line in enumerate(lines, 1)
    )


def _violations_annotation(violations: Sequence[Violation]) -> str:
    """The violations as a JSON list that fits an audit annotation; ``{"more": n}`` counts those left out.

    Items are dropped whole (the API server would otherwise get JSON cut in the middle); the decision log
    has them all.
    """
    items: list[dict[str, Any]] = []
    for v in violations[:MAX_ANNOTATED]:
        item: dict[str, Any] = {"policy": v.policy, "rule": v.rule, "action": v.action.value}
        for key, value in (("image", v.image), ("engine", v.engine), ("path", v.path)):
            if value is not None:
                item[key] = value
        if v.error:
            item["error"] = True
        items.append(item)
    while True:
        more = len(violations) - len(items)
        shown = [*items, {"more": more}] if more else items
        text = json.dumps(shown, separators=(",", ":"), ensure_ascii=False)
        if len(text) <= MAX_ANNOTATION_CHARS or not items:
            return text
        items.pop()


def _error_cause(verdict: Verdict) -> str | None:
    """Why a denial came from an error rather than a policy (an ERROR_DENIAL_REASONS value), or None."""
    if verdict.failure is not None:
        return verdict.failure if verdict.failure in ERROR_DENIAL_REASONS else None
    decision = verdict.decision
    if decision is not None and any(v.error for v in decision.denials):
        return "evidence_unavailable"
    return None


def _requester(request: AdmissionRequest) -> Requester | None:
    # Without a username the API server did not say who asks: rules about the requester cannot be checked.
    return Requester(request.username, request.groups) if request.username is not None else None


def _deny(reason: str, message: str, failure: str | None = None) -> Verdict:
    return Verdict(False, reason, message=message, failure=failure)


def _not_a_workload(reason: str) -> Verdict:
    warning = f"trtguard judged nothing: {reason}"
    return Verdict(True, "NotAWorkload", warnings=(warning,))


def _group(obj: Mapping[str, Any], request: AdmissionRequest) -> str | None:
    """The API group the object's own ``apiVersion`` names (the request's when it names none)."""
    api_version = obj.get("apiVersion", request.kind.api_version)
    return group_of(api_version) if isinstance(api_version, str) else None


def _being_deleted(obj: Mapping[str, Any] | None) -> bool:
    metadata = obj.get("metadata") if obj is not None else None
    return isinstance(metadata, dict) and bool(metadata.get("deletionTimestamp"))


def _with_kind(obj: Mapping[str, Any], request: AdmissionRequest) -> Mapping[str, Any]:
    # `kind` in the request is authoritative (decode with kind, not requestKind). Fill it in where the object
    # lacks it; an object that names a different kind is left alone, and the extractor refuses it.
    if "kind" in obj and "apiVersion" in obj:
        return obj
    return {"apiVersion": request.kind.api_version, "kind": request.kind.kind, **obj}


def _object_name(obj: Mapping[str, Any] | None) -> str | None:
    metadata = obj.get("metadata") if obj is not None else None
    if not isinstance(metadata, dict):
        return None
    name = metadata.get("name") or metadata.get("generateName")
    return name if isinstance(name, str) else None
