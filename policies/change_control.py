"""Change control: which kinds of change an engine brings, and whether the release committee approved them.

An engine's changes are computed against every baseline that can be found — the previous manifest its own
build manifest declares, and the manifest of the last engine admitted for the same workload — so that
leaving ``previous_manifest_digest`` out cannot hide a gated change. With no baseline at all the engine is a
first build: only what is new by definition (``FirstInt8``) counts. A gated change needs, per change kind,
approvals from ``threshold`` distinct approvers for this engine digest and this audit ID, not expired.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from policies.schema import ChangeControl
from policies.verified import VerifiedApproval, VerifiedManifest
from verifier.attestations import ChangeKind
from verifier.manifest import EngineBuildManifest
from verifier.manifest_diff import diff_manifests


@dataclass(frozen=True, slots=True)
class Baseline:
    """A manifest the engine is compared with, and where it came from (for messages)."""

    manifest: EngineBuildManifest
    source: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The gated changes found and, for each, how many approvals are still missing."""

    changes: dict[ChangeKind, tuple[str, ...]]  # every kind found → the baselines it was found against
    gated: tuple[ChangeKind, ...]
    approved_by: dict[ChangeKind, tuple[str, ...]]
    missing: dict[ChangeKind, int]

    @property
    def satisfied(self) -> bool:
        """True when no gated change lacks approvals."""
        return not self.missing


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
) -> Verdict:
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
    return Verdict(
        changes=changes,
        gated=gated,
        approved_by={kind: tuple(sorted(names)) for kind, names in approved_by.items()},
        missing=missing,
    )


def describe(rule: ChangeControl, verified: VerifiedManifest, verdict: Verdict) -> tuple[str, str]:
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
