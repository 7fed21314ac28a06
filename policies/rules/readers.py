"""The containers that run an engine, grouped by image, each group judged once per policy, rule and engine.

An engine's runtime rules (``toolchain.sameAsRuntimeImage``, ``gpuCompatibility.runtime``) judge every
container that can read it, one image at a time. What they find depends on the engine's digest and the
image only, so an engine mounted a hundred times (a hundred image volumes of one digest) beside hundreds of
images is judged, and reported, once per (policy, rule, engine digest, image): not once per volume, which
made a 112 KB Pod a hundred thousand violations. The grouping is pure work charged to the evaluation's
budget (:meth:`~policies.rules.evaluation.Evaluation.computed`), so past it the policy's ``onError``
answers.
"""

from __future__ import annotations

import functools

from policies.pods import EngineUse, SameImage, by_image
from policies.rules.evaluation import Evaluation
from policies.rules.findings import Findings

__all__ = ["unjudged"]


async def unjudged(run: Evaluation, found: Findings, rule: str, use: EngineUse) -> list[SameImage] | None:
    """The image groups of ``use``'s readers that ``found``'s policy has not yet judged under ``rule`` for
    this engine; None when this very set of readers was judged already (nothing to say, not even that no
    container runs the engine)."""
    policy, engine = found.policy.name, found.engine
    if not run.first((policy, rule, engine, use.readers)):
        return None
    readers = run.context.readers(use)
    groups = await run.computed(
        ("readers by image", use.readers), functools.partial(by_image, readers), list(readers)
    )
    run.budget.step(len(groups))
    return [group for group in groups if run.first((policy, rule, engine, _image_of(group)))]


def _image_of(group: SameImage) -> object:
    """What identifies a group: its image (reference and field), or the containers that name none."""
    if group.image is None:
        return tuple(container.path for container in group.containers)
    return (group.image.reference, group.image.field)
