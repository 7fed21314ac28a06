"""CEL expressions (``models.rules.expressions``) over the manifest, the workload and the engine.

Each must come out true. One that is false, or fails (a missing key, a type error), is a violation under
the policy's ``action``; one stopped by a bound on time or memory could not be checked, so ``onError``
applies. The data is checked against the CEL limits and converted once for all of a policy's expressions;
with the workload in it, off the event loop and charged to the evaluation's CPU budget
(:mod:`policies.workload_model._budget`).

``engine`` holds, besides the engine's ``name``, ``reference`` and ``digest``, where it runs, from the
workload model (:mod:`policies.workload_model._pods`): ``containers`` (every container that can read it:
``path``,
``name``, ``field``, ``template``, ``image``) and ``templates`` (every pod template it reaches: ``path``,
``role``, ``nodeSelector``, ``affinity``), so that an expression about the Pods that run the engine need
not pick one template of the object.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from policies.cel import CelEvaluationError, prepare_activation
from policies.evaluation import EngineSubject, Evaluation
from policies.rules._findings import EngineFamily, Findings, has_build_manifest
from policies.verified import VerifiedManifest
from policies.workload_model import EngineUse, within
from verifier.base import ImageReference

__all__ = ["EXPRESSIONS"]


async def _check(run: Evaluation, found: Findings, engine: EngineSubject) -> EngineSubject:
    """The policy's expressions against the engine's verified build manifest."""
    if engine.build is not None:
        await _judge(run, found, engine.ref, engine.use, engine.build.manifest)
    return engine


#: ``models.rules.expressions``, an engine rule over the build manifest.
EXPRESSIONS = EngineFamily(
    name="models.rules.expressions",
    applies=has_build_manifest,
    check=_check,
)


async def _judge(
    run: Evaluation, found: Findings, ref: ImageReference, use: EngineUse, verified: VerifiedManifest
) -> None:
    """Every expression of the policy, against this engine's manifest and the workload."""
    policy = found.policy
    if not policy.expressions:
        return
    try:
        if policy.expressions_read_workload or policy.expressions_read_now:
            values = {
                "manifest": verified.as_json,
                "workload": run.cel_workload() if policy.expressions_read_workload else {},
                "engine": _engine(run, use, ref),
                "now": run.clock().astimezone(UTC).isoformat().replace("+00:00", "Z"),
            }
            activation = await within(run.budget, lambda: prepare_activation(values), values["workload"])
        else:  # the same for every admission of this engine: prepared once
            activation = run.verified.manifest_activation(verified, use.name, str(ref), ref.digest)
    except CelEvaluationError as error:
        found.add(
            "models.rules.expressions",
            f"the workload or manifest cannot be handed to CEL: {error.message}",
            error.hint or "shrink the object",
        )
        return
    programs = [expression.program for expression in policy.expressions]
    outcomes = await run.cel.evaluate_bools(programs, activation, seconds=run.deadline.remaining())
    for expression, outcome in zip(policy.expressions, outcomes, strict=True):
        if outcome is True:
            continue
        rule_id = f"models.rules.expressions.{expression.name}"
        if outcome is False:
            found.add(rule_id, expression.message, "change the engine or workload so that the rule holds")
        elif outcome.resource:  # stopped by a bound on time or memory: it could not be checked
            found.add(
                rule_id,
                f"{expression.message} (the expression could not be evaluated: {outcome.message})",
                outcome.hint or "simplify the expression",
                error=True,
            )
        else:
            found.add(
                rule_id,
                f"{expression.message} (the expression failed: {outcome.message})",
                "fix the manifest field the expression reads, or the expression",
            )


def _engine(run: Evaluation, use: EngineUse, ref: ImageReference) -> dict[str, Any]:
    """The ``engine`` variable: the engine and where it runs (see the module's docstring)."""
    return {
        "name": use.name,
        "reference": str(ref),
        "digest": ref.digest,
        "containers": [
            {
                "path": c.path,
                "name": c.name,
                "field": c.field,
                "template": c.template,
                "image": c.image.reference if c.image is not None else None,
            }
            for c in run.context.readers(use)
        ],
        "templates": [
            {"path": t.path, "role": t.role, "nodeSelector": t.placement[0], "affinity": t.placement[1]}
            for t in run.context.templates_of(use)
        ],
    }
