"""Verdicts as ``wgpolicyk8s.io/v1alpha2`` ``PolicyReport`` / ``ClusterPolicyReport`` objects.

The format of the Kubernetes Policy working group (kubernetes-sigs/wg-policy-prototypes, the CRDs in
``tests/data/780-wgpolicyk8s-policyreport-crds``), which Kyverno and Gatekeeper write and Policy Reporter
shows. ``trtguard check --format policy-report`` and ``trtguard audit-cluster`` write them the same way:

- one report per namespace (``PolicyReport`` named :data:`REPORT_NAME`), and one ``ClusterPolicyReport`` for
  cluster-scoped resources, each with a ``summary`` of its results;
- one result per policy rule and resource: the violations of one rule about one resource (several images,
  say) make one result, ``fail`` for Deny and Audit, ``warn`` for Warn, ``error`` when the rule could not be
  checked, with the messages ``check`` prints (``policy/rule: image: message; fix: …``); a policy that selects
  the resource and finds nothing gives one ``pass`` result (rule ``all``); a resource with nothing to judge,
  or that no policy selects, one ``skip``, and one that could not be read one ``error`` (policy
  ``trtguard``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from policies.results import Action, Decision, Violation
from verifier.base import InputError

__all__ = ["API_VERSION", "REPORT_NAME", "SOURCE", "Subject", "policy_reports"]

API_VERSION: Final = "wgpolicyk8s.io/v1alpha2"
#: The name of every report trtguard writes (one per namespace, and the cluster's).
REPORT_NAME: Final = "trtguard"
#: ``results[].source`` and the ``app.kubernetes.io/managed-by`` label of the reports.
SOURCE: Final = "trtguard"
#: The policy named by results that belong to no policy (a resource that could not be read or judged).
ENGINE: Final = "trtguard"
_WORST: Final = ("pass", "skip", "warn", "fail", "error")


@dataclass(frozen=True, slots=True)
class Subject:
    """The resource a verdict is about, as a report's ``resources`` entry names it (an ObjectReference)."""

    api_version: str
    kind: str
    namespace: str | None
    name: str | None
    uid: str | None = None

    def reference(self) -> dict[str, str]:
        """The ``corev1.ObjectReference`` of the resource."""
        data = {"apiVersion": self.api_version, "kind": self.kind}
        for key, value in (("namespace", self.namespace), ("name", self.name), ("uid", self.uid)):
            if value is not None:
                data[key] = value
        return data


def policy_reports(
    verdicts: Iterable[tuple[Subject, Decision | InputError]],
    *,
    now: datetime,
    problems: Iterable[InputError] = (),
) -> list[dict[str, Any]]:
    """The reports of ``verdicts``: a ``PolicyReport`` per namespace (in order of first appearance), then a
    ``ClusterPolicyReport`` when a subject has no namespace or there are ``problems`` (inputs that held no
    resource to name: an ``error`` result each); each result is stamped ``now``."""
    stamp = {"seconds": int(now.timestamp()), "nanos": now.microsecond * 1000}
    by_namespace: dict[str | None, list[dict[str, Any]]] = {}

    def add(namespace: str | None, results: Iterable[dict[str, Any]]) -> None:
        kept = by_namespace.setdefault(namespace, [])
        kept += ({**r, "source": SOURCE, "timestamp": stamp, "scored": True} for r in results)

    for subject, verdict in verdicts:
        add(subject.namespace, _results(subject, verdict))
    for problem in problems:
        message = problem.message + (f" ({problem.location})" if problem.location else "")
        add(None, [_result(ENGINE, "input", "error", message, [])])
    reports = [_report(ns, results) for ns, results in by_namespace.items() if ns is not None]
    if None in by_namespace:
        reports.append(_report(None, by_namespace[None]))
    return reports


def _report(namespace: str | None, results: list[dict[str, Any]]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": REPORT_NAME, "labels": {"app.kubernetes.io/managed-by": SOURCE}}
    if namespace is not None:
        metadata["namespace"] = namespace
    summary = {key: sum(1 for r in results if r["result"] == key) for key in _WORST}
    return {
        "apiVersion": API_VERSION,
        "kind": "PolicyReport" if namespace is not None else "ClusterPolicyReport",
        "metadata": metadata,
        "summary": summary,
        "results": results,
    }


def _results(subject: Subject, verdict: Decision | InputError) -> list[dict[str, Any]]:
    resources = [subject.reference()]
    if isinstance(verdict, InputError):
        message = verdict.message + (f" ({verdict.location})" if verdict.location else "")
        return [_result(ENGINE, "workload", "error", message, resources)]
    if verdict.unjudged is not None:
        return [_result(ENGINE, "workload", "skip", verdict.unjudged, resources)]
    if not verdict.matched_policies and not verdict.violations:
        name = f"{subject.kind} {subject.name or '<unnamed>'}"
        return [_result(ENGINE, "policies", "skip", f"no policy selects {name}", resources)]
    grouped: dict[tuple[str, str], list[Violation]] = {}
    for violation in verdict.violations:
        grouped.setdefault((violation.policy, violation.rule), []).append(violation)
    results = []
    for policy in verdict.matched_policies:
        if not any(p == policy for p, _ in grouped):
            name = f"{subject.kind} {subject.name or '<unnamed>'}"
            results.append(_result(policy, "all", "pass", f"{name} meets every rule of {policy}", resources))
    for (policy, rule), found in grouped.items():
        outcome = max((_outcome(v) for v in found), key=_WORST.index)
        lines = list(dict.fromkeys(v.one_line() for v in found))
        message = lines[0] if len(lines) == 1 else " | ".join(f"({n}) {t}" for n, t in enumerate(lines, 1))
        properties = _properties(found)
        results.append(_result(policy, rule, outcome, message, resources, properties))
    return results


def _outcome(found: Violation) -> str:
    if found.error:
        return "error"
    return "warn" if found.action is Action.WARN else "fail"


def _properties(found: list[Violation]) -> dict[str, str]:
    """What the result's ``properties`` (a string map) say: the action, and the images, engines and paths."""
    properties = {"action": ", ".join(dict.fromkeys(v.action.value for v in found))}
    for key, values in (
        ("images", [v.image for v in found]),
        ("engines", [v.engine for v in found]),
        ("paths", [v.path for v in found]),
    ):
        present = list(dict.fromkeys(value for value in values if value is not None))
        if present:
            properties[key] = ", ".join(present)
    return properties


def _result(
    policy: str,
    rule: str,
    outcome: str,
    message: str,
    resources: list[dict[str, str]],
    properties: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {"policy": policy, "rule": rule, "result": outcome, "message": message}
    if resources:
        result["resources"] = resources
    if properties:
        result["properties"] = dict(properties)
    return result
