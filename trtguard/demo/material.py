"""Signed material for the scripted demo: fresh keys, the bundled policies, engine artifacts and attestations.

Everything is generated on the spot with the project's own signing code (``verifier.crypto``,
``verifier.manifest``), so the demo shows real signatures being checked. The private keys are discarded.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import policies
from policies.schema import trusted_keys_yaml
from verifier.attestations import CHANGE_APPROVAL_PREDICATE_TYPE
from verifier.base import sha256_bytes
from verifier.crypto import (
    PAYLOAD_TYPE,
    Envelope,
    ResourceDescriptor,
    Statement,
    generate_private_key,
    sign_envelope,
)
from verifier.evidence import COSIGN_SIGN_PREDICATE
from verifier.manifest import EngineBuildManifest, manifest_digest, manifest_statement
from verifier.registry.engine_artifact import engine_artifact_manifest, engine_layer

#: Where the bundled example policies live (shipped inside the ``policies`` package).
LIBRARY: Final = Path(policies.__file__).resolve().parent / "library"

ENGINE_REGISTRY: Final = "registry.example.com/models"
#: The TensorRT runtime image: allow-listed, pinned, signed; also the toolchain the engines were built with.
TENSORRT_IMAGE: Final = "nvcr.io/nvidia/tensorrt@sha256:" + sha256_bytes(b"trtguard demo tensorrt image")
#: Signed and pinned, but not on the allow-list of TensorRT images.
OFF_LIST_IMAGE: Final = "docker.io/library/nginx@sha256:" + sha256_bytes(b"trtguard demo nginx image")
#: On the allow-list, but by tag only.
UNPINNED_IMAGE: Final = "nvcr.io/nvidia/tensorrt:25.01-py3"
#: Allow-listed, pinned and signed sidecars (metrics exporter, log shipper).
SIDECAR_IMAGES: Final = tuple(
    f"registry.example.com/inference/{name}@sha256:" + sha256_bytes(f"trtguard demo {name} image".encode())
    for name in ("metrics-exporter", "log-shipper")
)

#: Change control in the ``release`` namespace, with the demo's two committee keys (no library policy
#: selects that namespace, so only this one judges it: the adversarial corpus's change-control cases).
RELEASE_POLICY: Final = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: release-change-control}
spec:
  match: {namespaces: [release]}
  models:
    buildManifest: {keys: [platform/build-signer]}
  changeControl:
    gated: [FirstInt8, TensorRTMajorUpgrade]
    approvals: {keys: [platform/committee-a, platform/committee-b], threshold: 2}
"""

_CALIBRATION: Final = {
    "dataset": {
        "sha256": sha256_bytes(b"calibration images"),
        "sampling": "1,000 images, stratified by class",
    },
    "cache": {"sha256": sha256_bytes(b"calibration cache"), "algorithm": "EntropyCalibration2"},
}


@dataclass(frozen=True, slots=True)
class Material:
    """Paths and references of the generated demo material."""

    policies: Path
    attestations: Path
    engines: Mapping[str, str]
    """Engine name → ``registry.example.com/models/<name>@sha256:…``."""


def make_material(folder: Path, *, library: Path = LIBRARY, now: datetime | None = None) -> Material:
    """Write keys + policies to ``folder/policies`` and attestations to ``folder/attestations``.

    Engines: ``fp16`` (signed, admitted), ``int8-uncalibrated`` (signed, INT8 without calibration
    evidence), ``int8-calibrated`` (signed, with calibration evidence, and two committee approvals of its
    FirstInt8), ``unsigned`` (a build manifest with no signature); for the ``release`` namespace's change
    control (:data:`RELEASE_POLICY`): ``int8-shadow`` (INT8, never approved), ``int8-laundered`` (INT8,
    declaring ``int8-shadow`` as its predecessor) and ``int8-successor`` (INT8, declaring
    ``int8-calibrated``).
    """
    now = now or datetime.now(UTC)
    policies = folder / "policies"
    attestations = folder / "attestations"
    for target in (policies, attestations):
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
    # The starter library as the image ships it (the templates to copy are in
    # policies/workload_model/_templates).
    for source in sorted(library.glob("*.yaml")):
        shutil.copy(source, policies / source.name)

    image_signer, build_signer, gpu_verifier = (generate_private_key() for _ in range(3))
    committee = {name: generate_private_key() for name in ("committee-a", "committee-b")}
    signers = {
        "image-signer": image_signer,
        "build-signer": build_signer,
        "gpu-verifier": gpu_verifier,
        **committee,
    }
    (policies / "keys.yaml").write_text(
        trusted_keys_yaml(
            "platform",
            {name: key.public_key() for name, key in signers.items()},
            comment="Demo keys, generated for this run; the private keys were discarded.",
        )
    )

    engines: dict[str, str] = {}
    digests: dict[str, str] = {}
    built = (now - timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    int8 = {"builder_config": {"precision_flags": ["fp16", "int8"]}, "calibration": _CALIBRATION}

    def successor(of: str) -> dict[str, Any]:
        return {**int8, "previous_engine": engines[of], "previous_manifest_digest": digests[of]}

    for name, overrides, signer in (
        ("fp16", lambda: {}, build_signer),
        (
            "int8-uncalibrated",
            lambda: {"builder_config": {"precision_flags": ["fp16", "int8"]}},
            build_signer,
        ),
        ("int8-calibrated", lambda: int8, build_signer),
        ("unsigned", lambda: {}, None),
        ("int8-shadow", lambda: int8, build_signer),
        ("int8-laundered", lambda: successor("int8-shadow"), build_signer),
        ("int8-successor", lambda: successor("int8-calibrated"), build_signer),
    ):
        manifest = EngineBuildManifest.model_validate(_manifest_fields(name, built, overrides()))
        engine = manifest.output_engine
        artifact = _artifact_manifest(engine.sha256, engine.size, engine.name)
        (attestations / f"engine-{name}.oci-manifest.json").write_bytes(artifact)
        payload = manifest_statement(manifest).to_json()
        envelope = (
            sign_envelope(PAYLOAD_TYPE, payload, signer) if signer else Envelope(PAYLOAD_TYPE, payload, ())
        )
        (attestations / f"engine-{name}.build-manifest.dsse.json").write_bytes(envelope.to_json() + b"\n")
        engines[name] = f"{ENGINE_REGISTRY}/{name}@sha256:{sha256_bytes(artifact)}"
        digests[name] = manifest_digest(envelope)
        if name == "int8-calibrated":  # the committee approved its first INT8 (change control in `release`)
            for member, key in committee.items():
                approval = {
                    "engine_digest": f"sha256:{engine.sha256}",
                    "audit_id": manifest.audit_id,
                    "changes": ["FirstInt8"],
                    "approver": f"{member}@example.com",
                    "approved_at": built,
                }
                statement = Statement(
                    subject=[ResourceDescriptor(digest={"sha256": engine.sha256})],
                    predicate_type=CHANGE_APPROVAL_PREDICATE_TYPE,
                    predicate=approval,
                )
                signed_approval = sign_envelope(PAYLOAD_TYPE, statement.to_json(), key)
                (attestations / f"approval-{name}-{member}.dsse.json").write_bytes(signed_approval.to_json())
    (policies / "release-change-control.yaml").write_text(RELEASE_POLICY)

    signed = (
        ("tensorrt", TENSORRT_IMAGE),
        ("nginx", OFF_LIST_IMAGE),
        ("sidecar-0", SIDECAR_IMAGES[0]),
        ("sidecar-1", SIDECAR_IMAGES[1]),
    )
    for label, image in signed:
        digest = image.split("@sha256:")[1]
        statement = Statement(
            subject=[ResourceDescriptor(digest={"sha256": digest})], predicate_type=COSIGN_SIGN_PREDICATE
        )
        envelope = sign_envelope(PAYLOAD_TYPE, statement.to_json(), image_signer)
        (attestations / f"image-{label}.cosign-sign.dsse.json").write_bytes(envelope.to_json() + b"\n")
    return Material(policies, attestations, engines)


def _manifest_fields(name: str, built: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    engine = f"trtguard demo engine {name}\n".encode()
    fields: dict[str, Any] = {
        "build_timestamp": built,
        "toolchain": {"image": TENSORRT_IMAGE, "tensorrt_version": "10.5.0.18", "cuda_version": "12.6.3"},
        "build_node": {
            "gpu_name": "NVIDIA H200",
            "compute_capability": "9.0",
            "driver_version": "580.159.04",
        },
        "onnx": {"sha256": sha256_bytes(b"onnx " + name.encode()), "name": "resnet50.onnx"},
        "calibration": None,
        "builder_config": {"typing": "weak", "precision_flags": ["fp16"], "max_workspace_size": 1 << 30},
        "output_engine": {"sha256": sha256_bytes(engine), "size": len(engine), "name": f"{name}.plan"},
        "accuracy": [
            {
                "metric": "top1_acc",
                "value": 0.78,
                "dataset": {"name": "imagenet-val", "sha256": sha256_bytes(b"imagenet-val")},
            }
        ],
        "audit_id": f"DEMO-{name}",
    }
    for key, value in overrides.items():
        fields[key] = {**fields[key], **value} if isinstance(fields.get(key), dict) else value
    return fields


def _artifact_manifest(engine_sha256: str, size: int, name: str) -> bytes:
    return engine_artifact_manifest([engine_layer(name, engine_sha256, size)])
