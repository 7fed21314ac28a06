"""Who may deploy (``spec.requester``): the requester of the admission must be one the policy allows.

It judges a CREATE, and an UPDATE that changes labels, annotations or the spec (a controller removing a
finalizer or writing status changes none of them, so it is never blocked). An unknown requester (``check``
without ``--as``) makes the rule unverifiable: the policy's ``onError`` (or ``check --unverifiable``)
decides, never a pass.
"""

from __future__ import annotations

from policies.evaluation import Evaluation, WorkloadSubject
from policies.requesters import describe_set, in_set
from policies.rules._findings import Findings, WorkloadFamily, violation

__all__ = ["REQUESTER"]

_RULE = "requester"


async def _check(run: Evaluation, found: Findings, _workload: WorkloadSubject) -> None:
    """The violation of the policy's ``requester`` rule by this request's requester, if any."""
    rule = found.policy.spec.requester
    if rule is None or not run.changed():
        return
    allowed = describe_set(rule.allowed)
    requester = run.requester
    if requester is None:
        found.violations.append(
            violation(
                found.policy,
                _RULE,
                f"who may create or change these workloads ({allowed}) cannot be checked: the requester is "
                "unknown",
                "name the requester: trtguard check --as USER [--as-group GROUP]",
                error=True,
            )
        )
        return
    if in_set(requester, rule.allowed):
        return
    found.violations.append(
        violation(
            found.policy,
            _RULE,
            f"requester {requester} may not create or change the workloads this policy selects "
            f"(allowed: {allowed})",
            "deploy through one of the allowed requesters, or have the policy extended",
            path="metadata",
        )
    )


#: ``spec.requester``, a workload rule.
REQUESTER = WorkloadFamily(name=_RULE, applies=lambda policy: policy.spec.requester is not None, check=_check)
