"""Which image volumes a policy treats as TensorRT engines (``models.engines``), and what the others need.

Engine candidates are the image volumes a container mounts, the volumes an annotation entry names, model
storage URIs (KServe's ``oci://``) and annotation entries
(:class:`~policies.workload_model._podspec.EngineUse`). For a
policy:

- without ``models.engines``, every candidate is an engine (nothing unsigned passes as "just an image");
- with it, an annotation entry is an engine (it says so), and so is a volume or URI whose reference matches
  one of the patterns or whose artifact is an engine artifact (``application/vnd.trtguard.engine.v1``, as
  the evidence source reads it). The rest are plain image volumes, judged by the image rules alone; since
  a workload chooses how its artifacts are pushed, such a volume must be vouched for by an image rule of
  the same policy that checks its bytes (``signatures``, ``attestations`` or ``digests``), or it is a
  violation: otherwise an engine pushed as a plain image into a repository outside the patterns would
  escape the build-manifest rules. A look-up that cannot answer (a registry that fails, a tag offline) is a
  violation under ``onError``, never a plain image.

Only engines count for ``models.required``.

Two more things only a policy's ``models`` can say (:func:`outside_violations`):

- a container (not KServe's modelcar) that runs an image of a repository ``models.engines`` names runs an
  engine's files as a program: an engine is mounted (an image volume) or held by a modelcar, never run by
  another container, where no model rule would see it; a violation;
- an image volume found outside every pod spec (a kind searched as a whole, :attr:`Workload.unplaced`) may
  be an engine whose readers cannot be told: the model rules cannot judge it, which is a violation under
  ``onError`` naming its path, unless ``models.engines`` leaves it out and an image rule vouches for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from policies.evaluation import Evaluation
from policies.loader import CompiledPolicy
from policies.patterns import ImagePattern, matches_any
from policies.results import Violation
from policies.rules import unavailable, violation
from policies.workload_model import EngineUse, ImageField, Workload
from verifier.base import EvidenceUnavailable, ImageReference, VerificationError, quick_init

__all__ = ["EngineSort", "engine_sort", "outside_violations", "sort_engines"]

_RULE = "models.engines"


@quick_init
@dataclass(frozen=True, slots=True)
class EngineSort:
    """The candidates of one workload as one policy sees them."""

    engines: tuple[EngineUse, ...]
    """The candidates the policy judges as engines."""
    plain: tuple[EngineUse, ...] = ()
    """Image volumes (and URIs) that are not engines for this policy."""
    undecided: tuple[tuple[EngineUse, EvidenceUnavailable], ...] = ()
    """Candidates whose artifact type could not be read, with why."""

    def violations(
        self, policy: CompiledPolicy, judged: Sequence[EngineUse], run: Evaluation
    ) -> list[Violation]:
        """What the policy finds about the non-engines among ``judged``: undecided ones (``onError``), and
        plain image volumes that no image rule of the policy vouches for."""
        found = [
            unavailable(
                policy,
                _RULE,
                VerificationError(
                    f"whether it is a TensorRT engine artifact could not be read: {error.message}",
                    hint=error.hint or "retry when the registry is reachable, or list it in models.engines",
                ),
                image=use.reference,
                path=use.path,
            )
            for use, error in self.undecided
            if use in judged
        ]
        for use in self.plain:
            if use in judged and not _vouched(policy, run, use):
                found.append(
                    violation(
                        policy,
                        _RULE,
                        "this image volume is not an engine by models.engines, and no image rule of the "
                        "policy checks its contents (signatures, attestations or digests), so it could be "
                        "an unsigned engine",
                        "add its repository to models.engines if it holds an engine; otherwise give it an "
                        "image rule with signatures, attestations or digests",
                        image=use.reference,
                        path=use.path,
                    )
                )
        return found


def engine_sort(policy: CompiledPolicy, candidates: Sequence[EngineUse]) -> EngineSort | None:
    """The sort of ``candidates`` when it needs no look-up (``models.engines`` unset: all are engines), or
    None when :func:`sort_engines` must look at the artifacts."""
    return EngineSort(tuple(candidates)) if policy.engine_patterns is None else None


async def sort_engines(
    run: Evaluation, policy: CompiledPolicy, candidates: Sequence[EngineUse]
) -> EngineSort:
    """Sort ``candidates`` into the policy's engines and the rest (see the module's docstring)."""
    patterns = policy.engine_patterns
    if patterns is None:
        return EngineSort(tuple(candidates))
    verdicts = await asyncio.gather(*(_is_engine(run, patterns, use) for use in candidates))
    return EngineSort(
        engines=tuple(use for use, verdict in zip(candidates, verdicts, strict=True) if verdict is True),
        plain=tuple(use for use, verdict in zip(candidates, verdicts, strict=True) if verdict is False),
        undecided=tuple(
            (use, verdict)
            for use, verdict in zip(candidates, verdicts, strict=True)
            if isinstance(verdict, EvidenceUnavailable)
        ),
    )


async def _is_engine(
    run: Evaluation, patterns: tuple[ImagePattern, ...], use: EngineUse
) -> bool | EvidenceUnavailable:
    if use.declared:
        return True
    ref = run.reference(use.reference)
    if not isinstance(ref, ImageReference) or matches_any(patterns, ref):
        return True  # an unreadable reference is judged by the engine rules too, which report it
    evidence, deadline = run.evidence, run.deadline
    try:
        subjects = await run.once(("subjects", ref), lambda: evidence.subjects(ref, deadline))
    except EvidenceUnavailable as error:
        return error
    except VerificationError:
        return True  # a malformed engine artifact: the engine rules report it
    return subjects.engine_file is not None


def _vouched(policy: CompiledPolicy, run: Evaluation, use: EngineUse) -> bool:
    ref = run.reference(use.reference)
    if not isinstance(ref, ImageReference):
        return True  # the image rules report an unreadable reference themselves
    field: ImageField = next((i.field for i in run.context.images if i.path == use.path), "volume")
    return any(
        rule.applies_to(ref, field)
        and (rule.rule.signatures is not None or rule.rule.attestations or rule.rule.digests is not None)
        for rule in policy.image_rules
    )


def outside_violations(policy: CompiledPolicy, judged: Workload, run: Evaluation) -> list[Violation]:
    """What ``policy``'s ``models`` finds about engines outside the places engines are read from: a
    container that runs an image of an engine repository, and image volumes outside every pod spec (see
    the module's docstring)."""
    patterns = policy.engine_patterns
    found: list[Violation] = []
    if patterns:
        new = set(judged.images)
        for container in (c for t in judged.templates for c in t.containers):
            image = container.image
            if image is None or image.field == "modelcar" or image not in new:
                continue
            ref = run.reference(image.reference)
            if isinstance(ref, ImageReference) and matches_any(patterns, ref):
                found.append(
                    violation(
                        policy,
                        _RULE,
                        f"{container.describe()} runs an image of an engine repository (models.engines) as "
                        "a program, where no model rule judges it; an engine is mounted as an image volume "
                        "or held by KServe's modelcar container (named modelcar)",
                        "mount the engine as an image volume of the container that serves it, or give it "
                        "to KServe as storageUri: oci://…",
                        image=image.reference,
                        path=image.path,
                    )
                )
    for use in judged.unplaced:
        ref = run.reference(use.reference)
        left_out = patterns is not None and isinstance(ref, ImageReference) and not matches_any(patterns, ref)
        if left_out and _vouched(policy, run, use):
            continue
        found.append(
            unavailable(
                policy,
                "models",
                VerificationError(
                    f"the image volume at {use.path} is outside every pod spec trtguard can read, so it "
                    "may be a TensorRT engine whose readers cannot be told, and the model rules could not "
                    "judge it",
                    hint="describe the kind with a WorkloadKind document naming its pod templates; an "
                    "image volume that holds no engine: leave its repository out of models.engines and "
                    "vouch for it with an image rule (signatures, attestations or digests)",
                ),
                engine=use.reference,
                path=use.path,
            )
        )
    return found
