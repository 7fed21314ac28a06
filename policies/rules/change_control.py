"""Change control (``spec.changeControl``): which kinds of change an engine brings, and whether the release
committee approved them.

An engine's changes are computed against every baseline that can be found — the previous manifest its own
build manifest declares, and the manifest of the engine it replaces in the workload's last admission
(:class:`~policies.rules.evaluation.AdmissionHistory`) — so that leaving ``previous_manifest_digest`` out
cannot hide a gated change. With no baseline at all the engine is a first build: only what is new by
definition (``FirstInt8``) counts. A gated change needs, per change kind, approvals from ``threshold``
distinct approvers for this engine digest and this audit ID, not expired.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from policies.podspec import EngineUse
from policies.results import AdmittedEngine
from policies.rules.evaluation import Evaluation
from policies.rules.findings import Findings, Refusal
from policies.schema import BuildManifestRule, ChangeControl
from policies.verified import VerifiedApproval, VerifiedManifest
from verifier.attestations import ChangeKind
from verifier.manifest import EngineBuildManifest
from verifier.manifest_diff import diff_manifests
from verifier.references import ImageReference, InvalidReference

__all__ = ["Baseline", "ChangeVerdict", "changes_against", "check", "describe", "judge"]

_RULE = "changeControl"


@dataclass(frozen=True, slots=True)
class Baseline:
    """A manifest the engine is compared with, and where it came from (for messages)."""

    manifest: EngineBuildManifest
    source: str


@dataclass(frozen=True, slots=True)
class ChangeVerdict:
    """The gated changes found and, for each, how many approvals are still missing."""

    changes: dict[ChangeKind, tuple[str, ...]]  # every kind found → the baselines it was found against
    gated: tuple[ChangeKind, ...]
    approved_by: dict[ChangeKind, tuple[str, ...]]
    missing: dict[ChangeKind, int]

    @property
    def satisfied(self) -> bool:
        """True when no gated change lacks approvals."""
        return not self.missing


async def check(
    run: Evaluation,
    found: Findings,
    rule: ChangeControl,
    manifest_rule: BuildManifestRule,
    ref: ImageReference,
    use: EngineUse,
    verified: VerifiedManifest,
) -> None:
    """The engine's gated changes against its baselines, each approved by enough of the committee."""
    baselines = await _baselines(run, found, manifest_rule, ref, use, verified)
    verdict = judge(rule, verified, baselines, (), run.clock())
    if verdict.gated:
        approvals = await found.check(_RULE, run.approvals(ref, rule.approvals.keys))
        if approvals is None:
            return
        verdict = judge(rule, verified, baselines, approvals, run.clock())
    if not verdict.satisfied:
        message, fix = describe(rule, verified, verdict)
        found.add(_RULE, message, fix)


async def _baselines(
    run: Evaluation,
    found: Findings,
    rule: BuildManifestRule,
    ref: ImageReference,
    use: EngineUse,
    verified: VerifiedManifest,
) -> list[Baseline]:
    """What the engine is compared with: its declared previous manifest and the last admitted engine."""
    manifest = verified.manifest
    declared = manifest.previous_manifest_digest
    baselines: list[Baseline] = []
    declared_found = False

    def add(candidates: Sequence[VerifiedManifest], source: str) -> None:
        nonlocal declared_found
        matching = [c for c in candidates if c.digest == declared]
        if matching:
            declared_found = True
            baselines.append(Baseline(matching[0].manifest, f"declared previous manifest {declared}"))
        else:
            newest = max(candidates, key=lambda c: c.manifest.build_timestamp)
            baselines.append(Baseline(newest.manifest, source))

    if manifest.previous_engine is not None:
        previous = run.reference(manifest.previous_engine)
        if isinstance(previous, ImageReference):
            candidates = await found.check(
                _RULE,
                run.build_manifests(previous, rule),
                refused=Refusal(
                    "attach the previous engine's signed build manifest to it",
                    about=f"the declared previous engine {previous} has no usable build manifest",
                    error=True,
                ),
            )
            if candidates is not None:
                add(candidates, f"previous engine {previous}")
    history, workload = run.history, run.context
    if history is not None and workload.name and workload.namespace:
        namespace, name = workload.namespace, workload.name

        async def last_admitted() -> None:
            admitted = await history.last_engines(namespace, workload.kind, name, run.deadline)
            for last in _predecessors(use, ref, admitted, run.reference):
                add(await run.build_manifests(last, rule), f"last admitted engine {last}")

        await found.check(
            _RULE,
            last_admitted(),
            refused=Refusal(
                "attach the previous engine's signed build manifest, or have the change reviewed",
                about="the engine last admitted here has no usable build manifest",
                error=True,
            ),
        )
    if declared is not None and not declared_found:
        found.add(
            _RULE,
            f"the declared previous manifest {declared} cannot be found, so the changes against it "
            "cannot be computed",
            "record where it is attached (`trtguard manifest create --previous-engine REF`)",
            error=True,
        )
    return baselines


def _predecessors(
    use: EngineUse,
    ref: ImageReference,
    admitted: Sequence[AdmittedEngine],
    parse: Callable[[str], ImageReference | InvalidReference],
) -> list[ImageReference]:
    """The engines of the workload's last admission that ``use`` replaces: its baselines from history.

    The same engine name (volume or annotation entry) first; else the engines that ran in one of the same
    containers; else every engine admitted last, so that renaming the engine, its repository and its volume
    at once still cannot leave a change without a baseline (changes against each are counted). None when
    the engine is among them unchanged.
    """
    candidates = [e for e in admitted if e.name == use.name] or [
        e for e in admitted if set(e.containers) & set(use.containers)
    ]
    found: list[ImageReference] = []
    for engine in candidates or admitted:
        parsed = parse(engine.reference)
        if parsed == ref:
            return []
        if isinstance(parsed, ImageReference) and parsed not in found:
            found.append(parsed)
    return found


def changes_against(
    manifest: EngineBuildManifest, baselines: Sequence[Baseline]
) -> dict[ChangeKind, tuple[str, ...]]:
    """Every change kind from each baseline to ``manifest``, with the baselines that show it."""
    if not baselines:
        return {ChangeKind.FIRST_INT8: ("no earlier engine",)} if manifest.uses_int8() else {}
    found: dict[ChangeKind, list[str]] = {}
    for baseline in baselines:
        for kind in diff_manifests(baseline.manifest, manifest).kinds:
            found.setdefault(kind, []).append(baseline.source)
    return {kind: tuple(sources) for kind, sources in found.items()}


def judge(
    rule: ChangeControl,
    verified: VerifiedManifest,
    baselines: Sequence[Baseline],
    approvals: Iterable[VerifiedApproval],
    now: datetime,
) -> ChangeVerdict:
    """The gated changes of ``verified`` and the approvals still missing for them."""
    manifest = verified.manifest
    changes = changes_against(manifest, baselines)
    gated = tuple(kind for kind in rule.gated if kind in changes)
    engine_digest = f"sha256:{manifest.output_engine.sha256}"
    approved_by: dict[ChangeKind, set[str]] = {kind: set() for kind in gated}
    for found in approvals:
        approval = found.approval
        if approval.engine_digest != engine_digest or approval.audit_id != manifest.audit_id:
            continue
        if approval.expires_at is not None and approval.expires_at <= now:
            continue
        for kind in gated:
            if kind in approval.changes:
                approved_by[kind].update(found.signers)
    threshold = rule.approvals.threshold
    missing = {kind: threshold - len(names) for kind, names in approved_by.items() if len(names) < threshold}
    return ChangeVerdict(
        changes=changes,
        gated=gated,
        approved_by={kind: tuple(sorted(names)) for kind, names in approved_by.items()},
        missing=missing,
    )


def describe(rule: ChangeControl, verified: VerifiedManifest, verdict: ChangeVerdict) -> tuple[str, str]:
    """The violation's message and fix: the change kinds found, the approvals there are and are missing."""
    manifest = verified.manifest
    sources = sorted({s for kind in verdict.gated for s in verdict.changes[kind]})
    parts = []
    for kind in verdict.gated:
        have = verdict.approved_by[kind]
        if kind in verdict.missing:
            parts.append(f"{kind} needs {verdict.missing[kind]} more (approved by [{', '.join(have)}])")
    message = (
        f"gated changes [{', '.join(verdict.gated)}] (against {'; '.join(sources)}) need "
        f"{rule.approvals.threshold} approvals each from [{', '.join(rule.approvals.keys)}] for engine "
        f"sha256:{manifest.output_engine.sha256}, audit ID {manifest.audit_id}: " + "; ".join(parts)
    )
    fix = (
        f"ask the release committee to run `trtguard approve sha256:{manifest.output_engine.sha256} "
        f"--audit-id {manifest.audit_id} --changes {','.join(verdict.missing)} "
        "--key <their key> --push <engine>`"
    )
    return message, fix
