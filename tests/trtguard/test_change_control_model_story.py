"""Change control remembers the last build of each model a policy confirmed in a workload (attacks F1, F1b,
F1c): a real ``trtguard serve`` over TLS with its decision log, and ``trtguard check --decision-log``
beside it.

The attack: a workload runs a language model's engine and an embedder's; one UPDATE drops the language
model (only the embedder is left, confirmed unchanged); the next brings it back as INT8 or built by another
TensorRT major. Had the policy's baseline been only the engines of its last admission, the language model
would be compared with the embedder alone, and its gated changes never found. Its baseline is the last
build of its own model (its ONNX model) that the policy confirmed in the workload, however many admissions
left it out since, through rotation and restarts (policies/README.md, "Change control").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.policies.conftest import manifest_data
from tests.trtguard.change_control_world import CALIBRATION, INT8, TRT8, World, cli, denial, make_world
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.manifest import EngineBuildManifest, manifest_digest, manifest_statement

RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
LANGUAGE_MODEL, EMBEDDER = {"sha256": "1a" * 32}, {"sha256": "2b" * 32}
POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: release-control}
spec:
  match: {namespaces: [prod]}
  action: ACTION
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8, TensorRTMajorUpgrade, OnnxModelChange, DynamicShapeChange]
    approvals: {keys: [committee/alice, committee/bob, committee/chen], threshold: 2}
"""


def policy(action: str = "Deny") -> str:
    return POLICY.replace("ACTION", action)


def deployment(*engines: str) -> dict[str, Any]:
    """One container per engine, each reading its own image volume."""
    containers = [
        {"name": f"c{i}", "image": RUNTIME, "volumeMounts": [{"name": f"e{i}", "mountPath": f"/m{i}"}]}
        for i in range(len(engines))
    ]
    volumes = [{"name": f"e{i}", "image": {"reference": e}} for i, e in enumerate(engines)]
    template = {
        "metadata": {"labels": {"app": "svc"}},
        "spec": {"containers": containers, "volumes": volumes},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "svc", "namespace": "prod"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "svc"}}, "template": template},
    }


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from make_world(request, tmp_path, monkeypatch, policy())


@pytest.fixture(params=["sqlite"])
def audited(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    yield from make_world(request, tmp_path, monkeypatch, policy("Audit"))


def _approve(world: World, engine: str, changes: list[str], audit_id: str) -> None:
    for member in ("alice", "bob"):
        world.material.approval(engine, changes, member, audit_id=audit_id)


def test_an_engine_left_out_for_an_update_is_judged_against_its_own_last_build(world: World) -> None:
    m = world.material
    fp16 = m.engine("lm1", onnx=LANGUAGE_MODEL, audit_id="L1")
    embedder = m.engine("emb1", onnx=EMBEDDER, builder_config=INT8, calibration=CALIBRATION, audit_id="E1")
    int8 = m.engine("lm2", onnx=LANGUAGE_MODEL, builder_config=INT8, calibration=CALIBRATION, audit_id="L2")
    _approve(world, "emb1", ["FirstInt8"], "E1")
    v1, v2, v3 = deployment(fp16, embedder), deployment(embedder), deployment(int8, embedder)
    assert world.ask(v1)["allowed"]
    assert world.ask(v2, operation="UPDATE", old=v1)["allowed"]
    # The engine record names its model: what the next admissions keep its last build by.
    [kept] = world.last_record()["engines"]
    assert kept["model"] == EMBEDDER["sha256"] and kept["confirmed_by"] == ["release-control"]
    world.rotate()  # the admission that ran the FP16 build is pruned: the carried state keeps it
    world.restart()
    message = denial(world.ask(v3, operation="UPDATE", old=v2))
    assert "FirstInt8" in message and fp16 in message
    status, out = world.check(v3, "--decision-log", world.log)
    assert status == 1 and "FirstInt8" in out
    # Approved, it comes in; and it is the model's last build from then on.
    _approve(world, "lm2", ["FirstInt8"], "L2")
    world.restart()  # it reads the attestation folder when it starts
    assert world.ask(v3, operation="UPDATE", old=v2)["allowed"]


def test_a_major_upgrade_of_an_engine_left_out_is_found_after_rotation(world: World) -> None:
    m = world.material
    trt8 = m.engine("lm1", onnx=LANGUAGE_MODEL, toolchain=TRT8, audit_id="L1")
    embedder = m.engine("emb1", onnx=EMBEDDER, audit_id="E1")
    trt10 = m.engine("lm2", onnx=LANGUAGE_MODEL, audit_id="L2")
    v1, v2, v3 = deployment(trt8, embedder), deployment(embedder), deployment(trt10, embedder)
    assert world.ask(v1)["allowed"]
    assert world.ask(v2, operation="UPDATE", old=v1)["allowed"]
    world.rotate()
    assert world.ask(v2, operation="UPDATE", old=v2)["allowed"]  # more admissions without it
    world.rotate()
    world.restart()
    assert "TensorRTMajorUpgrade" in denial(world.ask(v3, operation="UPDATE", old=v2))
    status, out = world.check(v3, "--decision-log", world.log)
    assert status == 1 and "TensorRTMajorUpgrade" in out


def test_bringing_back_the_engine_that_ran_is_no_change(world: World) -> None:
    """F1c: the engine that ran and was confirmed comes back as it was: not an OnnxModelChange against the
    other model's engine."""
    m = world.material
    lm = m.engine("lm1", onnx=LANGUAGE_MODEL, audit_id="L1")
    embedder = m.engine("emb1", onnx=EMBEDDER, audit_id="E1")
    v1, v2, v3 = deployment(lm, embedder), deployment(embedder), deployment(lm, embedder)
    assert world.ask(v1)["allowed"]
    assert world.ask(v2, operation="UPDATE", old=v1)["allowed"]
    world.rotate()
    assert world.ask(v3, operation="UPDATE", old=v2)["allowed"]
    status, _ = world.check(v3, "--decision-log", world.log)
    assert status == 0


def test_an_engine_let_in_by_audit_beside_an_untouched_one_is_no_baseline(audited: World) -> None:
    """F1b: in Audit mode B (TRT 10) is let in unconfirmed while the embedder is confirmed unchanged; once
    enforcing, C (TRT 10) is judged against A (TRT 8), the last build of its model the policy confirmed."""
    m = audited.material
    a = m.engine("a", onnx=LANGUAGE_MODEL, toolchain=TRT8, audit_id="A")
    b = m.engine("b", onnx=LANGUAGE_MODEL, audit_id="B")
    c = m.engine("c", onnx=LANGUAGE_MODEL, audit_id="C")
    embedder = m.engine("emb", onnx=EMBEDDER, audit_id="E")
    v1, v2, v3 = deployment(a, embedder), deployment(b, embedder), deployment(c, embedder)
    assert audited.ask(v1)["allowed"]
    assert audited.ask(v2, operation="UPDATE", old=v1)["allowed"]
    audited.rotate()
    audited.replace_policy(policy())
    message = denial(audited.ask(v3, operation="UPDATE", old=v2))
    assert "TensorRTMajorUpgrade" in message and a in message


def test_check_refuses_a_manifest_without_a_namespace_when_reading_the_history(world: World) -> None:
    """F3: `check --decision-log` of a manifest that names no namespace (applied with `kubectl apply -n`)
    could read no history and allowed what the webhook denies, silently: it is an input error naming
    --namespace, and with --namespace it is judged as the webhook judges it."""
    m = world.material
    trt8 = m.engine("lm1", onnx=LANGUAGE_MODEL, toolchain=TRT8, audit_id="L1")
    trt10 = m.engine("lm2", onnx=LANGUAGE_MODEL, audit_id="L2")
    assert world.ask(deployment(trt8))["allowed"]
    unplaced = deployment(trt10)
    del unplaced["metadata"]["namespace"]
    path = m.root / "unplaced.yaml"
    path.write_text(yaml.safe_dump(unplaced))
    policies = [arg for policy in world.policies for arg in ("--policies", policy)]
    argv = ["check", *policies, "--attestations", m.attestations, "--decision-log", world.log]
    status, out, err = cli(*argv, "--format", "json", path)
    assert status == 2 and "names no namespace" in out and "--namespace" in err
    status, out, _ = cli(*argv, "--namespace", "prod", "--format", "json", path)
    assert status == 1 and "TensorRTMajorUpgrade" in out


def _accuracy(value: float) -> list[dict[str, Any]]:
    return [{"metric": "top1_acc", "value": value, "dataset": {"name": "val", "sha256": "e5" * 32}}]


@pytest.fixture(params=["sqlite"])
def accuracy_gated(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    gated = "DynamicShapeChange, AccuracyDrop]"
    text = POLICY.replace("ACTION", "Deny").replace("DynamicShapeChange]", gated)
    yield from make_world(request, tmp_path, monkeypatch, text)


@pytest.mark.parametrize("declared", [False, True], ids=["newer", "declared"])
def test_a_later_manifest_of_the_running_engine_does_not_replace_the_one_it_was_admitted_with(
    accuracy_gated: World, declared: bool
) -> None:
    """F4: a second build manifest signed later for the running engine's file (accuracy 0.55), newest by
    build time or declared by the successor as its previous manifest, is not its baseline in place of the
    one it was admitted with (0.80): the successor's AccuracyDrop is found against what was judged."""
    world = accuracy_gated
    m = world.material
    running = m.engine("a", onnx=LANGUAGE_MODEL, accuracy=_accuracy(0.80), audit_id="A")
    assert world.ask(deployment(running))["allowed"]
    [admitted] = world.last_record()["engines"]
    assert admitted["manifest"] == m.manifest_digests["a"]
    later = EngineBuildManifest.model_validate(
        manifest_data(
            b"engine a", onnx=LANGUAGE_MODEL, accuracy=_accuracy(0.55), build_timestamp="2026-10-02T12:00:00Z"
        )
    )
    envelope = sign_envelope(PAYLOAD_TYPE, manifest_statement(later).to_json(), m.key("build-signer"))
    (m.attestations / "a.manifest-2.json").write_bytes(envelope.to_json())
    extra = {"previous_manifest_digest": manifest_digest(envelope), "previous_engine": running}
    extra = extra if declared else {}
    successor = m.engine("b", onnx=LANGUAGE_MODEL, accuracy=_accuracy(0.55), audit_id="B", **extra)
    world.restart()  # it reads the attestation folder when it starts
    message = denial(world.ask(deployment(successor), operation="UPDATE", old=deployment(running)))
    assert "AccuracyDrop" in message
    status, out = world.check(deployment(successor), "--decision-log", world.log)
    assert status == 1 and "AccuracyDrop" in out


@pytest.fixture(params=["sqlite"])
def first_engine_gated(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    text = POLICY.replace("ACTION", "Deny").replace("gated: [FirstInt8,", "gated: [FirstEngine, FirstInt8,")
    yield from make_world(request, tmp_path, monkeypatch, text)


def test_a_new_identity_needs_first_engine_approvals_when_gated(first_engine_gated: World) -> None:
    """F2: a renamed workload (or a kind of the same name, another namespace) has no history, so a build
    there is judged as a first engine: only FirstInt8 could be found, and a major upgrade of what runs under
    the old name came in. With ``FirstEngine`` gated, an engine of a model the policy confirmed no build of
    in the workload needs approvals; a new build of a model it confirmed does not need them for that."""
    world = first_engine_gated
    m = world.material
    old = m.engine("v1", onnx=LANGUAGE_MODEL, toolchain=TRT8, audit_id="V1")
    rebuilt = m.engine("v1b", onnx=LANGUAGE_MODEL, toolchain=TRT8, audit_id="V1b")
    upgraded = m.engine("v2", onnx=LANGUAGE_MODEL, audit_id="V2")
    assert "FirstEngine" in denial(world.ask(deployment(old)))
    _approve(world, "v1", ["FirstEngine"], "V1")
    world.restart()  # it reads the attestation folder when it starts
    assert world.ask(deployment(old))["allowed"]
    answer = world.ask(deployment(rebuilt), operation="UPDATE", old=deployment(old))
    assert answer["allowed"], denial(answer)
    renamed = deployment(upgraded)
    renamed["metadata"]["name"] = "svc-v2"
    message = denial(world.ask(renamed))
    assert "FirstEngine" in message and "no earlier engine" in message
    status, out = world.check(renamed, "--decision-log", world.log)
    assert status == 1 and "FirstEngine" in out
