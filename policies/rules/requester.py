"""Who may deploy (``spec.requester``): the requester of the admission must be one the policy allows.

It judges a CREATE, and an UPDATE that changes labels, annotations or the spec (a controller removing a
finalizer or writing status changes none of them, so it is never blocked). An unknown requester (``check``
without ``--as``) makes the rule unverifiable: the policy's ``onError`` (or ``check --unverifiable``)
decides, never a pass.
"""

from __future__ import annotations

from policies.evaluation import Evaluation
from policies.loader import CompiledPolicy
from policies.requesters import RequesterRule, describe_set, in_set
from policies.results import Violation
from policies.rules.findings import violation

__all__ = ["check"]

_RULE = "requester"


def check(run: Evaluation, policy: CompiledPolicy, rule: RequesterRule) -> list[Violation]:
    """The violation of ``rule`` by this request's requester, if any."""
    if not run.changed():
        return []
    allowed = describe_set(rule.allowed)
    requester = run.requester
    if requester is None:
        return [
            violation(
                policy,
                _RULE,
                f"who may create or change these workloads ({allowed}) cannot be checked: the requester is "
                "unknown",
                "name the requester: trtguard check --as USER [--as-group GROUP]",
                error=True,
            )
        ]
    if in_set(requester, rule.allowed):
        return []
    return [
        violation(
            policy,
            _RULE,
            f"requester {requester} may not create or change the workloads this policy selects "
            f"(allowed: {allowed})",
            "deploy through one of the allowed requesters, or have the policy extended",
            path="metadata",
        )
    ]
