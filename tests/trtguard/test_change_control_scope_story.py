"""Change control cannot be laundered by moving a workload out of a policy's scope and back (attack F3): a
real ``trtguard serve`` over TLS with its decision log (SQLite and PostgreSQL), and ``trtguard check
--decision-log`` beside it.

The attack: W is admitted with engine A under a change-control policy that selects it by label; an UPDATE
removes the label and brings an unapproved engine B (no change-control policy applies: admitted); an UPDATE
restores the label, B unchanged. Were B judged against the workload's last admission of any kind, it would
be judged against itself, and admitted. A policy's baseline is the last admission in which *that policy*
confirmed the workload's engines (policies/README.md, "Change control"). The family, each a story below: a
DELETE and re-CREATE outside the scope, a second policy that did judge B (its confirmation is its own), a
policy that selects by requester, and a policy in Audit mode that let B in with a violation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.trtguard.change_control_world import TRT8, World, cli, denial, make_world

MATCH = "namespaces: [prod], labels: {matchLabels: {release: controlled}}"
POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: release-control}
spec:
  match: {MATCH}
  action: ACTION
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8, TensorRTMajorUpgrade, DynamicShapeChange]
    approvals: {keys: [committee/alice, committee/bob, committee/chen], threshold: 2}
"""
#: A second policy over the whole namespace that gates INT8 only: it judges (and confirms) what the first one
#: does not see.
NAMESPACE_POLICY = """
---
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: namespace-control}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8]
    approvals: {keys: [committee/alice, committee/bob, committee/chen], threshold: 2}
"""
RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
UPGRADE = "gated changes [TensorRTMajorUpgrade] (against last admitted engine {})"


def policy(match: str = MATCH, action: str = "Deny") -> str:
    return POLICY.replace("MATCH", match).replace("ACTION", action)


def deployment(engine: str, *, controlled: bool = True, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": "resnet", **({"release": "controlled"} if controlled else {})}
    template = {
        "metadata": {"labels": {"app": "resnet"}},
        "spec": {
            "containers": [
                {"name": "server", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/m"}]}
            ],
            "volumes": [{"name": "engine", "image": {"reference": engine}}],
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "resnet", "namespace": "prod", "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "resnet"}}, "template": template},
    }


def _world(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> Iterator[World]:
    yield from make_world(request, tmp_path, monkeypatch, text)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from _world(request, tmp_path, monkeypatch, policy())


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def two_policies(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    yield from _world(request, tmp_path, monkeypatch, policy() + NAMESPACE_POLICY)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def by_requester(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    match = "namespaces: [prod], requesters: {usernames: [release-bot]}"
    yield from _world(request, tmp_path, monkeypatch, policy(match))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def audited(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    yield from _world(request, tmp_path, monkeypatch, policy("namespaces: [prod]", action="Audit"))


def engines(world: World) -> tuple[str, str, str]:
    """a (TensorRT 8), then b and c (TensorRT 10, their predecessor left out: major upgrades, unapproved)."""
    m = world.material
    return (
        m.engine("a", toolchain=TRT8, audit_id="A"),
        m.engine("b", audit_id="B"),
        m.engine("c", audit_id="C"),
    )


def check_denies(world: World, obj: dict[str, Any], baseline: str) -> None:
    """`check --decision-log` gives the webhook's verdict: the upgrade, against the same baseline."""
    status, out = world.check(obj, "--decision-log", world.log)
    [result] = json.loads(out)
    assert status == 1, result
    assert UPGRADE.format(baseline) in " ".join(v["message"] for v in result["violations"])


def test_a_label_toggle_does_not_launder_an_unapproved_upgrade(world: World) -> None:
    """Rotated (every record sealed, archived and pruned) between every two admissions, and restarted."""
    a, b, c = engines(world)
    first, outside, back = deployment(a), deployment(b, controlled=False), deployment(b)

    assert world.ask(first)["allowed"]
    assert world.last_record()["engines"][0]["confirmed_by"] == ["release-control"]
    world.rotate()
    # Out of the policy's scope: no change-control policy applies, so nothing stops or confirms B.
    assert world.ask(outside, operation="UPDATE", old=first)["allowed"]
    assert world.last_record()["engines"][0]["confirmed_by"] == []
    world.rotate()
    # Back in scope, B unchanged: judged against A, the engine the policy confirmed here last.
    message = denial(world.ask(back, operation="UPDATE", old=outside))
    assert UPGRADE.format(a) in message
    assert "TensorRTMajorUpgrade" in denial(world.ask(back, operation="UPDATE", old=outside, dry_run=True))
    check_denies(world, back, a)
    world.rotate()
    world.restart()
    # More admissions outside the scope than the carried state keeps of a workload's newest: A is still the
    # policy's baseline, after a restart, with all of them pruned.
    assert world.ask(deployment(c, controlled=False), operation="UPDATE", old=outside)["allowed"]
    world.rotate()
    assert world.ask(outside, operation="UPDATE", old=deployment(c, controlled=False))["allowed"]
    world.rotate()
    assert UPGRADE.format(a) in denial(world.ask(back, operation="UPDATE", old=outside))
    check_denies(world, back, a)
    world.rotate()
    # Approved, B is admitted back in scope and is the policy's baseline from then on.
    for member in ("alice", "bob"):
        world.material.approval("b", ["TensorRTMajorUpgrade"], member, audit_id="B")
    world.restart()  # it reads the attestation folder when it starts
    assert world.ask(back, operation="UPDATE", old=outside)["allowed"]
    world.rotate()
    assert world.ask(deployment(c), operation="UPDATE", old=back)["allowed"]  # c against b: no upgrade
    status, out, err = cli("audit", "verify", "--decision-log", world.log, "--format", "json")
    assert status == 0 and json.loads(out)["problems"] == [], out + err


def test_a_deletion_and_a_re_creation_outside_the_scope_do_not_launder_it(world: World) -> None:
    a, b, _ = engines(world)
    first, outside = deployment(a), deployment(b, controlled=False)
    assert world.ask(first)["allowed"]
    world.rotate()
    assert world.ask(first, operation="DELETE", old=first)["allowed"]
    assert world.ask(outside)["allowed"]  # created again, out of scope, with B
    world.rotate()
    assert UPGRADE.format(a) in denial(world.ask(deployment(b), operation="UPDATE", old=outside))
    check_denies(world, deployment(b), a)


def test_another_policys_confirmation_is_no_baseline_for_this_one(two_policies: World) -> None:
    """namespace-control judged B when the label was removed (it gates INT8 only: B passed); release-control
    did not. B is namespace-control's baseline, not release-control's."""
    world = two_policies
    a, b, _ = engines(world)
    first, outside, back = deployment(a), deployment(b, controlled=False), deployment(b)
    assert world.ask(first)["allowed"]
    assert world.last_record()["engines"][0]["confirmed_by"] == ["release-control", "namespace-control"]
    assert world.ask(outside, operation="UPDATE", old=first)["allowed"]
    assert world.last_record()["engines"][0]["confirmed_by"] == ["namespace-control"]
    world.rotate()
    message = denial(world.ask(back, operation="UPDATE", old=outside))
    assert message.startswith("release-control/changeControl:") and UPGRADE.format(a) in message
    assert "namespace-control/" not in message
    check_denies(world, back, a)


def test_a_policy_that_selects_by_requester_is_not_laundered_by_another_requester(
    by_requester: World,
) -> None:
    """The policy judges only what release-bot applies; an admin's UPDATE brought B past it."""
    world = by_requester
    a, b, _ = engines(world)
    first = deployment(a)
    assert world.ask(first, user="release-bot")["allowed"]
    assert world.ask(deployment(b), operation="UPDATE", old=first, user="kubernetes-admin")["allowed"]
    world.rotate()
    # release-bot only scales it: the policy judges the whole object (it may not have judged the old one).
    scaled = deployment(b, replicas=3)
    message = denial(world.ask(scaled, operation="UPDATE", old=deployment(b), user="release-bot"))
    assert UPGRADE.format(a) in message


def test_an_engine_let_in_despite_its_change_control_is_no_baseline(audited: World) -> None:
    """In Audit mode the policy records B's unapproved upgrade and lets it in: it did not confirm B. Once it
    enforces, the next engine is judged against A, the last engine it confirmed, not against B."""
    world = audited
    a, b, c = engines(world)
    first, second = deployment(a, controlled=False), deployment(b, controlled=False)
    assert world.ask(first)["allowed"]
    assert world.ask(second, operation="UPDATE", old=first)["allowed"]
    record = world.last_record()
    assert [(v["rule"], v["action"]) for v in record["violations"]] == [("changeControl", "Audit")]
    assert record["engines"][0]["confirmed_by"] == []
    world.rotate()
    world.replace_policy(policy("namespaces: [prod]"))
    # Scaled: B is not judged again (unchanged), and stays unconfirmed.
    scaled = deployment(b, controlled=False, replicas=3)
    assert world.ask(scaled, operation="UPDATE", old=second)["allowed"]
    assert world.last_record()["engines"][0]["confirmed_by"] == []
    world.rotate()
    third = deployment(c, controlled=False)
    assert UPGRADE.format(a) in denial(world.ask(third, operation="UPDATE", old=scaled))
    check_denies(world, third, a)


def test_a_workload_entering_the_scope_is_compared_with_what_ran_there(world: World) -> None:
    """The policy has no history for a workload that was never in its scope: what ran there, unconfirmed,
    is still compared with (an upgrade against it is found), as before the policy's own history existed."""
    a, b, _ = engines(world)
    outside = deployment(a, controlled=False)
    assert world.ask(outside)["allowed"]
    world.rotate()
    message = denial(world.ask(deployment(b), operation="UPDATE", old=outside))
    assert f"(against last admitted engine {a} (not confirmed by this policy))" in message
    status, out = world.check(deployment(b), "--decision-log", world.log)
    assert status == 1 and "not confirmed by this policy" in out
