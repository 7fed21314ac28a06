"""Issue 24, round two: change control's history is per workload, and its baselines cannot be steered.

A real ``trtguard serve`` over TLS with its decision log (SQLite and PostgreSQL), and ``trtguard check
--decision-log`` on the log it wrote:

- *identity*: a Volcano ``Job`` (``batch.volcano.sh``) named like the production ``batch/v1`` Job is another
  workload. Admitting one (with an engine chain nobody approved, or a newer toolchain) neither launders the
  other's next engine nor resets its baseline; ``audit history`` and ``evidence export`` say that the name
  alone is ambiguous and take ``NAMESPACE/KIND/NAME``;
- *baselines*: an engine is compared with the engines of its workload's last admission built from the same
  ONNX model, else with all of them; renaming its volume or container to a sibling's, moving it to the task
  that ran the sibling, or first admitting a decoy beside it never picks a weaker baseline, and an honest
  rebuild of one engine of an ensemble is not compared with the other models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.trtguard.change_control_world import (
    CALIBRATION,
    INT8,
    RUNTIME,
    TRT8,
    World,
    cli,
    denial,
    make_world,
)

POLICIES = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: production-batch-jobs}
spec:
  match: {namespaces: [prod], kinds: [Job]}
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8, TensorRTMajorUpgrade]
    approvals: {keys: [committee/alice, committee/bob, committee/chen], threshold: 2}
---
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: ensembles}
spec:
  match: {namespaces: [prod], labels: {matchLabels: {app: ensemble}}}
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8, TensorRTMajorUpgrade]
    approvals: {keys: [committee/alice, committee/bob, committee/chen], threshold: 2}
"""
#: Two ONNX models: the ensemble's language model and its embedder.
LLM, EMBEDDER = {"sha256": "11" * 32}, {"sha256": "22" * 32}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from make_world(request, tmp_path, monkeypatch, POLICIES)


def pod_template(container: str, volumes: dict[str, str]) -> dict[str, Any]:
    """A pod template whose one container mounts each engine of ``volumes`` (volume name → reference)."""
    return {
        "spec": {
            "containers": [
                {
                    "name": container,
                    "image": RUNTIME,
                    "volumeMounts": [{"name": v, "mountPath": f"/models/{v}"} for v in volumes],
                }
            ],
            "volumes": [{"name": v, "image": {"reference": ref}} for v, ref in volumes.items()],
        }
    }


def batch_job(engine: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "prod"},
        "spec": {"template": pod_template("trainer", {"engine": engine})},
    }


def volcano_job(name: str, tasks: dict[str, tuple[str, dict[str, str]]], **labels: str) -> dict[str, Any]:
    """A Volcano Job: task name → (its container's name, its engines by volume name)."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "prod", "labels": labels},
        "spec": {
            "tasks": [
                {"name": task, "replicas": 1, "template": pod_template(container, volumes)}
                for task, (container, volumes) in tasks.items()
            ]
        },
    }


def approve(world: World, engine: str, change: str, audit_id: str) -> None:
    for member in ("alice", "bob"):
        world.material.approval(engine, [change], member, audit_id=audit_id)


def update(world: World, new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    return world.ask(new, operation="UPDATE", old=old)


def check_denies(world: World, obj: dict[str, Any], change: str) -> None:
    """``check --decision-log`` on the webhook's log gives the webhook's verdict."""
    status, out = world.check(obj, "--decision-log", world.log)
    [result] = json.loads(out)
    assert status == 1 and not result["allowed"], result
    assert any(v["rule"] == "changeControl" and change in v["message"] for v in result["violations"])


# --- identity: API group, kind, namespace and name --------------------------------------------------


def test_a_volcano_job_of_the_same_name_is_another_workload(world: World, tmp_path: Path) -> None:
    m = world.material
    v1 = m.engine("v1", toolchain=TRT8, audit_id="V1")  # what production ran: TensorRT 8, FP16
    v2 = m.engine("v2", audit_id="V2")  # TensorRT 10, its predecessor left out: a major upgrade
    # An INT8 chain nobody approved: b (never admitted here), c declares b.
    b = m.engine("b", builder_config=INT8, calibration=CALIBRATION, audit_id="B")
    c = m.engine(
        "c",
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=b,
        previous_manifest_digest=m.manifest_digests["b"],
        audit_id="C",
    )
    production = batch_job(v1)
    assert world.ask(production)["allowed"]

    # A Volcano Job named train: no policy selects it (the production policy names batch/v1's Job), so
    # it is admitted with any engine, and recorded with it.
    shadow = volcano_job("train", {"run": ("trainer", {"engine": b})})
    assert world.ask(shadow)["allowed"]
    # It is not production's last admission: c's predecessor b is not confirmed by it...
    message = denial(update(world, batch_job(c), production))
    assert f"gated changes [FirstInt8, TensorRTMajorUpgrade] (against last admitted engine {v1})" in message
    assert "FirstInt8 needs 2 more" in message
    check_denies(world, batch_job(c), "FirstInt8")
    # ...and a newer toolchain admitted there does not reset production's baseline.
    newer = volcano_job("train", {"run": ("trainer", {"engine": v2})})
    assert update(world, newer, shadow)["allowed"]
    message = denial(update(world, batch_job(v2), production))
    assert f"gated changes [TensorRTMajorUpgrade] (against last admitted engine {v1})" in message
    check_denies(world, batch_job(v2), "TensorRTMajorUpgrade")

    # The name alone is ambiguous now; NAMESPACE/KIND/NAME is not.
    status, _, err = cli("audit", "history", "prod/train", "--decision-log", world.log)
    assert status == 2 and "prod/train names 2 workloads" in err
    assert "prod/Job.batch/train" in err and "prod/Job.batch.volcano.sh/train" in err
    status, out, err = cli("audit", "history", "prod/Job/train", "--decision-log", world.log, "--format=json")
    assert status == 0, err
    history = json.loads(out)
    assert history["workload"] == "prod/Job.batch/train"
    assert [c["new"] for e in history["entries"] for c in e["changes"] if c["artifact"] == "engine"] == [v1]
    package = tmp_path / "evidence.tar.gz"
    export = (
        *("evidence", "export", "--decision-log", world.log, "--key", world.key, "-o", package),
        *("--attestations", m.attestations, "--policies", *world.policies),
    )
    status, _, err = cli(*export, "--workload", "prod/train")
    assert status == 2 and "names 2 workloads" in err
    status, out, err = cli(*export, "--workload", "prod/Job.batch.volcano.sh/train")
    assert status == 0, err
    assert "every decision about workload prod/Job.batch.volcano.sh/train" in out


# --- baselines: never narrowed by what the workload's author writes --------------------------------


def place(placements: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    """A Volcano Job ``ensemble`` from (task, container, volume, engine) placements."""
    tasks: dict[str, tuple[str, dict[str, str]]] = {}
    for task, container, volume, engine in placements:
        tasks.setdefault(task, (container, {}))[1][volume] = engine
    return volcano_job("ensemble", tasks, app="ensemble")


def test_baselines_cannot_be_steered_by_names_templates_or_decoys(world: World) -> None:
    m = world.material
    # The last admission: the FP16 language model on the workers, the approved INT8 embedder on the leader.
    llm = m.engine("llm", onnx=LLM, audit_id="LLM")
    embedder = m.engine("emb", onnx=EMBEDDER, builder_config=INT8, calibration=CALIBRATION, audit_id="EMB")
    approve(world, "emb", "FirstInt8", "EMB")
    # The attack: the language model quantized to INT8, never approved.
    int8_llm = m.engine("llm8", onnx=LLM, builder_config=INT8, calibration=CALIBRATION, audit_id="LLM8")
    # A decoy: an INT8 build of the embedder's model, to be admitted in a slot of its own first.
    decoy = m.engine("decoy", onnx=EMBEDDER, builder_config=INT8, calibration=CALIBRATION, audit_id="D")
    # An honest rebuild of the embedder, and a new model (another ONNX file).
    rebuilt = m.engine("emb2", onnx=EMBEDDER, builder_config=INT8, calibration=CALIBRATION, audit_id="EMB2")
    other = m.engine("other", onnx={"sha256": "33" * 32}, builder_config=INT8, calibration=CALIBRATION)
    running = place([("worker", "server", "llm", llm), ("leader", "embedder", "emb", embedder)])
    assert world.ask(running)["allowed"]  # the webhook starts: it reads the attestation folder

    attempts = {
        # Its volume renamed to the embedder's, its container to the embedder's, moved to the leader task.
        "volume renamed": [("worker", "server", "emb", int8_llm), ("leader", "embedder", "emb2", embedder)],
        "container renamed": [("worker", "embedder", "next", int8_llm), ("leader", "x", "emb", embedder)],
        "moved to the leader": [("leader", "embedder", "next", int8_llm), ("worker", "y", "emb", embedder)],
        "renamed and moved": [("leader", "embedder", "emb", int8_llm), ("worker", "server", "llm", embedder)],
    }
    for name, placements in attempts.items():
        attempt = place(placements)
        message = denial(update(world, attempt, running))
        assert f"gated changes [FirstInt8] (against last admitted engine {llm})" in message, name
        check_denies(world, attempt, "FirstInt8")

    # The decoy admitted first beside the embedder is an embedder build (compared with the embedder)...
    both = [("worker", "server", "llm", llm), ("leader", "embedder", "emb", embedder)]
    with_decoy = place([*both, ("leader", "embedder", "next", decoy)])
    assert update(world, with_decoy, running)["allowed"]
    # ...but the INT8 language model put in the decoy's slot is still compared with the language model.
    swapped = place([*both, ("leader", "embedder", "next", int8_llm)])
    message = denial(update(world, swapped, with_decoy))
    assert f"gated changes [FirstInt8] (against last admitted engine {llm})" in message
    check_denies(world, swapped, "FirstInt8")

    # An honest rebuild of the embedder (same model, same precision) is compared with the embedder builds:
    # not a FirstInt8 change against the FP16 language model.
    decoy_slot = ("leader", "embedder", "next", decoy)
    honest = place([("worker", "server", "llm", llm), ("leader", "embedder", "emb", rebuilt), decoy_slot])
    assert update(world, honest, with_decoy)["allowed"]
    status, out = world.check(honest, "--decision-log", world.log)
    assert status == 0, out
    # A new model has no build of its own model here: compared with every engine.
    novel = place([("worker", "server", "llm", other), ("leader", "embedder", "emb", rebuilt), decoy_slot])
    message = denial(update(world, novel, honest))
    assert f"gated changes [FirstInt8] (against last admitted engine {llm})" in message
