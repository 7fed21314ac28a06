"""Layer smuggling: an engine file nobody signed must not run under another engine's build manifest.

An engine artifact mounts every layer as a file. Only its engine layer L (and the artifact digest D) may find
statements about the engine, a build manifest must describe L and record the other files as its inputs, and
``attach-attestation`` refuses what the evaluator would not count. Each attack runs offline (``check
--attestations``), against a real registry (``check --registry``) and through the policy engine; the same
attacks through ``trtguard serve`` are in ``tests/webhook/test_verdict_order.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from tests.policies.conftest import Material, manifest_data
from tests.policies.registry_world import (
    EVIL_ENGINE,
    GOOD_ENGINE,
    World,
    attach_cli,
    build_envelope,
    check_registry,
    make_world,
    park,
    pod,
    push_engine_cli,
    run_cli,
    sign_image,
    write_files,
)
from tests.support.images import push_image, tiny_image
from tests.support.localregistry import LocalRegistry, start_registry
from trtguard.release.publish import RegistryWriter
from verifier.attestations import CHANGE_APPROVAL_PREDICATE_TYPE, ENGINE_VERIFICATION_PREDICATE_TYPE
from verifier.base._deadline import Deadline
from verifier.base._digests import sha256_bytes
from verifier.base._references import ImageReference
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor, Statement
from verifier.evidence_folder import LocalEvidence
from verifier.registry._oci import (
    EMPTY_DESCRIPTOR,
    EMPTY_JSON,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    image_index,
    image_manifest,
)
from verifier.registry.client import RegistryClient
from verifier.registry.engine_artifact import (
    CALIBRATION_CACHE_LAYER,
    ENGINE_LAYER,
    ONNX_LAYER,
    engine_artifact_manifest,
    engine_layer,
)

GOOD = sha256_bytes(GOOD_ENGINE)
EVIL = sha256_bytes(EVIL_ENGINE)
RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32

ENGINES_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: engines}
spec:
  match: {namespaces: [prod]}
  models:
    required: true
    MODELS_RULE
"""
BUILD_MANIFEST = "buildManifest: {keys: [platform/build-signer]}"
VERIFICATION = "verification: {keys: [platform/gpu-verifier]}"


# --- offline: check --attestations ------------------------------------------------------------------------


def _artifact(material: Material, *layers: tuple[str, str, str]) -> str:
    """Store an engine artifact manifest of ``(file name, sha256, media type)`` layers; its reference."""
    data = engine_artifact_manifest([engine_layer(name, digest, 1024, kind) for name, digest, kind in layers])
    (material.attestations / f"artifact-{sha256_bytes(data)[:12]}.oci.json").write_bytes(data)
    return f"registry.example.com/models/resnet@sha256:{sha256_bytes(data)}"


def _good_manifest(material: Material, *, also_about: tuple[str, ...] = (), **overrides: Any) -> None:
    envelope = build_envelope(material.key("build-signer"), GOOD_ENGINE, also_about=also_about, **overrides)
    (material.attestations / f"manifest-{sha256_bytes(envelope)[:12]}.json").write_bytes(envelope)


def _check_offline(
    material: Material, engine: str, rule: str = BUILD_MANIFEST, *, policy_text: str | None = None
) -> tuple[int, dict[str, Any]]:
    policy = material.policy(policy_text or ENGINES_POLICY.replace("MODELS_RULE", rule))
    keys = material.keys_file("build-signer", "gpu-verifier")
    resource = material.root / "pod.yaml"
    resource.write_text(yaml.safe_dump(pod(RUNTIME, engine)))
    status, out, err = run_cli(
        "check", "--policies", policy, "--policies", keys, "--attestations", material.attestations,
        "--format", "json", resource,
    )  # fmt: skip
    assert status in (0, 1), err
    [result] = json.loads(out)
    return status, result


def _only_violation(result: dict[str, Any]) -> dict[str, Any]:
    [violation] = result["violations"]
    return dict(violation)


@pytest.mark.parametrize("smuggled_as", [ONNX_LAYER, CALIBRATION_CACHE_LAYER])
def test_offline_an_unsigned_engine_beside_a_signed_one_is_denied(
    material: Material, smuggled_as: str
) -> None:
    # The artifact's engine layer is a file nobody signed; the signed engine rides along as its ONNX model
    # (or calibration cache), whose digest used to find the signed engine's build manifest.
    engine = _artifact(material, ("model.plan", EVIL, ENGINE_LAYER), ("extra", GOOD, smuggled_as))
    _good_manifest(material)
    status, result = _check_offline(material, engine)
    assert status == 1
    violation = _only_violation(result)
    assert violation["rule"] == "models.buildManifest"
    assert "no build manifest attestation found" in violation["message"]  # L_good finds nothing any more


def test_offline_a_statement_about_the_artifact_must_still_describe_its_engine_layer(
    material: Material,
) -> None:
    # The signer named the artifact digest, but said its engine is another file: contradictory, refused.
    engine = _artifact(material, ("model.plan", EVIL, ENGINE_LAYER))
    _good_manifest(material, also_about=(engine.split("@")[1],))
    status, result = _check_offline(material, engine)
    assert status == 1
    violation = _only_violation(result)
    assert (
        f"describes the engine file sha256:{GOOD}, not the engine layer sha256:{EVIL}" in violation["message"]
    )
    assert "ONNX" in violation["fix"]


def test_offline_files_beside_the_engine_must_be_the_inputs_its_manifest_records(material: Material) -> None:
    # The signed engine is the engine layer, but under the ONNX file name; the unsigned engine is the ONNX
    # layer named model.plan, which is what the server loads from the volume.
    swapped = _artifact(material, ("model.onnx", GOOD, ENGINE_LAYER), ("model.plan", EVIL, ONNX_LAYER))
    _good_manifest(material)
    status, result = _check_offline(material, swapped)
    assert status == 1
    violation = _only_violation(result)
    assert f"carries the file sha256:{EVIL} beside its engine" in violation["message"]
    assert f"onnx.sha256 = sha256:{'0e' * 32}" in violation["message"]
    # The same layout with the ONNX model the manifest records is admitted.
    model = b"the ONNX model"
    honest = _artifact(
        material, ("model.plan", GOOD, ENGINE_LAYER), ("model.onnx", sha256_bytes(model), ONNX_LAYER)
    )
    _good_manifest(material, onnx={"sha256": sha256_bytes(model)})
    assert _check_offline(material, honest)[0] == 0


def test_offline_an_extra_file_beside_a_signed_engine_is_a_violation_not_an_error(material: Material) -> None:
    # A malformed engine artifact is a definitive answer about the artifact, not a failure to check it:
    # a policy that lets unavailable evidence pass (onError: Warn) must not let the extra file in.
    data = engine_artifact_manifest(
        [
            engine_layer("model.plan", GOOD, 1024),
            engine_layer("plugin.so", EVIL, 1024, "application/x-sharedlib"),
        ]
    )
    (material.attestations / "artifact.oci.json").write_bytes(data)
    _good_manifest(material)
    engine = f"registry.example.com/models/resnet@sha256:{sha256_bytes(data)}"
    policy = ENGINES_POLICY.replace("MODELS_RULE", BUILD_MANIFEST).replace(
        "  models:", "  onError: Warn\n  models:"
    )
    status, result = _check_offline(material, engine, policy_text=policy)
    assert status == 1
    violation = _only_violation(result)
    assert (violation["rule"], violation["action"], violation["error"]) == (
        "models.buildManifest",
        "Deny",
        False,
    )
    assert "not a well-formed engine artifact" in violation["message"]


def test_offline_a_gpu_verification_of_a_smuggled_engine_does_not_count(material: Material) -> None:
    # A policy that asks for a GPU verification only: the signed engine's verification, found through the
    # ONNX layer, used to pass for the unsigned engine layer.
    engine = _artifact(material, ("model.plan", EVIL, ENGINE_LAYER), ("model.onnx", GOOD, ONNX_LAYER))
    _verification(material, GOOD, subjects=(GOOD,))
    status, result = _check_offline(material, engine, VERIFICATION)
    assert status == 1
    assert _only_violation(result)["rule"] == "models.verification"
    # About the engine layer, it counts.
    _verification(material, EVIL, subjects=(EVIL,))
    assert _check_offline(material, engine, VERIFICATION)[0] == 0


def _verification(material: Material, engine_sha256: str, *, subjects: tuple[str, ...]) -> None:
    predicate = {
        "verified_at": "2026-10-02T00:00:00Z",
        "verifier": {"name": "trtguard", "version": "0.1.0"},
        "engine": {"name": "model.plan", "sha256": engine_sha256, "size": 1024},
        "runtime": {"module": "tensorrt_lean", "tensorrt_version": "11.4.0.106"},
        "gpu": {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.159.04"},
        "io_tensors": [],
        "checks": [],
        "result": "pass",
    }
    _statement(material, ENGINE_VERIFICATION_PREDICATE_TYPE, predicate, subjects, "gpu-verifier")


def _statement(
    material: Material, predicate_type: str, predicate: dict[str, Any], subjects: tuple[str, ...], signer: str
) -> None:
    statement = Statement(
        subject=[ResourceDescriptor(digest={"sha256": s.removeprefix("sha256:")}) for s in subjects],
        predicate_type=predicate_type,
        predicate=predicate,
    )
    envelope = sign_envelope(PAYLOAD_TYPE, statement.to_json(), material.key(signer)).to_json()
    (material.attestations / f"statement-{sha256_bytes(envelope)[:12]}.json").write_bytes(envelope)


def test_offline_without_the_artifact_manifest_only_a_statement_naming_the_artifact_counts(
    material: Material,
) -> None:
    # The folder lacks the artifact's OCI manifest, so which layer is the engine is unknown: a manifest
    # about some engine file cannot be tied to this artifact.
    artifact = engine_artifact_manifest([engine_layer("model.plan", GOOD, 1024)])
    engine = f"registry.example.com/models/resnet@sha256:{sha256_bytes(artifact)}"
    _good_manifest(material)
    status, result = _check_offline(material, engine)
    assert status == 1
    violation = _only_violation(result)
    assert "the engine layer of" in violation["message"] and "is unknown" in violation["message"]
    assert "holds no engine artifact manifest" in violation["message"]
    assert "OCI manifest" in violation["fix"]
    # A manifest whose signer named the artifact digest itself vouches for exactly those bytes.
    _good_manifest(material, also_about=(engine.split("@")[1],))
    assert _check_offline(material, engine)[0] == 0


def test_an_approval_must_be_about_the_engine_layer(material: Material) -> None:
    engine = _artifact(material, ("model.plan", GOOD, ENGINE_LAYER))
    digest = engine.split("@")[1]
    for about in (GOOD, EVIL):  # found through the artifact digest, about the engine layer or another file
        approval = {
            "engine_digest": f"sha256:{about}",
            "audit_id": "AUD-1",
            "changes": ["FirstInt8"],
            "approver": "alice@example.com",
            "approved_at": "2026-10-15T00:00:00Z",
        }
        _statement(material, CHANGE_APPROVAL_PREDICATE_TYPE, approval, (digest, about), "alice")
    policy = material.policy(ENGINES_POLICY.replace("MODELS_RULE", BUILD_MANIFEST))
    keys = [material.keys_file("build-signer"), material.keys_file("alice", set_name="committee")]
    engine_ = PolicyEvaluator(load_policy_set([policy, *keys]), LocalEvidence(material.attestations))
    ref = ImageReference.parse(engine)

    async def approvals() -> set[str]:
        found = await engine_.verified.approvals(
            ref, ["committee/alice"], lambda: engine_.evidence.attestations(ref, Deadline.never())
        )
        return {a.approval.engine_digest for a in found}

    assert asyncio.run(approvals()) == {f"sha256:{GOOD}"}


# --- a real registry: push-engine, attach-attestation, check --registry ----------------------------------


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path_factory.mktemp("smuggling-registry"), http={}, auth=None)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def world(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(registry, tmp_path_factory.mktemp("smuggling-world"))


def _signed_runtime(world: World) -> str:
    """A runtime image the policy admits (signed), so that only the engine decides."""

    async def push(client: RegistryClient) -> str:
        ref = world.ref("inference/server:v1")
        pinned = ref.with_digest(await push_image(client, ref, tiny_image("smuggling runtime")))
        await sign_image(client, pinned, world.keys["image-signer"])
        return str(pinned)

    return world.in_registry(push)


def test_registry_push_engine_with_the_signed_engine_as_its_onnx_model(world: World, tmp_path: Path) -> None:
    """The issue's reproduction: ``push-engine evil.plan --onnx signed.plan`` + the signed manifest."""
    files = write_files(tmp_path, evil_plan=EVIL_ENGINE, signed_plan=GOOD_ENGINE)
    manifest = build_envelope(world.keys["build-signer"], GOOD_ENGINE)
    runtime = _signed_runtime(world)
    for via in ("att", "referrer"):
        evil = push_engine_cli(
            world, f"models/evil-{via}", files["evil_plan"], "--onnx", files["signed_plan"]
        )
        status, err = attach_cli(world, manifest, evil, f"smuggle-{via}")
        assert status == 2, err
        assert f"the attestation is about sha256:{GOOD}, not about {evil.name}@{evil.digest}" in err
        assert f"or its engine file sha256:{EVIL}" in err
        # Parked anyway, as the attacker's own client would: the .att tag, or a referrer only.
        world.in_registry(lambda client, evil=evil, via=via: park(client, evil, manifest, via=via))  # type: ignore[misc]
        status, result = check_registry(world, pod(runtime, str(evil)), tmp_path / via)
        assert status == 1, result
        violation = _only_violation(result)
        assert violation["rule"] == "models.buildManifest"
        assert violation["message"] == "no build manifest attestation found (registry)"


def test_registry_files_beside_the_engine_must_be_its_manifests_inputs(world: World, tmp_path: Path) -> None:
    swapped = write_files(tmp_path, model_onnx=GOOD_ENGINE, model_plan=EVIL_ENGINE)
    engine = push_engine_cli(world, "models/swapped", swapped["model_onnx"], "--onnx", swapped["model_plan"])
    manifest = build_envelope(world.keys["build-signer"], GOOD_ENGINE)
    status, err = attach_cli(world, manifest, engine, "swapped")
    assert status == 2, err
    assert f"carries the file sha256:{EVIL} beside its engine" in err
    world.in_registry(lambda client: park(client, engine, manifest))
    status, result = check_registry(world, pod(_signed_runtime(world), str(engine)), tmp_path)
    assert status == 1
    assert "beside its engine" in _only_violation(result)["message"]


def test_registry_an_index_over_a_signed_engine_is_not_that_engine(world: World, tmp_path: Path) -> None:
    # An index picks a platform manifest at pull time: the statements of one of its children, or a
    # manifest about an engine file parked on the index, say nothing about what the index resolves to.
    files = write_files(tmp_path, good_plan=GOOD_ENGINE)
    child = push_engine_cli(world, "models/indexed", files["good_plan"])
    manifest = build_envelope(world.keys["build-signer"], GOOD_ENGINE)
    assert attach_cli(world, manifest, child, "indexed")[0] == 0

    async def index(client: RegistryClient) -> ImageReference:
        ref = world.ref("models/indexed:index")
        pushed = await client.get_manifest(child, Deadline.after(10))
        entry = Descriptor(
            OCI_MANIFEST, pushed.digest, len(pushed.data), platform={"os": "linux", "architecture": "amd64"}
        )
        made = await RegistryWriter(client).push_manifest(
            ref, image_index([entry]), OCI_INDEX, Deadline.after(10), tag="index"
        )
        pinned = ref.with_digest(made.digest)
        await park(client, pinned, manifest)
        return pinned

    pinned = world.in_registry(index)
    status, err = attach_cli(world, manifest, pinned, "index")
    assert status == 2 and "not about" in err
    status, result = check_registry(world, pod(_signed_runtime(world), str(pinned)), tmp_path)
    assert status == 1
    assert "no build manifest attestation found" in _only_violation(result)["message"]


@pytest.mark.parametrize(
    "artifact_type", ["Application/vnd.trtguard.engine.v1", " application/vnd.trtguard.engine.v1"]
)
def test_registry_an_engine_artifact_type_in_another_spelling_is_refused(
    world: World, tmp_path: Path, artifact_type: str
) -> None:
    manifest = build_envelope(world.keys["build-signer"], GOOD_ENGINE)

    async def push(client: RegistryClient) -> ImageReference:
        ref = world.ref("models/spelled:v1")
        deadline, writer = Deadline.after(10), RegistryWriter(client)
        await writer.push_blob(ref, EMPTY_JSON, EMPTY_DESCRIPTOR.media_type, deadline)
        layer = await writer.push_blob(ref, GOOD_ENGINE, ENGINE_LAYER, deadline)
        titled = engine_layer("model.plan", layer.digest.removeprefix("sha256:"), layer.size)
        data = image_manifest(config=EMPTY_DESCRIPTOR, layers=[titled], artifact_type=artifact_type)
        pushed = await writer.push_manifest(ref, data, OCI_MANIFEST, deadline, tag="v1")
        pinned = ref.with_digest(pushed.digest)
        await park(client, pinned, manifest)
        return pinned

    pinned = world.in_registry(push)
    status, err = attach_cli(world, manifest, pinned, "spelled")
    assert status == 1 and "not exactly application/vnd.trtguard.engine.v1" in err
    status, result = check_registry(world, pod(_signed_runtime(world), str(pinned)), tmp_path)
    assert status == 1
    violation = _only_violation(result)
    assert (violation["rule"], violation["error"]) == ("models.buildManifest", False)
    assert "not a well-formed engine artifact" in violation["message"]


def test_registry_a_statement_about_a_sha512_digest_only_is_about_nothing_here(
    world: World, tmp_path: Path
) -> None:
    files = write_files(tmp_path, good_plan=GOOD_ENGINE)
    engine = push_engine_cli(world, "models/sha512", files["good_plan"])
    statement = Statement(
        subject=[ResourceDescriptor(name="model.plan", digest={"sha512": "ab" * 64})],
        predicate_type="https://trtguard.dev/attestations/engine-build/v1",
        predicate=manifest_data(GOOD_ENGINE),
    )
    envelope = sign_envelope(PAYLOAD_TYPE, statement.to_json(), world.keys["build-signer"]).to_json()
    status, err = attach_cli(world, envelope, engine, "sha512")
    assert status == 2 and "about no sha256 digest" in err
    world.in_registry(lambda client: park(client, engine, envelope))
    status, result = check_registry(world, pod(_signed_runtime(world), str(engine)), tmp_path)
    assert status == 1
    assert "no build manifest attestation found" in _only_violation(result)["message"]
