"""Change control (``spec.changeControl``): which kinds of change an engine brings, and whether the release
committee approved them.

One module on purpose: what an engine is compared with (its declared predecessor, the policy's own history,
what ran last), which of those are *confirmed*, and what confirms an engine for the next admission are one
notion, read the same way by the verdict, its wording and the decision record.

An engine's changes are computed against every baseline that can be found, so that leaving
``previous_manifest_digest`` out cannot hide a gated change: the previous manifest its own build manifest
declares, and, of each ONNX model, the last build this policy confirmed in the workload
(:class:`~policies.evaluation._state.AdmissionHistory`; the workload is its API group, kind, namespace and
name), so that a model left out of some admissions keeps its baseline. Of those, the one built from the same
ONNX model counts, else all of them: never a choice by names, containers or templates, which the workload's
author controls (:func:`_predecessors`). With no baseline at all the engine is a first build: only what is new
by definition (``FirstInt8``, and ``FirstEngine`` where gated) counts. A gated change needs, per change kind,
approvals from ``threshold`` distinct approvers for this engine digest and this audit ID, not expired.

The history is the policy's own (:func:`confirm_unchanged`): an engine it confirms is recorded as confirmed by
it, and its baseline is, of each model, the last admission in which it confirmed a build of it — not the
workload's last admission of any kind, whose other engines are compared with too but confirm nothing. An
engine admitted while the policy did not apply (its selector left the workload out for one UPDATE), or let in
despite its change control (a Warn or Audit action), is no baseline for it, so that moving a workload out of a
policy's scope and back cannot launder an unapproved engine.

A declared predecessor is whatever the engine's builder wrote down, so it stands in for an earlier engine only
when it is *confirmed*: it is an engine this policy confirmed in its last admission of the workload (the
history says it ran here under this policy), or its own approvals (by this rule's committee, for its digest
and audit ID, unexpired) cover every gated change it brings as a first engine. So does an engine of the
workload's last admission that this policy did not confirm: it is compared with too, as what ran here, but
stands in for an earlier engine only when so approved. An engine with no confirmed baseline (and not itself
confirmed here last by this policy) is judged as a first engine as well: an unconfirmed baseline still counts
for the changes it shows, but its INT8 cannot hide this engine's ``FirstInt8`` (policies/README.md, "Change
control").
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from policies.evaluation import EngineSubject, Evaluation, WorkloadSubject
from policies.identity import WorkloadIdentity
from policies.results import (
    AdmittedEngine,
    AdmittingDecision,
    ApprovalRecord,
    BaselineKind,
    BaselineRecord,
    ChangeControlRecord,
)
from policies.rules._findings import EngineFamily, Findings, Refusal, WorkloadFamily
from policies.schema import BuildManifestRule, ChangeControl
from policies.verified import Documents, VerifiedApproval, VerifiedManifest
from policies.workload_model import EngineUse
from verifier.attestations import ChangeApproval, ChangeKind
from verifier.base import EvidenceUnavailable, ImageReference, InvalidReference, VerificationError
from verifier.manifest import EngineBuildManifest
from verifier.manifest_diff import diff_manifests

__all__ = [
    "CHANGE_CONTROL",
    "CHANGE_CONTROL_KEPT",
    "Baseline",
    "ChangeVerdict",
    "change_indexes",
    "describe",
    "judge",
]

_RULE = "changeControl"


@dataclass(frozen=True, slots=True)
class Baseline:
    """A manifest the engine is compared with, and where it came from (``source`` words it for messages).

    ``digest`` names the signed manifest, ``kind`` how it was chosen; ``engine`` and ``admitted_by`` say
    which engine it belongs to and, for the last admitted engine, the decision that admitted it.
    """

    manifest: EngineBuildManifest
    source: str
    digest: str = ""
    kind: BaselineKind = "last-admitted-engine"
    engine: str | None = None
    admitted_by: AdmittingDecision | None = None
    #: It may stand in for an earlier engine: admitted here last, or approved for what it brings as a first
    #: engine (module docstring). One that is not counts only for the changes it shows.
    confirmed: bool = True

    def record(self) -> BaselineRecord:
        """The baseline as the decision log records it."""
        return BaselineRecord(self.kind, self.digest, self.engine, self.admitted_by)


@dataclass(frozen=True, slots=True)
class ChangeVerdict:
    """The gated changes found and, for each, how many approvals are still missing."""

    changes: dict[ChangeKind, tuple[str, ...]]  # every kind found → the baselines it was found against
    gated: tuple[ChangeKind, ...]
    approved_by: dict[ChangeKind, tuple[str, ...]]
    missing: dict[ChangeKind, int]
    #: The approvals that counted: for this engine and audit ID, unexpired, covering a gated kind.
    counted: tuple[VerifiedApproval, ...] = ()
    #: Every kind found → the indexes of the baselines it was found against.
    against: dict[ChangeKind, tuple[int, ...]] = field(default_factory=dict)
    #: Why the engine was judged as a first engine though it has baselines: the unconfirmed ones, worded.
    unconfirmed: tuple[str, ...] = ()
    #: Approvals that verified but count for no missing kind, each with why (another audit ID, expired, …).
    not_counted: tuple[str, ...] = ()

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
    """The engine's gated changes against its baselines, each approved by enough of the committee.

    What was found (baselines, change kinds, the approvals that counted) is noted for the decision record.
    Approvals that do not suffice are looked up again rather than taken from the cache, so that an approval
    pushed since the last admission counts at once.
    """
    baselines, vouched, known = await _baselines(run, found, rule, manifest_rule, ref, verified)
    first = not vouched and not any(baseline.confirmed for baseline in baselines)
    onnx = verified.manifest.onnx.sha256
    # A build of a model this policy has no confirmed build of here is a first engine of it (``FirstEngine``).
    new_model = not known and not any(b.confirmed and b.manifest.onnx.sha256 == onnx for b in baselines)
    if first and baselines:
        for baseline in baselines:
            run.note(f"engine {ref}: {_unconfirmed(baseline, history=run.history is not None)}")
    verdict = judge(rule, verified, baselines, (), run.clock(), first=first, new_model=new_model)
    looked_up = True
    for fresh in (False, True) if verdict.gated else ():
        approvals = await found.check(_RULE, run.approvals(ref, rule.approvals.keys, fresh=fresh))
        if approvals is None:  # could not be looked up: a violation under onError was recorded
            looked_up = False
            break
        verdict = judge(rule, verified, baselines, approvals, run.clock(), first=first, new_model=new_model)
        if verdict.satisfied:
            break
    counted = run.counted(use.reference)
    counted.changes(_record(run, found.policy.name, baselines, verdict))
    # What the next admission keeps this engine's model by for this policy, and its baseline: this policy's
    # own manifest, never another policy's (whose signers may name another model).
    counted.judged_as.setdefault(found.policy.name, (verified.manifest.onnx.sha256, verified.digest))
    if looked_up and not verdict.satisfied:
        message, fix = describe(rule, verified, verdict, ref)
        ignored = await _ignored(run, rule, ref)
        if ignored or verdict.not_counted:
            message += "; approvals found that do not count: " + "; ".join((*ignored, *verdict.not_counted))
        found.add(_RULE, message, fix)
    elif looked_up and not any(v.rule == _RULE for v in found.violations):
        # Only a verdict with nothing missing and nothing unchecked confirms: an engine let in by a Warn or
        # Audit action (or onError) despite its change control is no baseline for this policy.
        counted.confirmed_by[found.policy.name] = None


async def _ignored(run: Evaluation, rule: ChangeControl, ref: ImageReference) -> tuple[str, ...]:
    """The approvals about the engine that verification set aside, worded; none when they cannot be read
    (the denial stands either way: this only explains it)."""
    try:
        return await run.ignored_approvals(ref, rule.approvals.keys)
    except (EvidenceUnavailable, VerificationError):
        return ()


def _record(
    run: Evaluation, policy: str, baselines: Sequence[Baseline], verdict: ChangeVerdict
) -> ChangeControlRecord:
    """One policy's change control as the decision log records it."""
    return ChangeControlRecord(
        policy=policy,
        baselines=tuple(baseline.record() for baseline in baselines),
        changes=tuple((str(kind), against) for kind, against in sorted(verdict.against.items())),
        gated=tuple(str(kind) for kind in verdict.gated),
        approvals=tuple(
            ApprovalRecord(
                approver=found.approval.approver,
                signers=run.verified.signer_records(found.signers),
                digest=found.digest,
                changes=tuple(str(kind) for kind in found.approval.changes),
            )
            for found in verdict.counted
        ),
    )


async def _baselines(
    run: Evaluation,
    found: Findings,
    control: ChangeControl,
    rule: BuildManifestRule,
    ref: ImageReference,
    verified: VerifiedManifest,
) -> tuple[list[Baseline], bool, bool]:
    """What the engine is compared with: its declared previous manifest, the engines this policy confirmed
    in its last admission of the workload, and those of the workload's last admission it did not confirm.

    Also whether the policy's history vouches for the engine's place: it confirmed engines here before (the
    baselines from them, or this very engine: then no baseline need be confirmed); and whether it is this
    very engine (the last build of its model the policy confirmed here: no change).
    """
    manifest = verified.manifest
    declared = manifest.previous_manifest_digest
    baselines: list[Baseline] = []
    declared_found = False
    vouched = False
    known = False  # the engine itself is one this policy confirmed here: no change

    def choose(
        documents: Documents[VerifiedManifest], admitted: AdmittedEngine | None = None
    ) -> list[VerifiedManifest]:
        """The manifests of an engine it is compared by. For an engine that ran here: the one it was
        admitted with (as recorded), else (recorded before manifests were, or not among those this rule
        reads) every one of the newest by build time, and the declared previous manifest too if it is one
        of its: a manifest signed later for the same file never replaces what was judged. For a declared
        previous engine: the declared previous manifest, else every one of the newest. Ties are never
        decided by the order the manifests were found in: each is a baseline, and a change against any
        counts."""
        candidates = documents.readable
        if not candidates:  # only unreadable ones: which build it was cannot be told
            raise VerificationError(f"its build manifest cannot be read ({'; '.join(documents.unreadable)})")
        matching = [c for c in candidates if c.digest == declared]
        if admitted is None:
            return matching[:1] or _newest(candidates)
        kept = [c for c in candidates if c.digest == admitted.manifest][:1] or _newest(candidates)
        return kept + [c for c in matching[:1] if c not in kept]

    def add(
        chosen: VerifiedManifest,
        source: str,
        kind: BaselineKind,
        engine: ImageReference,
        admitted_by: AdmittingDecision | None = None,
        *,
        confirmed: bool = True,
    ) -> None:
        nonlocal declared_found
        if chosen.digest == declared:
            declared_found = True
            if kind == "last-admitted-engine":  # what it is: the engine that ran here, which it also names
                source += " (the declared previous manifest)"
            else:
                source, kind = f"declared previous manifest {declared}", "declared-previous-manifest"
        baselines.append(
            Baseline(chosen.manifest, source, chosen.digest, kind, str(engine), admitted_by, confirmed)
        )

    previous: ImageReference | InvalidReference | None = None
    declared_baselines: list[tuple[int, ImageReference, VerifiedManifest]] = []
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
                for chosen in choose(candidates):
                    add(chosen, f"previous engine {previous}", "previous-engine", previous)
                    declared_baselines.append((len(baselines) - 1, previous, chosen))
    admitted_digests: set[str] = set()
    workload = run.context
    if run.history is not None and workload.name and workload.namespace:

        async def last_admitted() -> None:
            nonlocal vouched
            mine, others = await _admitted_here(run, found.policy.name)
            admitted_digests.update(last.digest for last in mine if last.digest is not None)
            vouched = bool(mine)
            if ref.digest in admitted_digests:
                nonlocal known
                known = True
                return  # an engine this policy let run here last is no change
            # What ran here last, whatever let it in, is compared with too (it can only show more changes);
            # an engine this policy did not confirm stands in for no earlier engine unless approved as one
            # (as a declared predecessor).
            for engines, own in ((mine, True), (others, False)):
                chosen = [
                    (last, engine, manifest_of)
                    for last, engine in engines.items()
                    for manifest_of in choose(await run.build_manifests(last, rule), engine)
                ]
                for last, engine, manifest_of in _predecessors(manifest, _newest_per_model(chosen)):
                    add(
                        manifest_of,
                        f"last admitted engine {last}" + ("" if own else " (not confirmed by this policy)"),
                        "last-admitted-engine",
                        last,
                        engine.admitted_by,
                        confirmed=own or await _approved_as_first(run, control, last, manifest_of),
                    )

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
    for index, engine, chosen in declared_baselines:
        confirmed = engine.digest in admitted_digests or await _approved_as_first(
            run, control, engine, chosen
        )
        baselines[index] = replace(baselines[index], confirmed=confirmed)
    return baselines, vouched, known


async def _approved_as_first(
    run: Evaluation, rule: ChangeControl, engine: ImageReference, verified: VerifiedManifest
) -> bool:
    """Whether the declared previous ``engine``'s own approvals cover every gated change it brings as a
    first engine (an engine that brings none needs none: it cannot hide a change of its successor).

    Approvals that cannot be looked up or are refused confirm nothing: the engine is then judged as a first
    engine as well, the stricter verdict, so no failure to check becomes an allow.
    """
    if not judge(rule, verified, (), (), run.clock()).gated:
        return True  # nothing to hide, so nothing to look up
    for fresh in (False, True):
        try:
            approvals = await run.approvals(engine, rule.approvals.keys, fresh=fresh)
        except (EvidenceUnavailable, VerificationError):
            return False
        if judge(rule, verified, (), approvals, run.clock()).satisfied:
            return True
    return False


def _unconfirmed(baseline: Baseline, *, history: bool) -> str:
    """Why ``baseline`` does not stand in for an earlier engine, for people."""
    if baseline.kind == "last-admitted-engine":
        return (
            f"the last admitted engine {baseline.engine} ran here, but this policy did not confirm it (it "
            "came in while the policy did not apply, or despite its change control), and it carries no "
            "approvals for its own first-engine changes: it counts for the changes it shows, and the engine "
            "was judged as a first engine as well"
        )
    where = (
        "is not an engine this policy confirmed in its last admission of this workload"
        if history
        else "cannot be confirmed as admitted here without the decision log's history"
    )
    what = (
        f"the {baseline.source}"
        if baseline.kind == "declared-previous-manifest"
        else f"the newest manifest of the {baseline.source}"
    )
    return (
        f"{what} is not confirmed: it {where}, and it carries no approvals for its own first-engine "
        "changes; the engine was judged as a first engine as well"
    )


async def _admitted_here(
    run: Evaluation, policy: str
) -> tuple[dict[ImageReference, AdmittedEngine], dict[ImageReference, AdmittedEngine]]:
    """The engines ``policy`` confirmed in its last admission of the workload, and those of the workload's
    last admission (of any kind) that are none of them: what ran, not confirmed by this policy.

    Raises what the history raises (:class:`EvidenceUnavailable`): the caller's ``onError`` decides.
    """
    mine = _admitted_engines(await _admitted(run, policy) or (), run.reference)
    confirmed = {last.digest for last in mine}
    ran = _admitted_engines(await _admitted(run, None) or (), run.reference)
    return mine, {last: engine for last, engine in ran.items() if last.digest not in confirmed}


async def confirm_unchanged(run: Evaluation, policy: str, uses: Iterable[EngineUse]) -> None:
    """Confirm, for ``policy``, the engines an UPDATE left as they were (the policy did not judge them
    again) that it confirmed in its own last admission of the workload: it still vouches for them.

    One it never confirmed here (admitted while the policy did not apply, or despite its change control)
    stays unconfirmed, and so never becomes its baseline. Nothing is confirmed when the history cannot be
    read: this admission is then no baseline for the policy, which keeps the last one it has.
    """
    pinned: list[tuple[EngineUse, str]] = []
    for use in uses:
        ref = run.reference(use.reference)
        if isinstance(ref, ImageReference) and ref.digest is not None:
            pinned.append((use, ref.digest))
    if not pinned:
        return
    try:
        admitted = await _admitted(run, policy)
    except (EvidenceUnavailable, VerificationError):
        return
    confirmed = {
        last.digest: engine for last, engine in _admitted_engines(admitted or (), run.reference).items()
    }
    for use, digest in pinned:
        if digest in confirmed:
            counted = run.counted(use.reference)
            counted.confirmed_by[policy] = None
            # Still a build of the model it was for this policy, judged by the manifest it was (the policy's
            # own history says which: never what another policy judged it by in this evaluation).
            counted.judged_as.setdefault(policy, (confirmed[digest].model, confirmed[digest].manifest))


def _admitted_engines(
    admitted: Sequence[AdmittedEngine], parse: Callable[[str], ImageReference | InvalidReference]
) -> dict[ImageReference, AdmittedEngine]:
    """The engines of an admission, each reference once (unreadable ones left out)."""
    found: dict[ImageReference, AdmittedEngine] = {}
    for engine in admitted:
        parsed = parse(engine.reference)
        if isinstance(parsed, ImageReference):
            found.setdefault(parsed, engine)
    return found


def _newest_per_model(
    admitted: Sequence[tuple[ImageReference, AdmittedEngine, VerifiedManifest]],
) -> list[tuple[ImageReference, AdmittedEngine, VerifiedManifest]]:
    """Of each ONNX model (as the signed manifests say), the builds of the newest admission of ``admitted``
    that ran it (the history gives them newest first): an engine recorded before models were is a model of
    its own there, so builds of one model from older admissions may come back, and only the newest
    admission's are that model's last builds; every one of those is compared with."""
    seen: dict[str, object] = {}
    kept = []
    for found in admitted:  # every manifest an engine is compared by stays with it
        admission = found[1].admitted_by or found[0]
        if seen.setdefault(found[2].manifest.onnx.sha256, admission) == admission:
            kept.append(found)
    return kept


def _newest(candidates: Sequence[VerifiedManifest]) -> list[VerifiedManifest]:
    """Every one of the manifests built last (by ``build_timestamp``), by digest: a tie is judged against
    each rather than decided by the order they were found in."""
    newest = max(c.manifest.build_timestamp for c in candidates)
    return sorted((c for c in candidates if c.manifest.build_timestamp == newest), key=lambda c: c.digest)


def _predecessors(
    manifest: EngineBuildManifest,
    admitted: Sequence[tuple[ImageReference, AdmittedEngine, VerifiedManifest]],
) -> list[tuple[ImageReference, AdmittedEngine, VerifiedManifest]]:
    """The engines of an admission that an engine built by ``manifest`` is compared with: those built from
    the same ONNX model, else every one (changes against each count).

    Nothing the workload's author writes narrows them — not the engine's, volume's or container's name, not
    the template or role it runs in (they can be renamed, moved or repeated to steer the comparison to the
    weakest engine), not its repository. Only the signed build manifests do: an engine built from the same
    ONNX model as one that ran here is a new build of that model; any other is compared with all of them.
    """
    same_model = [found for found in admitted if found[2].manifest.onnx.sha256 == manifest.onnx.sha256]
    return same_model or list(admitted)


async def _admitted(run: Evaluation, policy: str | None) -> Sequence[AdmittedEngine] | None:
    """The engines ``policy`` confirmed in its last admission of the workload (for None: those of its last
    admission, whoever confirmed them), asked once per evaluation and policy; None without a history, or for
    a workload without a namespace and name (it has none)."""
    history, workload = run.history, run.context
    if history is None or not workload.name or not workload.namespace:
        return None
    identity = WorkloadIdentity.of(workload.group, workload.kind, workload.namespace, workload.name)
    return await run.once(
        ("history", identity, policy), lambda: history.last_engines(identity, run.deadline, policy)
    )


def change_indexes(
    manifest: EngineBuildManifest,
    baselines: Sequence[Baseline],
    *,
    first: bool | None = None,
    new_model: bool | None = None,
) -> dict[ChangeKind, tuple[int, ...]]:
    """Every change kind from each baseline to ``manifest``, with the indexes of the baselines that show it
    (none for ``FirstInt8`` and ``FirstEngine`` found against no earlier engine).

    ``first``: the engine is judged as a first engine as well (by default, when there is no baseline).
    ``new_model``: no confirmed build of its ONNX model is among them (by default, when there is no
    baseline): a ``FirstEngine``.
    """
    found: dict[ChangeKind, list[int]] = {}
    if not baselines if new_model is None else new_model:
        found[ChangeKind.FIRST_ENGINE] = []
    if (not baselines if first is None else first) and manifest.uses_int8():
        found[ChangeKind.FIRST_INT8] = []
    for index, baseline in enumerate(baselines):
        for kind in diff_manifests(baseline.manifest, manifest).kinds:
            found.setdefault(kind, []).append(index)
    return {kind: tuple(indexes) for kind, indexes in found.items()}


def _sources(
    indexes: dict[ChangeKind, tuple[int, ...]], baselines: Sequence[Baseline]
) -> dict[ChangeKind, tuple[str, ...]]:
    return {
        kind: tuple(baselines[i].source for i in found) or ("no earlier engine",)
        for kind, found in indexes.items()
    }


def judge(
    rule: ChangeControl,
    verified: VerifiedManifest,
    baselines: Sequence[Baseline],
    approvals: Iterable[VerifiedApproval],
    now: datetime,
    *,
    first: bool | None = None,
    new_model: bool | None = None,
) -> ChangeVerdict:
    """The gated changes of ``verified`` and the approvals still missing for them (``first``: judged as a
    first engine as well, see :func:`change_indexes`)."""
    manifest = verified.manifest
    against = change_indexes(manifest, baselines, first=first, new_model=new_model)
    changes = _sources(against, baselines)
    gated = tuple(kind for kind in rule.gated if kind in changes)
    engine_digest = f"sha256:{manifest.output_engine.sha256}"
    approved_by: dict[ChangeKind, set[str]] = {kind: set() for kind in gated}
    counted: dict[str, VerifiedApproval] = {}
    not_counted: list[str] = []
    for found in approvals:
        approval = found.approval
        why = _why_not(approval, engine_digest, manifest.audit_id, gated, now)
        if why is not None:
            not_counted.append(f"{approval.approver}'s approval ({', '.join(found.signers)}) {why}")
            continue
        for kind in gated:
            if kind in approval.changes:
                approved_by[kind].update(found.signers)
                counted.setdefault(found.digest, found)
    threshold = rule.approvals.threshold
    missing = {kind: threshold - len(names) for kind, names in approved_by.items() if len(names) < threshold}
    return ChangeVerdict(
        changes=changes,
        against=against,
        gated=gated,
        approved_by={kind: tuple(sorted(names)) for kind, names in approved_by.items()},
        missing=missing,
        counted=tuple(counted.values()),
        unconfirmed=tuple(b.source for b in baselines if not b.confirmed) if first and baselines else (),
        not_counted=tuple(not_counted),
    )


def _why_not(
    approval: ChangeApproval, engine_digest: str, audit_id: str, gated: Sequence[ChangeKind], now: datetime
) -> str | None:
    """Why a verified approval counts for none of the ``gated`` kinds of this engine, or None if it counts."""
    if approval.engine_digest != engine_digest:
        return f"names engine {approval.engine_digest}, not the engine file {engine_digest}"
    if approval.audit_id != audit_id:
        return f"names audit ID {approval.audit_id}, not {audit_id}"
    if approval.expires_at is not None and approval.expires_at <= now:
        return f"expired at {approval.expires_at.isoformat()}"
    if not any(kind in approval.changes for kind in gated):
        return f"covers [{', '.join(approval.changes)}], none of [{', '.join(gated)}]"
    return None


def describe(
    rule: ChangeControl, verified: VerifiedManifest, verdict: ChangeVerdict, ref: ImageReference
) -> tuple[str, str]:
    """The violation's message and fix: the change kinds found, the approvals there are and are missing.

    The fix is a ``trtguard approve`` command that works as printed once the approver puts in who they
    are and their key (the two ``<…>`` words); every other argument is quoted for a POSIX shell.
    """
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
    if verdict.unconfirmed and ChangeKind.FIRST_INT8 in verdict.gated:
        message += (
            f" ({'; '.join(verdict.unconfirmed)} is not confirmed: neither an engine this policy confirmed "
            "in its last admission of this workload nor approved for its own first-engine changes, so it "
            "stands in for no earlier engine)"
        )
    command = " ".join(
        [
            "trtguard approve",
            f"sha256:{manifest.output_engine.sha256}",
            "--audit-id",
            shlex.quote(manifest.audit_id),
            "--changes",
            ",".join(verdict.missing),
            "--approver <your e-mail> --key <your key file>",
            "--push",
            shlex.quote(str(ref)),
        ]
    )
    fix = f"ask the release committee ({', '.join(rule.approvals.keys)}) to run `{command}`"
    return message, fix


async def _check_engine(run: Evaluation, found: Findings, engine: EngineSubject) -> EngineSubject:
    """:func:`check` of the engine against its verified build manifest."""
    rule = found.policy.spec.change_control
    if rule is not None and engine.build is not None:
        await check(run, found, rule, engine.build.rule, engine.ref, engine.use, engine.build.manifest)
    return engine


async def _confirm(run: Evaluation, found: Findings, workload: WorkloadSubject) -> None:
    """:func:`confirm_unchanged` of the engines an UPDATE left as they were."""
    await confirm_unchanged(run, found.policy.name, workload.unchanged)


#: ``spec.changeControl`` over each engine judged, an engine rule over the build manifest.
CHANGE_CONTROL = EngineFamily(
    name=_RULE,
    applies=lambda policy: (
        policy.spec.change_control is not None
        and (models := policy.spec.models) is not None
        and models.build_manifest is not None
    ),
    check=_check_engine,
)
#: ``spec.changeControl`` over the engines no engine rule judged (an UPDATE kept them), once those are judged.
CHANGE_CONTROL_KEPT = WorkloadFamily(
    name=f"{_RULE}.unchanged",
    applies=lambda policy: policy.spec.change_control is not None and policy.spec.models is not None,
    check=_confirm,
)
