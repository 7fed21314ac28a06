"""Issue 24, no change escapes change control: a real ``trtguard serve`` over TLS, and ``trtguard check``.

Each story runs against SQLite and PostgreSQL decision logs written by the webhook itself:

- *laundering* (item 1): a new workload whose INT8 engine declares, as its predecessor, an INT8 engine that
  nobody approved and nothing admitted is a ``FirstInt8`` change — so is every variant an attacker would try
  next (an approval of another digest, a predecessor admitted elsewhere or only in a dry run);
- *rotation* (item 2): ``audit rotate`` between every pair of admissions (and a restart, a deletion and a
  re-creation) does not make the webhook forget what ran: the major upgrade is still denied;
- *check* (item 3): ``check --decision-log`` gives the webhook's verdict; without it ``check`` says, in every
  output format, that history was not consulted.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.trtguard.change_control_world import (
    CALIBRATION,
    HISTORY_NOTE,
    INT8,
    RUNTIME,
    TRT8,
    World,
    cli,
    denial,
    make_world,
)

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


def deployment(name: str, engine: str) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": name}},
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
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template},
    }


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from make_world(request, tmp_path, monkeypatch, POLICY)


# --- item 1: laundering through a declared previous manifest ------------------------------------------


def test_an_unapproved_predecessor_does_not_launder_a_first_int8_engine(world: World) -> None:
    m = world.material
    a = m.engine("a", builder_config=INT8, calibration=CALIBRATION, audit_id="AUD-A")
    for member in ("alice", "bob"):
        m.approval("a", ["FirstInt8"], member, audit_id="AUD-A")
    b = m.engine(
        "b",
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=a,
        previous_manifest_digest=m.manifest_digests["a"],
        audit_id="AUD-B",
    )
    c = m.engine(
        "c",
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=b,
        previous_manifest_digest=m.manifest_digests["b"],
        audit_id="AUD-C",
    )
    # An approval of the wrong digest (C's, under B's audit ID) and one of other kinds (B's) confirm nothing.
    m.approval("c", ["FirstInt8"], "alice", audit_id="AUD-B")
    m.approval("b", ["TensorRTMajorUpgrade"], "bob", audit_id="AUD-B")
    m.approval("b", ["TensorRTMajorUpgrade"], "chen", audit_id="AUD-B")

    # The attack: a new workload whose INT8 engine declares B, which nobody approved and nothing admitted.
    message = denial(world.ask(deployment("shadow", c)))
    assert "gated changes [FirstInt8] (against no earlier engine)" in message
    assert f"declared previous manifest {m.manifest_digests['b']} is not confirmed" in message
    status, out = world.check(deployment("shadow", c))
    assert status == 1 and json.loads(out)[0]["allowed"] is False
    # B admitted in a dry run, and for real in another workload: neither confirms it for this one.
    assert world.ask(deployment("shadow", b), dry_run=True)["allowed"]
    assert world.ask(deployment("resnet", b))["allowed"]  # B declares A, approved: a confirmed baseline
    assert "FirstInt8 needs 2 more" in denial(world.ask(deployment("shadow", c)))
    # Where B is the last admitted engine, C is judged against B alone: admitted.
    update = world.ask(deployment("resnet", c), operation="UPDATE", old=deployment("resnet", b))
    assert update["allowed"], update
    # `check` sees that only with the webhook's history; without it, the safe verdict and a note.
    status, out = world.check(deployment("resnet", c), "--decision-log", world.log)
    [result] = json.loads(out)
    assert status == 0 and result["allowed"] and HISTORY_NOTE not in " ".join(result["notes"])
    status, out = world.check(deployment("resnet", c))
    [result] = json.loads(out)
    assert status == 1 and not result["allowed"]
    assert any(HISTORY_NOTE in note for note in result["notes"])
    assert any("cannot be confirmed as admitted here without the decision log" in n for n in result["notes"])


# --- item 2: rotation between every pair of admissions --------------------------------------------------


def test_rotation_between_admissions_does_not_forget_what_ran(world: World) -> None:
    m = world.material
    v1 = m.engine("v1", toolchain=TRT8, audit_id="V1")
    v2 = m.engine(
        "v2",
        toolchain=TRT8,
        builder_config=INT8,
        calibration=CALIBRATION,
        previous_engine=v1,
        previous_manifest_digest=m.manifest_digests["v1"],
        audit_id="V2",
    )
    for member in ("alice", "bob"):
        m.approval("v2", ["FirstInt8"], member, audit_id="V2")
    # v3: TensorRT 10, its predecessor left out; approved as an INT8 engine, never for the major upgrade.
    v3 = m.engine("v3", builder_config=INT8, calibration=CALIBRATION, audit_id="V3")
    for member in ("alice", "chen"):
        m.approval("v3", ["FirstInt8"], member, audit_id="V3")
    first, second, third = (deployment("resnet", v) for v in (v1, v2, v3))

    assert world.ask(first)["allowed"]
    world.rotate()
    assert world.ask(second, operation="UPDATE", old=first)["allowed"]
    world.rotate()
    message = denial(world.ask(third, operation="UPDATE", old=second))
    assert f"gated changes [TensorRTMajorUpgrade] (against last admitted engine {v2})" in message
    # A restart, a deletion and a re-creation, each after rotating: the webhook still knows v2 ran.
    world.rotate()
    world.restart()
    assert "TensorRTMajorUpgrade" in denial(world.ask(third, operation="UPDATE", old=second))
    assert world.ask(second, operation="DELETE", old=second)["allowed"]
    world.rotate()
    assert "TensorRTMajorUpgrade" in denial(world.ask(third))
    world.rotate()
    # The denial names the carried admission of v2 as its baseline's, and `audit verify` vouches for it.
    status, out, err = cli("audit", "verify", "--decision-log", world.log, "--format", "json")
    assert status == 0 and json.loads(out)["problems"] == [], out + err
    status, out, err = cli("audit", "history", "prod/resnet", "--decision-log", world.log, "--format", "json")
    assert status == 0, err
    history = json.loads(out)
    [carried] = history["carried"][0]["admissions"][0]["engines"]
    assert carried["reference"] == v2 and carried["confirmed_by"] == ["change-control"]

    # --- item 3: check agrees with the webhook only with its history, and says so without it.
    status, out = world.check(third, "--decision-log", world.log)
    [result] = json.loads(out)
    assert status == 1 and any(v["rule"] == "changeControl" for v in result["violations"])
    assert "TensorRTMajorUpgrade" in " ".join(v["message"] for v in result["violations"])
    status, out = world.check(third)
    [result] = json.loads(out)
    assert status == 0 and result["allowed"]  # judged as a first engine: FirstInt8, approved
    assert any(HISTORY_NOTE in note for note in result["notes"])


def test_check_says_history_was_not_consulted_in_every_format(world: World) -> None:
    ref = world.material.engine("v1", toolchain=TRT8)
    obj = deployment("resnet", ref)
    assert world.ask(obj)["allowed"]  # the webhook writes its log
    _, table = world.check(obj, fmt="table")
    assert f"  note: {HISTORY_NOTE}" in table
    _, junit = world.check(obj, fmt="junit")
    system_out = ET.fromstring(junit).find("testsuite/testcase/system-out")
    assert system_out is not None and HISTORY_NOTE in (system_out.text or "")
    _, sarif = world.check(obj, fmt="sarif")
    [result] = json.loads(sarif)["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("trtguard/history-not-consulted", "note")
    _, document = world.check(obj, fmt="json")
    assert any(HISTORY_NOTE in note for note in json.loads(document)[0]["notes"])
    for fmt in ("table", "junit", "sarif", "json"):
        assert HISTORY_NOTE not in world.check(obj, "--decision-log", world.log, fmt=fmt)[1], fmt
    # A workload no change control selects gets no such note.
    other = dict(obj, metadata={"name": "resnet", "namespace": "dev"})
    assert HISTORY_NOTE not in world.check(other, fmt="table")[1]
