"""One policy's findings about one workload: the rule table, and the order it is applied in.

Every rule family is one rule of the contract of :mod:`policies.rules._findings`, registered once in
:data:`RULES`; each applies to a policy when its guard says so (``applies``), and judges one subject
(:mod:`policies.evaluation`): first the workload, then each image, then each engine the policy judges (the
build manifest rule first: the rules after it read the manifest it verified, and none of them runs when it
finds none that can be judged), then the workload again. Whatever an image's or engine's rules raise that no
rule foresaw is confined to that image or engine (``onError``). :class:`~policies.evaluator.PolicyEvaluator`
runs this for each policy that selects the workload; no module but this one runs a rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeVar

from policies import rules
from policies.engines import EngineSort, outside_violations
from policies.evaluation import EngineSubject, Evaluation, ImageSubject, WorkloadSubject
from policies.loader import CompiledPolicy
from policies.results import Violation
from policies.rules import Findings, unavailable, violation
from policies.schema import ModelsRule
from policies.workload_model import EngineUse, ImageUse, Workload
from verifier.base import InvalidReference, TrtguardError

__all__ = ["RULES", "judge_policy"]

_Rule = TypeVar("_Rule", rules.WorkloadFamily, rules.ImageFamily, rules.EngineFamily)

#: The rule table: every rule family, in the order it judges (docs/ARCHITECTURE.md, "The rule contract").
#: The build manifest comes first among the engine rules: the rules over the manifest read the one it
#: verified, and none of them (GPU verification included) runs when it finds none that can be judged.
RULES: Final = rules.RuleTable(
    workload=(rules.REQUESTER,),
    images=(rules.IMAGES,),
    engines=(
        rules.BUILD_MANIFEST,
        rules.MODEL_RULES,
        rules.EXPRESSIONS,
        rules.TOOLCHAIN,
        rules.GPU_COMPATIBILITY,
        rules.CHANGE_CONTROL,
        rules.VERIFICATION,
    ),
    afterwards=(rules.CHANGE_CONTROL_KEPT,),
)


async def judge_policy(run: Evaluation, policy: CompiledPolicy, sort: EngineSort) -> list[Violation]:
    """Everything ``policy`` finds: malformed fields, the workload rules, then each image, then each engine
    (``sort`` says which of the workload's image volumes are engines for this policy), each rule of
    :data:`RULES` that applies to the policy in the table's order."""
    plan = _plan(policy)
    judged, previous = run.view(policy)
    found: list[Violation] = [
        violation(policy, "workload", problem.message, "fix the resource", path=problem.path)
        for problem in judged.problems
    ]
    workload = _workload_subject(judged, sort)
    for workload_rule in plan.workload:
        about = Findings(policy, path=None)
        await workload_rule.check(run, about, workload)
        found += about.violations
    image_rules = plan.images
    if image_rules:
        # Nothing to check is never a pass; on an UPDATE only when it is new (the images were removed).
        if not run.context.images and (previous is None or previous.images):
            found.append(
                violation(
                    policy,
                    "workload",
                    "no image could be found in the resource, so nothing can be checked",
                    "give every container an image",
                    path=judged.spec_path,
                )
            )
        for image_use in judged.images:
            # A check that failed in a way no rule foresaw is a violation under onError for that image
            # (or engine, below) alone.
            try:
                found += await _judge_image(run, policy, image_rules, image_use)
            except TrtguardError as error:
                found.append(
                    unavailable(policy, "images", error, image=image_use.reference, path=image_use.path)
                )
    models = policy.spec.models
    if models is not None:
        if models.required and not sort.engines and (previous is None or previous.engines):
            found.append(
                violation(
                    policy,
                    "models.required",
                    "the workload declares no TensorRT engine"
                    + (
                        f" in any of its {len(judged.templates)} pod templates"
                        if len(judged.templates) > 1
                        else ""
                    ),
                    "name the engine by digest in an image volume or the trtguard.dev/engines annotation",
                    path=f"{judged.spec_path}.volumes" if len(judged.templates) == 1 else judged.spec_path,
                )
            )
        found += sort.violations(policy, judged.engines, run)
        found += outside_violations(policy, judged, run)
        engine_rules = plan.engines
        for engine_use in judged.engines:
            if engine_use not in sort.engines:
                continue
            try:
                found += await _judge_engine(run, policy, models, engine_rules, engine_use)
            except TrtguardError as error:
                found.append(
                    unavailable(policy, "models", error, engine=engine_use.reference, path=engine_use.path)
                )
    for later in plan.afterwards:
        about = Findings(policy, path=None)
        await later.check(run, about, workload)
        found += about.violations
    return found


def _workload_subject(judged: Workload, sort: EngineSort) -> WorkloadSubject:
    """The workload as its rules see it: with the engines this policy sorted that are not judged now."""
    # Every engine is judged now (a CREATE, where the sort is of the very engines judged): none is left.
    if not sort.engines or sort.engines == judged.engines:
        return WorkloadSubject(judged, ())
    judged_now = set(judged.engines)
    return WorkloadSubject(judged, tuple(use for use in sort.engines if use not in judged_now))


@dataclass(frozen=True, slots=True)
class _Plan:
    """The rules of each part of the table that apply to one policy, in order."""

    workload: tuple[rules.WorkloadFamily, ...]
    images: tuple[rules.ImageFamily, ...]
    engines: tuple[rules.EngineFamily, ...]
    afterwards: tuple[rules.WorkloadFamily, ...]


def _plan(policy: CompiledPolicy) -> _Plan:
    """The rules that apply to ``policy``, part by part.

    Worked out once per policy loaded (a policy is immutable, and each guard reads only the policy): asked
    on every admission otherwise. The entry holds the policy, so that its ``id`` is not reused while it is
    cached.
    """
    entry = _PLANS.get(id(policy))
    if entry is not None and entry[0] is policy:
        return entry[1]
    plan = _Plan(
        workload=_applying(RULES.workload, policy),
        images=_applying(RULES.images, policy),
        engines=_applying(RULES.engines, policy),
        afterwards=_applying(RULES.afterwards, policy),
    )
    if len(_PLANS) >= _PLANS_MAX:  # policies reloaded many times: start over
        _PLANS.clear()
    _PLANS[id(policy)] = (policy, plan)
    return plan


def _applying(part: tuple[_Rule, ...], policy: CompiledPolicy) -> tuple[_Rule, ...]:
    """The rules of one part of the table that apply to ``policy``, in order."""
    return tuple(rule for rule in part if rule.applies(policy))


#: ``_plan``'s answers, by the id of the policy.
_PLANS: Final[dict[int, tuple[CompiledPolicy, _Plan]]] = {}
#: At most 1,024 policies, as the table before it kept: each entry holds its policy (and that policy's own
#: caches) until the table is emptied, so this bounds what policy reloads keep alive (attack 37b).
_PLANS_MAX: Final = 1024


async def _judge_image(
    run: Evaluation, policy: CompiledPolicy, applying: tuple[rules.ImageFamily, ...], use: ImageUse
) -> list[Violation]:
    """The image rules in order, over an image whose reference parses."""
    ref = run.reference(use.reference)
    if isinstance(ref, InvalidReference):
        found = Findings(policy, image=use.reference, path=use.path)
        found.add("images", f"invalid image reference: {ref.message}", ref.hint or "fix the reference")
        return found.violations
    found = Findings(policy, image=str(ref), path=use.path)
    image = ImageSubject(use, ref, run.counted(use.reference))
    for rule in applying:
        await rule.check(run, found, image)
    return found.violations


async def _judge_engine(
    run: Evaluation,
    policy: CompiledPolicy,
    models: ModelsRule,
    applying: tuple[rules.EngineFamily, ...],
    use: EngineUse,
) -> list[Violation]:
    """The engine rules in order, over an engine referred to by digest, until one says the rest cannot
    judge it (no build manifest that can be judged)."""
    ref = run.reference(use.reference)
    if isinstance(ref, InvalidReference):
        found = Findings(policy, engine=use.reference, path=use.path)
        found.add(
            "models.reference", f"invalid engine reference: {ref.message}", ref.hint or "fix the reference"
        )
        return found.violations
    found = Findings(policy, engine=str(ref), path=use.path)
    if ref.digest is None:
        found.add(
            "models.reference",
            "engine reference is not pinned by digest",
            f"refer to the engine as {ref.name}@sha256:<digest> (printed by `trtguard push-engine`)"
            + (
                "; an image volume that holds no engine: list the engine repositories in models.engines"
                if use.source != "annotation" and models.engines is None
                else ""
            ),
        )
        return found.violations
    engine: EngineSubject | None = EngineSubject(use, ref, models, run.counted(use.reference))
    for rule in applying:
        if engine is None:
            break
        engine = await rule.check(run, found, engine)
    return found.violations
