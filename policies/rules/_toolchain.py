"""The toolchain rule (``models.rules.toolchain``): which TensorRT image built the engine, and where it runs.

``allowed`` lists the builder images the manifest may name; ``sameAsRuntimeImage`` requires every container
that can read the engine, in any pod template (:attr:`~policies.workload_model._pods.EngineUse.readers`), to
run the very
image (by digest) that built it, since an engine only works with the TensorRT version it was built with.

What such a rule finds depends on the engine's digest and the image only, so an engine mounted a hundred
times (a hundred image volumes of one digest) beside hundreds of images is judged, and reported, once per
(policy, rule, engine digest, image) (:func:`runtime_groups`, which ``gpuCompatibility``'s ``runtime``
shares): not once per volume, which made a 112 KB Pod a hundred thousand violations. The grouping is pure
work charged to the evaluation's budget (:meth:`~policies.evaluation._state.Evaluation.computed`), so past
it the policy's ``onError`` answers.
"""

from __future__ import annotations

import functools

from policies.evaluation import EngineSubject, Evaluation
from policies.patterns import matches_any
from policies.rules._findings import EngineFamily, Findings
from policies.schema import ToolchainRule
from policies.verified import VerifiedManifest
from policies.workload_model import EngineUse, SameImage, by_image
from verifier.base import EvidenceUnavailable, ImageReference, InvalidReference

__all__ = ["TOOLCHAIN", "runtime_groups"]

_RULE = "models.rules.toolchain"


async def _check(run: Evaluation, found: Findings, engine: EngineSubject) -> EngineSubject:
    """The toolchain rule against the engine's verified build manifest."""
    rule = engine.models.rules.toolchain
    if rule is not None and engine.build is not None:
        await _judge(run, found, rule, engine.use, engine.build.manifest)
    return engine


#: ``models.rules.toolchain``, an engine rule over the build manifest.
TOOLCHAIN = EngineFamily(
    name=_RULE,
    applies=lambda policy: (
        (models := policy.spec.models) is not None
        and models.build_manifest is not None
        and models.rules.toolchain is not None
    ),
    check=_check,
)


async def _judge(
    run: Evaluation, found: Findings, rule: ToolchainRule, use: EngineUse, verified: VerifiedManifest
) -> None:
    """The builder image the manifest names: allowed, and (``sameAsRuntimeImage``) the one that runs."""
    builder = run.reference(verified.manifest.toolchain.image)
    if isinstance(builder, InvalidReference):
        found.add(
            _RULE,
            f"builder image in the manifest is invalid: {builder.message}",
            "record the builder image as registry/repo@sha256:<digest>",
        )
        return
    patterns = found.policy.toolchain_patterns
    if patterns and not matches_any(patterns, builder):
        allowed = ", ".join(p.text for p in patterns)
        found.add(
            _RULE,
            f"engine was built with {builder}, not an allowed toolchain ({allowed})",
            "rebuild the engine with an allowed TensorRT image",
        )
    if rule.same_as_runtime_image:
        await _same_as_runtime_image(run, found, builder, use)


async def _same_as_runtime_image(
    run: Evaluation, found: Findings, builder: ImageReference, use: EngineUse
) -> None:
    """``sameAsRuntimeImage``: every container that may run the engine runs the builder image.

    One matching container is not enough: the engine runs wherever it can be read (mounted, or handed on
    through a shared writable volume), so each of those containers is checked.
    """
    groups = await runtime_groups(run, found, _RULE, use)
    if groups is None:
        return
    if not run.context.readers(use):
        found.add(
            _RULE,
            f"no container runs the engine, so its builder image {builder} cannot be compared",
            "mount the engine's image volume in the container that serves it, or name that container "
            "in the trtguard.dev/engines annotation",
        )
    # Judged once per image and engine digest, however many containers run it or volumes mount the engine.
    for group in groups:
        where = group.describe()
        image = group.image
        if image is None:
            found.add(
                _RULE,
                f"{where} can read the engine, but {group.unnamed} (the operator fills it in), so it cannot "
                f"be compared with the builder image {builder}",
                _name_the_image(group.containers[0].path),
                error=True,
            )
            continue
        image_ref = run.reference(image.reference)
        if isinstance(image_ref, InvalidReference):
            found.add(
                _RULE,
                f"{where} runs an invalid image reference, so it cannot be compared with the builder "
                f"image {builder}: {image_ref.message}",
                "fix the container's image reference",
            )
            continue
        try:
            digest = await run.digest(image_ref)
        except EvidenceUnavailable as error:
            # Not "could not be checked" alone: the message names the two images it meant to compare.
            found.add(
                _RULE,
                f"cannot compare the builder image {builder} with {where} {image_ref}: {error.message}",
                "pin the container's image by digest",
                error=True,
            )
            continue
        if digest != builder.digest:
            running = str(image_ref) if image_ref.digest else f"{image_ref} ({digest})"
            found.add(
                _RULE,
                f"engine was built with {builder} but {where} runs {running}",
                "run the engine only in the TensorRT image it was built with (every container that "
                "mounts it, or shares a writable volume with one that can read it), or rebuild it there",
            )


async def runtime_groups(
    run: Evaluation, found: Findings, rule: str, use: EngineUse
) -> list[SameImage] | None:
    """The image groups of ``use``'s readers that ``found``'s policy has not yet judged under ``rule`` for
    this engine; None when this very set of readers was judged already (nothing to say, not even that no
    container runs the engine)."""
    policy, engine = found.policy.name, found.engine
    if not run.first((policy, rule, engine, "readers", use.readers)):
        return None
    readers = run.context.readers(use)
    groups = await run.computed(
        ("readers by image", use.readers), functools.partial(by_image, readers), list(readers)
    )
    run.budget.step(len(groups))
    return [group for group in groups if run.first((policy, rule, engine, _image_of(group)))]


def _image_of(group: SameImage) -> object:
    """What identifies a group: its image (reference and field), or the containers that name none."""
    # Tagged, so that a group naming no image never equals the reader set of the same paths.
    if group.image is None:
        return ("unnamed", tuple(container.path for container in group.containers))
    return ("image", group.image.reference, group.image.field)


def _name_the_image(path: str) -> str:
    """The fix for a container whose image the operator fills in: where to name it."""
    if path.endswith(".model") or ".model." in path:
        return (
            f"name the runtime image in {path}.image (KServe runs the predictor's model container with it; "
            "without it, the ServingRuntime's image, which this resource does not show)"
        )
    return "name the container's image"
