"""Change control: gated changes against the declared previous manifest and the last admitted engine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.evaluator import PolicyEvaluator
from policies.identity import WorkloadIdentity
from policies.loader import load_policy_set
from policies.results import AdmittedEngine, AdmittingDecision, Decision
from policies.rules._change_control import _newest_per_model
from tests.policies.conftest import Material, pod
from trtguard.cli import main
from verifier.base import sha256_bytes
from verifier.base._deadline import Deadline
from verifier.base._references import ImageReference
from verifier.crypto._keys import encrypt_private_key
from verifier.evidence import ArtifactAttestations, ArtifactSubjects, ImageSignatures
from verifier.evidence_folder import LocalEvidence

NOW = datetime(2026, 11, 1, tzinfo=UTC)
COMMITTEE = ("alice", "bob", "chen")
POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: change-control}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8, TensorRTMajorUpgrade, DynamicShapeChange]
    approvals: {keys: [committee/alice, committee/bob, committee/chen], threshold: 2}
"""
INT8 = {"typing": "weak", "precision_flags": ["fp16", "int8"], "max_workspace_size": 1 << 30}
CALIBRATION = {"dataset": {"sha256": "f6" * 32}, "cache": {"sha256": "07" * 32}}
TRT8 = {
    "image": "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32,
    "tensorrt_version": "8.6.1.6",
    "cuda_version": "12.0.1",
}


History = dict[tuple[str, str, str] | WorkloadIdentity, tuple[AdmittedEngine, ...]]


class RecordedHistory:
    """What a decision log would answer: the engines of each workload's last admission, and those each
    policy confirmed in its last admission there (``confirmed``, by policy; without it, every policy
    confirmed the last admission's, as records written before confirmations were recorded read)."""

    def __init__(self, last: History, confirmed: dict[str, History] | None = None) -> None:
        self.last = self._keyed(last)
        self.confirmed = None if confirmed is None else {p: self._keyed(h) for p, h in confirmed.items()}

    @staticmethod
    def _keyed(history: History) -> dict[WorkloadIdentity, tuple[AdmittedEngine, ...]]:
        # Keyed (namespace, kind, name) of core-group kinds, or by the whole identity.
        return {
            key if isinstance(key, WorkloadIdentity) else WorkloadIdentity("", key[1], key[0], key[2]): value
            for key, value in history.items()
        }

    async def last_engines(
        self, workload: WorkloadIdentity, deadline: Deadline, policy: str | None
    ) -> tuple[AdmittedEngine, ...]:
        if policy is None or self.confirmed is None:
            return self.last.get(workload, ())
        return self.confirmed.get(policy, {}).get(workload, ())


def admitted(
    reference: str, name: str | None = "engine", containers: tuple[str, ...] = ("c0",)
) -> tuple[AdmittedEngine, ...]:
    """The last admission of the test pod: ``reference`` as its image volume ``name`` mounted by ``c0``."""
    return (AdmittedEngine(reference, name, containers),)


def int8_chain(material: Material) -> tuple[str, str]:
    """Two INT8 engines: b (audit ID AUD-B), and c (AUD-C), which declares b as its predecessor."""
    b = material.engine("b", builder_config=INT8, calibration=CALIBRATION, audit_id="AUD-B")
    c = material.engine(
        "c",
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=b,
        previous_manifest_digest=material.manifest_digests["b"],
        audit_id="AUD-C",
    )
    return b, c


def engine_for(
    material: Material, history: RecordedHistory | None = None, policy: str = POLICY
) -> PolicyEvaluator:
    paths = [
        material.policy(policy),
        material.keys_file("build-signer"),
        material.keys_file(*COMMITTEE, set_name="committee"),
    ]
    return PolicyEvaluator(
        load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW, history=history
    )


def evaluate(engine: PolicyEvaluator, obj: dict[str, Any]) -> Decision:
    return asyncio.run(engine.evaluate(obj))


def change_violation(decision: Decision) -> str:
    [violation] = [v for v in decision.violations if v.rule == "changeControl"]
    return violation.message


def test_first_int8_engine_needs_two_approvals(material: Material) -> None:
    ref = material.engine("first", builder_config=INT8, calibration=CALIBRATION)
    decision = evaluate(engine_for(material), pod(engine=ref))
    assert not decision.allowed
    message = change_violation(decision)
    assert "gated changes [FirstInt8] (against no earlier engine)" in message
    assert "audit ID AUD-1" in message and "FirstInt8 needs 2 more" in message
    material.approval("first", ["FirstInt8"], "alice")
    assert "FirstInt8 needs 1 more (approved by [committee/alice])" in change_violation(
        evaluate(engine_for(material), pod(engine=ref))
    )
    material.approval("first", ["FirstInt8"], "bob")
    assert evaluate(engine_for(material), pod(engine=ref)).allowed


def test_approvals_that_do_not_count(material: Material) -> None:
    ref = material.engine("e", builder_config=INT8, calibration=CALIBRATION)
    material.approval("e", ["FirstInt8"], "alice", audit_id="AUD-other")  # another audit ID
    material.approval("e", ["FirstInt8"], "bob", expires_at="2026-10-20T00:00:00Z")  # expired
    material.approval("e", ["FirstInt8"], "mallory")  # not on the committee
    material.approval("e", ["DynamicShapeChange"], "chen")  # another change kind
    message = change_violation(evaluate(engine_for(material), pod(engine=ref)))
    assert "FirstInt8 needs 2 more" in message
    # Each approval that was found says why it does not count (issue 28: none is silently ignored).
    _, found = message.split("; approvals found that do not count: ")
    assert "alice@example.com's approval (committee/alice) names audit ID AUD-other, not AUD-1" in found
    assert "bob@example.com's approval (committee/bob) expired at 2026-10-20T00:00:00+00:00" in found
    chen = "chen@example.com's approval (committee/chen)"
    assert f"{chen} covers [DynamicShapeChange], none of [FirstInt8]" in found
    assert "is not signed by [committee/alice, committee/bob, committee/chen]" in found


def test_an_approval_of_the_artifact_digest_is_named_as_such(material: Material) -> None:
    ref = material.engine("e", builder_config=INT8, calibration=CALIBRATION)
    artifact = ref.split("@")[1]
    material.approval("e", ["FirstInt8"], "alice", engine_digest=artifact, subject=artifact)
    message = change_violation(evaluate(engine_for(material), pod(engine=ref)))
    assert "FirstInt8 needs 2 more" in message
    engine_file = "sha256:" + sha256_bytes(b"engine e")
    assert (
        f"alice@example.com's approval (committee/alice) names {artifact}, the digest of the artifact {ref} "
        f"(its OCI manifest), not the engine file {engine_file} that approvals must name"
    ) in message


def test_declared_previous_manifest_shows_a_major_upgrade(material: Material) -> None:
    old = material.engine("v1", toolchain=TRT8)
    new = material.engine("v2", previous_engine=old, previous_manifest_digest=material.manifest_digests["v1"])
    decision = evaluate(engine_for(material), pod(engine=new))
    message = change_violation(decision)
    assert "gated changes [TensorRTMajorUpgrade]" in message
    assert f"declared previous manifest {material.manifest_digests['v1']}" in message
    for member in ("alice", "chen"):
        material.approval("v2", ["TensorRTMajorUpgrade"], member)
    assert evaluate(engine_for(material), pod(engine=new)).allowed


def test_the_last_admitted_engine_is_named_as_such_when_it_is_also_the_declared_one(
    material: Material,
) -> None:
    """Issue 28 item 6: the baseline that ran here is the last admitted engine, whatever the build says."""
    old = material.engine("v1", toolchain=TRT8)
    new = material.engine("v2", previous_engine=old, previous_manifest_digest=material.manifest_digests["v1"])
    history = RecordedHistory({("prod", "Pod", "p"): admitted(old)})
    decision = evaluate(engine_for(material, history), pod(engine=new))
    message = change_violation(decision)
    assert f"last admitted engine {old} (the declared previous manifest)" in message
    [engine] = [e.to_json() for e in decision.engines]
    [control] = engine["change_control"]
    assert [b["kind"] for b in control["baselines"]] == ["declared-previous-manifest", "last-admitted-engine"]


def test_omitted_previous_cannot_hide_a_gated_change(material: Material) -> None:
    old = material.engine("v1", repository="resnet", toolchain=TRT8)
    new = material.engine("v2", repository="resnet")  # no previous declared
    assert evaluate(engine_for(material), pod(engine=new)).allowed  # nothing known to compare with
    history = RecordedHistory({("prod", "Pod", "p"): admitted(old)})
    message = change_violation(evaluate(engine_for(material, history), pod(engine=new)))
    assert f"gated changes [TensorRTMajorUpgrade] (against last admitted engine {old})" in message
    # The same engine admitted again is not a change against itself.
    history.last[WorkloadIdentity("", "Pod", "prod", "p")] = admitted(new)
    assert evaluate(engine_for(material, history), pod(engine=new)).allowed


@pytest.mark.parametrize(
    "last",
    [
        # Same volume name, the engine moved to another repository.
        admitted,
        # Volume renamed as well: the same container ran the old engine.
        lambda old: admitted(old, name="resnet-engine"),
        # Volume and container renamed: every engine of the last admission is a baseline.
        lambda old: admitted(old, name="resnet-engine", containers=("server",)),
        # A record written before engine names were kept.
        lambda old: admitted(old, name=None, containers=()),
    ],
    ids=["same-name", "volume-renamed", "container-renamed", "unnamed-record"],
)
def test_renaming_the_engine_repository_cannot_hide_a_gated_change(
    material: Material, last: Callable[[str], tuple[AdmittedEngine, ...]]
) -> None:
    old = material.engine("v1", repository="resnet", toolchain=TRT8)
    new = material.engine("v2", repository="resnet-next")  # the same model under a new repository
    history = RecordedHistory({("prod", "Pod", "p"): last(old)})
    message = change_violation(evaluate(engine_for(material, history), pod(engine=new)))
    assert f"gated changes [TensorRTMajorUpgrade] (against last admitted engine {old})" in message


def test_an_unchanged_engine_beside_a_changed_one_is_not_compared_with_it(material: Material) -> None:
    resnet = material.engine("v1", repository="resnet", toolchain=TRT8)
    bert = material.engine("b1", repository="bert")
    obj = pod(engine=resnet)
    obj["spec"]["volumes"].append({"name": "bert", "image": {"reference": bert}})
    obj["spec"]["containers"][0]["volumeMounts"].append({"name": "bert", "mountPath": "/bert"})
    history = RecordedHistory(
        {
            ("prod", "Pod", "p"): (
                AdmittedEngine(resnet, "engine", ("c0",)),
                AdmittedEngine(bert, "bert", ("c0",)),
            )
        }
    )
    assert evaluate(engine_for(material, history), obj).allowed


# --- the policy's own history (attack F3: out of the policy's scope and back) -----------------------------

POD = ("prod", "Pod", "p")


def test_an_engine_the_policy_did_not_confirm_is_no_baseline(material: Material) -> None:
    """The last admission ran B, which this policy never confirmed (it did not apply then): B is compared
    with, but the baseline is A, the engine it confirmed; B judged again is no change only against itself."""
    a = material.engine("a", toolchain=TRT8)
    b = material.engine("b")  # TensorRT 10, no predecessor declared
    history = RecordedHistory({POD: admitted(b)}, {"change-control": {POD: admitted(a)}})
    decision = evaluate(engine_for(material, history), pod(engine=b))
    assert f"gated changes [TensorRTMajorUpgrade] (against last admitted engine {a})" in change_violation(
        decision
    )
    [control] = decision.engines[0].change_control
    assert [b.engine for b in control.baselines] == [a, b]
    assert decision.engines[0].confirmed_by == ()
    # Had the policy confirmed B, B would be no change against itself (and confirmed again).
    confirmed = RecordedHistory({POD: admitted(b)}, {"change-control": {POD: admitted(b)}})
    decision = evaluate(engine_for(material, confirmed), pod(engine=b))
    assert decision.allowed and decision.engines[0].confirmed_by == ("change-control",)
    # Another policy's confirmation is not this one's (nor is a policy's under its old name, once renamed).
    fresh = RecordedHistory({POD: admitted(a)}, {"another-policy": {POD: admitted(a)}})
    message = change_violation(evaluate(engine_for(material, fresh), pod(engine=b)))
    assert f"(against last admitted engine {a} (not confirmed by this policy))" in message


def test_what_ran_unconfirmed_hides_no_first_int8(material: Material) -> None:
    """A policy with no history here (new, renamed, or its selector just widened) compares an engine with
    what ran; an INT8 engine it never confirmed hides no FirstInt8, unless approved for it."""
    b, c = int8_chain(material)
    history = RecordedHistory({POD: admitted(b)}, {})
    decision = evaluate(engine_for(material, history), pod(engine=c))
    message = change_violation(decision)
    assert "gated changes [FirstInt8] (against no earlier engine)" in message
    assert any(
        f"the last admitted engine {b} ran here, but this policy did not confirm it" in n
        for n in decision.notes
    )
    for member in ("alice", "bob"):
        material.approval("b", ["FirstInt8"], member, audit_id="AUD-B")
    assert evaluate(engine_for(material, history), pod(engine=c)).allowed  # b stands in for an earlier engine


def test_only_a_verdict_with_nothing_missing_confirms(material: Material) -> None:
    """Enforcing or not: a policy in Audit mode that records an unapproved change lets it in, unconfirmed;
    one that finds every gated change approved confirms."""
    a = material.engine("a", toolchain=TRT8)
    b = material.engine("b")
    history = RecordedHistory({POD: admitted(a)})
    audit = POLICY.replace("  models:", "  action: Audit\n  models:")
    decision = evaluate(engine_for(material, history, audit), pod(engine=b))
    assert decision.allowed and [v.action.value for v in decision.violations] == ["Audit"]
    assert decision.engines[0].confirmed_by == ()
    for member in ("alice", "bob"):
        material.approval("b", ["TensorRTMajorUpgrade"], member)
    for text in (audit, POLICY):
        decision = evaluate(engine_for(material, history, text), pod(engine=b))
        assert decision.violations == () and decision.engines[0].confirmed_by == ("change-control",)


def test_an_update_confirms_an_unchanged_engine_only_if_the_policy_had(material: Material) -> None:
    """An UPDATE the policy does not judge the engine again in (it is unchanged) carries the policy's own
    confirmation forward, never gives one it did not."""
    a = material.engine("a", toolchain=TRT8)
    b = material.engine("b")
    scaled = pod(engine=b, labels={"scaled": "yes"})
    engine = engine_for(material, RecordedHistory({POD: admitted(b)}, {"change-control": {POD: admitted(a)}}))
    decision = asyncio.run(engine.evaluate(scaled, old=pod(engine=b)))
    assert decision.allowed and decision.engines[0].confirmed_by == ()
    engine = engine_for(material, RecordedHistory({POD: admitted(b)}))
    decision = asyncio.run(engine.evaluate(scaled, old=pod(engine=b)))
    assert decision.allowed and decision.engines[0].confirmed_by == ("change-control",)
    # Without a history to ask (`check`), nothing is carried: check writes no record.
    decision = asyncio.run(engine_for(material).evaluate(scaled, old=pod(engine=b)))
    assert decision.engines[0].confirmed_by == ()


def test_declared_previous_that_cannot_be_found_is_an_error(material: Material) -> None:
    new = material.engine("v2", previous_manifest_digest="sha256:" + "9" * 64)
    decision = evaluate(engine_for(material), pod(engine=new))
    [violation] = decision.violations
    assert violation.error and violation.rule == "changeControl"
    assert "cannot be found" in violation.message
    assert not decision.allowed  # onError defaults to Deny


def test_ungated_changes_pass(material: Material) -> None:
    old = material.engine("v1")
    new = material.engine(
        "v2",
        builder_config={"typing": "weak", "precision_flags": ["fp16"], "max_workspace_size": 2 << 30},
        previous_engine=old,
        previous_manifest_digest=material.manifest_digests["v1"],
    )
    assert evaluate(engine_for(material), pod(engine=new)).allowed  # a WorkspaceChange is not gated


def test_approve_command_signs_an_approval_that_counts(
    material: Material, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = material.engine("e", builder_config=INT8, calibration=CALIBRATION)
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    engine_file = material.root / "e.plan"
    engine_file.write_bytes(b"engine e")
    for member in ("alice", "bob"):
        key = material.root / f"{member}.key"
        key.write_bytes(encrypt_private_key(material.key(member), b"pw"))
        assert (
            main(
                [
                    "approve",
                    str(engine_file),
                    "--audit-id",
                    "AUD-1",
                    "--changes",
                    "FirstInt8",
                    "--approver",
                    f"{member}@example.com",
                    "--manifest",
                    str(material.attestations / "e.manifest.json"),
                    "--expires",
                    "30d",
                    "--key",
                    str(key),
                    "--output",
                    str(material.attestations / f"approval-{member}.json"),
                ]
            )
            == 0
        )
    assert evaluate(engine_for(material), pod(engine=ref)).allowed


def test_approve_refuses_a_manifest_for_another_audit_id(
    material: Material, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    material.engine("e")
    monkeypatch.setenv("TRTGUARD_PASSWORD", "pw")
    status = main(
        [
            "approve",
            "sha256:" + "ab" * 32,
            "--audit-id",
            "AUD-9",
            "--changes",
            "FirstInt8",
            "--approver",
            "a@example.com",
            "--manifest",
            str(material.attestations / "e.manifest.json"),
            "--key",
            str(material.root / "none.key"),
        ]
    )
    assert status == 2
    assert "describes engine sha256:" in capsys.readouterr().err


def test_approve_refuses_unknown_change_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "approve",
                "sha256:" + "ab" * 32,
                "--audit-id",
                "A",
                "--changes",
                "FirstInt8,NotAKind",
                "--approver",
                "a",
                "--key",
                "k",
            ]
        )
    assert exited.value.code == 2
    assert "unknown change kind 'NotAKind'" in capsys.readouterr().err


class ReloadedFolder:
    """An evidence folder read again on request: a registry whose attachments changed meanwhile."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.inner = LocalEvidence(folder)
        self.description = self.inner.description
        self.concurrent_lookups = False

    def reload(self) -> None:
        self.inner = LocalEvidence(self.folder)

    async def resolve_digest(self, ref: ImageReference, deadline: Deadline) -> str:
        return await self.inner.resolve_digest(ref, deadline)

    async def subjects(self, ref: ImageReference, deadline: Deadline) -> ArtifactSubjects:
        return await self.inner.subjects(ref, deadline)

    async def attestations(self, ref: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        return await self.inner.attestations(ref, deadline)

    async def image_signatures(self, ref: ImageReference, deadline: Deadline) -> ImageSignatures:
        return await self.inner.image_signatures(ref, deadline)


def test_an_approval_pushed_since_counts_at_the_next_admission(material: Material) -> None:
    """One long-lived engine, as `serve` holds it: approvals that did not suffice are not answered from the
    cache (they were, for ten minutes: an empty result was cached like a success)."""
    ref = material.engine("first", builder_config=INT8, calibration=CALIBRATION)
    source = ReloadedFolder(material.attestations)
    paths = [
        material.policy(POLICY),
        material.keys_file("build-signer"),
        material.keys_file(*COMMITTEE, set_name="committee"),
    ]
    engine = PolicyEvaluator(load_policy_set(paths), source, clock=lambda: NOW)
    assert "FirstInt8 needs 2 more" in change_violation(evaluate(engine, pod(engine=ref)))
    material.approval("first", ["FirstInt8"], "alice")
    source.reload()
    assert "FirstInt8 needs 1 more" in change_violation(evaluate(engine, pod(engine=ref)))
    material.approval("first", ["FirstInt8"], "bob")
    source.reload()
    decision = evaluate(engine, pod(engine=ref))
    assert decision.allowed
    # What counted is in the decision's engine record: the change kinds and both approvals.
    [recorded] = [e.to_json() for e in decision.engines]
    [control] = recorded["change_control"]
    assert control["gated"] == ["FirstInt8"] and control["baselines"] == []
    assert {"kind": "FirstInt8", "against": []} in control["changes"]
    assert sorted(a["approver"] for a in control["approvals"]) == ["alice@example.com", "bob@example.com"]
    # A result that suffices is answered from the cache: the folder is not read again for it.
    cached = engine.verified.approvals_cache.stats.hits
    assert evaluate(engine, pod(engine=ref)).allowed
    assert engine.verified.approvals_cache.stats.hits == cached + 1


# --- issue 24, item 1: a declared previous manifest is a baseline only if it is confirmed ---------------


def test_an_unapproved_int8_predecessor_does_not_launder_the_first_int8_engine(material: Material) -> None:
    """A new workload whose INT8 engine declares another INT8 engine, neither admitted nor approved."""
    shadow = material.engine("shadow", builder_config=INT8, calibration=CALIBRATION)
    new = material.engine(
        "new",
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=shadow,
        previous_manifest_digest=material.manifest_digests["shadow"],
    )
    for history in (None, RecordedHistory({})):
        decision = evaluate(engine_for(material, history), pod(engine=new))
        assert not decision.allowed
        message = change_violation(decision)
        assert "gated changes [FirstInt8] (against no earlier engine)" in message
        assert f"declared previous manifest {material.manifest_digests['shadow']} is not confirmed" in message
        [recorded] = [e.to_json() for e in decision.engines]
        [control] = recorded["change_control"]
        assert control["baselines"][0]["kind"] == "declared-previous-manifest"
        assert {"kind": "FirstInt8", "against": []} in control["changes"]
        assert any("is not confirmed" in note for note in decision.notes)


def test_a_chain_through_an_unapproved_engine_is_judged_as_a_first_engine(material: Material) -> None:
    """A (approved for FirstInt8) → B (unapproved, declares A) → C (declares B), in a new workload."""
    a = material.engine("a", builder_config=INT8, calibration=CALIBRATION)
    for member in ("alice", "bob"):
        material.approval("a", ["FirstInt8"], member)
    b = material.engine(
        "b",
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=a,
        previous_manifest_digest=material.manifest_digests["a"],
        audit_id="AUD-B",
    )
    c = material.engine(
        "c",
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=b,
        previous_manifest_digest=material.manifest_digests["b"],
        audit_id="AUD-C",
    )
    # B declares the approved A: A stands in for an earlier engine, so B brings no FirstInt8.
    assert evaluate(engine_for(material), pod(engine=b)).allowed
    # C declares B, which nobody approved and nothing admitted here.
    assert "FirstInt8 needs 2 more" in change_violation(evaluate(engine_for(material), pod(engine=c)))
    # Once B is this workload's last admitted engine, it is a confirmed baseline.
    history = RecordedHistory({("prod", "Pod", "p"): admitted(b)})
    assert evaluate(engine_for(material, history), pod(engine=c)).allowed
    # Admitted in another workload (or namespace) only: not confirmed for this one.
    elsewhere = RecordedHistory({("dev", "Pod", "p"): admitted(b), ("prod", "Pod", "q"): admitted(b)})
    assert not evaluate(engine_for(material, elsewhere), pod(engine=c)).allowed


@pytest.mark.parametrize(
    "approve",
    [
        lambda m: [m.approval("b", ["FirstInt8"], who, audit_id="AUD-other") for who in ("alice", "bob")],
        lambda m: [m.approval("c", ["FirstInt8"], who, audit_id="AUD-B") for who in ("alice", "bob")],
        lambda m: [
            m.approval("b", ["TensorRTMajorUpgrade"], who, audit_id="AUD-B") for who in ("alice", "bob")
        ],
        lambda m: [m.approval("b", ["FirstInt8"], "alice", audit_id="AUD-B")],
        lambda m: [m.approval("b", ["FirstInt8"], who, audit_id="AUD-B") for who in ("alice", "mallory")],
        lambda m: [
            m.approval("b", ["FirstInt8"], who, audit_id="AUD-B", expires_at="2026-10-20T00:00:00Z")
            for who in ("alice", "bob")
        ],
    ],
    ids=[
        "other-audit-id",
        "wrong-digest",
        "other-change-kinds",
        "below-threshold",
        "not-committee",
        "expired",
    ],
)
def test_approvals_of_the_predecessor_that_do_not_confirm_it(
    material: Material, approve: Callable[[Material], object]
) -> None:
    _, c = int8_chain(material)
    approve(material)
    assert "FirstInt8 needs 2 more" in change_violation(evaluate(engine_for(material), pod(engine=c)))


def test_a_predecessor_approved_for_its_own_first_int8_is_a_baseline(material: Material) -> None:
    _, c = int8_chain(material)
    for member in ("alice", "chen"):
        material.approval("b", ["FirstInt8"], member, audit_id="AUD-B")
    decision = evaluate(engine_for(material), pod(engine=c))
    assert decision.allowed, decision.violations
    assert not any("is not confirmed" in note for note in decision.notes)


def test_an_unconfirmed_fp16_predecessor_still_shows_its_changes(material: Material) -> None:
    """Not confirmed, a predecessor still counts for what it shows: judging against nothing would hide the
    major upgrade."""
    old = material.engine("v1", toolchain=TRT8)
    new = material.engine("v2", previous_engine=old, previous_manifest_digest=material.manifest_digests["v1"])
    assert "gated changes [TensorRTMajorUpgrade]" in change_violation(
        evaluate(engine_for(material, RecordedHistory({})), pod(engine=new))
    )


def test_check_without_history_notes_that_it_was_not_consulted(material: Material) -> None:
    ref = material.engine("v1")
    without = evaluate(engine_for(material), pod(engine=ref))
    assert any("history was not consulted" in note for note in without.notes)
    with_history = evaluate(engine_for(material, RecordedHistory({})), pod(engine=ref))
    assert not any("history was not consulted" in note for note in with_history.notes)
    # A workload no change control selects gets no such note.
    other = evaluate(engine_for(material), pod(engine=ref, namespace="dev"))
    assert not any("history was not consulted" in note for note in other.notes)


# --- issue 24, round two: history per workload identity; baselines no name can steer -----------------

LLM_MODEL, EMBEDDER_MODEL = {"sha256": "11" * 32}, {"sha256": "22" * 32}


def volcano_job(tasks: dict[str, list[tuple[str, str, str]]], name: str = "ensemble") -> dict[str, Any]:
    """A Volcano Job: task → its containers' (container, volume, engine) mounts (one volume each)."""
    specs = []
    for task, mounts in tasks.items():
        containers: dict[str, list[dict[str, str]]] = {}
        for container, volume, _ in mounts:
            containers.setdefault(container, []).append({"name": volume, "mountPath": f"/m/{volume}"})
        spec = {
            "containers": [
                {"name": c, "image": RUNTIME_IMAGE, "volumeMounts": m} for c, m in containers.items()
            ],
            "volumes": [{"name": volume, "image": {"reference": ref}} for _, volume, ref in mounts],
        }
        specs.append({"name": task, "replicas": 1, "template": {"spec": spec}})
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {"tasks": specs},
    }


RUNTIME_IMAGE = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32


@pytest.mark.parametrize(
    ("api_version", "group"),
    [("batch/v1", "batch"), ("batch.volcano.sh/v1alpha1", "batch.volcano.sh")],
)
def test_history_is_looked_up_by_api_group_kind_namespace_and_name(
    material: Material, api_version: str, group: str
) -> None:
    """The history of a Volcano Job called train does not answer for batch/v1's Job of that name (nor the
    other way round): its INT8 engine confirms no predecessor there."""
    b, c = int8_chain(material)
    spec = pod(engine=c)["spec"]
    job = {
        "apiVersion": api_version,
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "prod"},
        "spec": {"template": {"spec": spec}}
        if group == "batch"
        else {"tasks": [{"name": "run", "template": {"spec": spec}}]},
    }
    other = "batch.volcano.sh" if group == "batch" else "batch"
    elsewhere = RecordedHistory({WorkloadIdentity(other, "Job", "prod", "train"): admitted(b)})
    assert "FirstInt8 needs 2 more" in change_violation(evaluate(engine_for(material, elsewhere), job))
    here = RecordedHistory({WorkloadIdentity(group, "Job", "prod", "train"): admitted(b)})
    assert evaluate(engine_for(material, here), job).allowed


@pytest.mark.parametrize("api_version", ["apps/v1", "apps/v1beta2", "extensions/v1beta1"])
def test_history_is_per_group_not_per_version(material: Material, api_version: str) -> None:
    old = material.engine("v1", toolchain=TRT8)
    new = material.engine("v2")
    template = {"metadata": {"labels": {"app": "r"}}, "spec": pod(engine=new)["spec"]}
    deployment = {
        "apiVersion": api_version,
        "kind": "Deployment",
        "metadata": {"name": "resnet", "namespace": "prod"},
        "spec": {"selector": {"matchLabels": {"app": "r"}}, "template": template},
    }
    history = RecordedHistory({WorkloadIdentity("apps", "Deployment", "prod", "resnet"): admitted(old)})
    assert "TensorRTMajorUpgrade" in change_violation(evaluate(engine_for(material, history), deployment))


def test_baselines_are_not_narrowed_by_names_containers_templates_or_decoys(material: Material) -> None:
    """Whatever names, containers and tasks the INT8 build of the language model is given (those of the
    approved INT8 embedder, repeated across tasks, beside a decoy), it is compared with the FP16 language
    model, the build of its own ONNX model that ran here: a FirstInt8 change."""
    llm = material.engine("llm", onnx=LLM_MODEL)
    embedder = material.engine("emb", onnx=EMBEDDER_MODEL, builder_config=INT8, calibration=CALIBRATION)
    decoy = material.engine("decoy", onnx=EMBEDDER_MODEL, builder_config=INT8, calibration=CALIBRATION)
    int8_llm = material.engine(
        "llm8", onnx=LLM_MODEL, builder_config=INT8, calibration=CALIBRATION, audit_id="AUD-8"
    )
    workload = WorkloadIdentity("batch.volcano.sh", "Job", "prod", "ensemble")
    history = RecordedHistory(
        {
            workload: (
                AdmittedEngine(llm, "llm", ("server",)),
                AdmittedEngine(embedder, "emb", ("server",)),  # a `server` in the other task too
                AdmittedEngine(decoy, "llm-int8", ("server",)),
            )
        }
    )
    engine = engine_for(material, history)
    names, containers, tasks = (
        ["llm", "emb", "llm-int8", "x"],
        ["server", "embedder", "x"],
        ["leader", "worker"],
    )

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        volume=st.sampled_from(names),
        container=st.sampled_from(containers),
        task=st.sampled_from(tasks),
        keep=st.lists(st.sampled_from([embedder, decoy, llm]), max_size=3, unique=True),
    )
    def judged(volume: str, container: str, task: str, keep: list[str]) -> None:
        mounts: dict[str, list[tuple[str, str, str]]] = {task: [(container, volume, int8_llm)]}
        for n, ref in enumerate(keep):  # the others, unchanged, anywhere
            mounts.setdefault(tasks[n % 2], []).append((container, f"keep-{n}", ref))
        message = change_violation(evaluate(engine, volcano_job(mounts)))
        assert f"gated changes [FirstInt8] (against last admitted engine {llm})" in message

    judged()


def test_an_engine_of_a_model_that_never_ran_here_is_compared_with_every_engine(material: Material) -> None:
    llm = material.engine("llm", onnx=LLM_MODEL, toolchain=TRT8)
    embedder = material.engine("emb", onnx=EMBEDDER_MODEL, builder_config=INT8, calibration=CALIBRATION)
    novel = material.engine("new", onnx={"sha256": "33" * 32}, builder_config=INT8, calibration=CALIBRATION)
    workload = WorkloadIdentity("batch.volcano.sh", "Job", "prod", "ensemble")
    history = RecordedHistory(
        {workload: (AdmittedEngine(llm, "llm", ("server",)), AdmittedEngine(embedder, "emb", ("x",)))}
    )
    decision = evaluate(engine_for(material, history), volcano_job({"w": [("x", "emb", novel)]}))
    message = change_violation(decision)
    assert "gated changes [FirstInt8, TensorRTMajorUpgrade]" in message
    [recorded] = [e.to_json() for e in decision.engines]
    [control] = recorded["change_control"]
    assert [b["engine"] for b in control["baselines"]] == [llm, embedder]
    # A rebuild of the embedder's model is compared with the embedder alone: nothing gated.
    rebuilt = material.engine("emb2", onnx=EMBEDDER_MODEL, builder_config=INT8, calibration=CALIBRATION)
    assert evaluate(engine_for(material, history), volcano_job({"w": [("server", "llm", rebuilt)]})).allowed


def test_a_workload_without_a_namespace_notes_that_its_history_was_not_read(material: Material) -> None:
    """F3: the history is by namespace and name; an object naming no namespace has none to read, which the
    decision says rather than judging as if nothing ran there (the policy selects every namespace)."""
    ref = material.engine("v1")
    everywhere = POLICY.replace("match: {namespaces: [prod]}", "match: {}")
    unplaced = pod(engine=ref, namespace=None)
    decision = evaluate(engine_for(material, RecordedHistory({}), everywhere), unplaced)
    assert any("history was not consulted: the object names no namespace" in note for note in decision.notes)


def test_every_build_of_a_model_its_newest_admission_ran_is_a_baseline() -> None:
    # Review lead: two builds of one model confirmed in one admission (say TensorRT 8 and 10); only the
    # first the record listed was compared with, and the workload's author orders the record.
    newest, older = AdmittingDecision("r2", 2), AdmittingDecision("r1", 1)

    def build(ref: str, by: AdmittingDecision, onnx: str) -> Any:
        manifest = SimpleNamespace(manifest=SimpleNamespace(onnx=SimpleNamespace(sha256=onnx)))
        return (ImageReference.parse(ref), AdmittedEngine(ref, admitted_by=by), manifest)

    found = [
        build("r.io/m/a@sha256:" + "a" * 64, newest, "1" * 64),
        build("r.io/m/b@sha256:" + "b" * 64, newest, "1" * 64),
        build("r.io/m/c@sha256:" + "c" * 64, older, "1" * 64),
        build("r.io/m/d@sha256:" + "d" * 64, older, "2" * 64),
    ]
    kept = _newest_per_model(cast(Any, found))
    assert [str(f[0]).split("/")[2][0] for f in kept] == ["a", "b", "d"]
