"""Each change-control policy keeps a workload's models by the build manifests its own signers signed
(attack 24 a): a real ``trtguard serve`` over TLS with its decision log, and ``trtguard check
--decision-log`` beside it.

The attack: a second policy, judged first, trusts a team's signer, whose manifests of every engine name one
ONNX model. Had the decision record kept one model per engine (the first judging policy's), the platform
policy's history would file the embedder under the language model, lose the language model's TensorRT 8
build when an UPDATE drops it, and let its TensorRT 10 rebuild in unapproved. Each confirming policy's own
model and manifest are recorded (``confirmed``) and read (policies/README.md, "Change control").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.policies.conftest import manifest_data
from tests.trtguard.change_control_world import TRT8, World, denial, make_world
from tests.trtguard.test_change_control_model_story import EMBEDDER, LANGUAGE_MODEL, deployment, policy
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.manifest import EngineBuildManifest, manifest_statement

TEAM_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: a-team}
spec:
  match: {namespaces: [prod]}
  models:
    buildManifest: {keys: [team/team-signer]}
  changeControl:
    gated: [FirstInt8, TensorRTMajorUpgrade]
    approvals: {keys: [committee/alice, committee/bob, committee/chen], threshold: 2}
"""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for found in make_world(request, tmp_path, monkeypatch, policy()):
        # The team's policy beside the platform's (named to be judged first), before the webhook starts.
        m = found.material
        extra = [m.policy(TEAM_POLICY, "team-policy.yaml"), m.keys_file("team-signer", set_name="team")]
        for path in extra:
            (m.root / "policies" / path.name).write_text(path.read_text())
        found.policies += extra
        yield found


def _team_manifest(world: World, engine: str, **overrides: Any) -> None:
    """A second build manifest of ``engine``'s file, signed by the team's signer."""
    m = world.material
    manifest = EngineBuildManifest.model_validate(manifest_data(f"engine {engine}".encode(), **overrides))
    envelope = sign_envelope(PAYLOAD_TYPE, manifest_statement(manifest).to_json(), m.key("team-signer"))
    (m.attestations / f"{engine}.team-manifest.json").write_bytes(envelope.to_json())


def test_each_policy_keeps_the_models_its_own_signers_name(world: World) -> None:
    m = world.material
    trt8 = m.engine("lm1", onnx=LANGUAGE_MODEL, toolchain=TRT8, audit_id="L1")
    embedder = m.engine("emb1", onnx=EMBEDDER, audit_id="E1")
    trt10 = m.engine("lm2", onnx=LANGUAGE_MODEL, audit_id="L2")
    for engine, audit_id in (("lm1", "L1"), ("emb1", "E1"), ("lm2", "L2")):
        _team_manifest(world, engine, onnx=LANGUAGE_MODEL, audit_id=audit_id)  # all "the language model"
    v1, v2, v3 = deployment(trt8, embedder), deployment(embedder), deployment(trt10, embedder)
    assert world.ask(v1)["allowed"]
    # Each confirming policy's own reading of the embedder is recorded, not the first judge's alone.
    _, kept = world.last_record()["engines"]
    assert kept["confirmed"] == {
        "a-team": {"model": LANGUAGE_MODEL["sha256"], "manifest": kept["confirmed"]["a-team"]["manifest"]},
        "release-control": {"model": EMBEDDER["sha256"], "manifest": m.manifest_digests["emb1"]},
    }
    assert world.ask(v2, operation="UPDATE", old=v1)["allowed"]
    [kept] = world.last_record()["engines"]  # carried unchanged: each policy's model stays its own
    assert kept["confirmed"]["release-control"]["model"] == EMBEDDER["sha256"]
    assert kept["confirmed"]["a-team"]["model"] == LANGUAGE_MODEL["sha256"]
    world.rotate()
    world.restart()
    message = denial(world.ask(v3, operation="UPDATE", old=v2))
    assert "release-control/changeControl" in message and "TensorRTMajorUpgrade" in message
    assert trt8 in message
    status, out = world.check(v3, "--decision-log", world.log)
    assert status == 1 and "TensorRTMajorUpgrade" in out
