"""Policy-test helpers: real keys, real signed attestations, policy files written to a temporary folder."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from policies.schema import trusted_keys_yaml
from verifier.attestations import CHANGE_APPROVAL_PREDICATE_TYPE, ENGINE_VERIFICATION_PREDICATE_TYPE
from verifier.base._digests import sha256_bytes
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor, Statement
from verifier.crypto._keys import PrivateKey, generate_private_key
from verifier.evidence import COSIGN_SIGN_PREDICATE
from verifier.manifest import EngineBuildManifest, manifest_digest, manifest_statement
from verifier.registry.engine_artifact import engine_artifact_manifest, engine_layer

RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
OTHER_RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "b2" * 32


def manifest_data(engine: bytes = b"engine", **overrides: Any) -> dict[str, Any]:
    """A valid TensorRT 10 build manifest predicate for ``engine``, with top-level fields replaced."""
    data: dict[str, Any] = {
        "build_timestamp": "2026-10-01T12:00:00Z",
        "toolchain": {"image": RUNTIME, "tensorrt_version": "10.5.0.18", "cuda_version": "12.6.3"},
        "build_node": {
            "gpu_name": "NVIDIA H200",
            "compute_capability": "9.0",
            "driver_version": "580.159.04",
        },
        "onnx": {"sha256": "0e" * 32},
        "calibration": None,
        "builder_config": {"typing": "weak", "precision_flags": ["fp16"], "max_workspace_size": 1 << 30},
        "output_engine": {"sha256": sha256_bytes(engine), "size": len(engine), "name": "model.plan"},
        "accuracy": [{"metric": "top1_acc", "value": 0.8, "dataset": {"name": "val", "sha256": "e5" * 32}}],
        "audit_id": "AUD-1",
    }
    data.update(overrides)
    return data


@dataclass
class Material:
    """Keys, a TrustedKeys file and an attestation folder for one test."""

    root: Path
    keys: dict[str, PrivateKey] = field(default_factory=dict)
    #: engine name → manifest_digest of its signed build manifest
    manifest_digests: dict[str, str] = field(default_factory=dict)

    @property
    def attestations(self) -> Path:
        """The evidence folder."""
        folder = self.root / "attestations"
        folder.mkdir(exist_ok=True)
        return folder

    def key(self, name: str) -> PrivateKey:
        """The private key ``name`` (made on first use)."""
        if name not in self.keys:
            self.keys[name] = generate_private_key()
        return self.keys[name]

    def keys_file(self, *names: str, set_name: str = "platform") -> Path:
        """A TrustedKeys document with the public keys ``names``."""
        path = self.root / f"keys-{set_name}.yaml"
        path.write_text(trusted_keys_yaml(set_name, {name: self.key(name).public_key() for name in names}))
        return path

    def policy(self, text: str, name: str = "policy.yaml") -> Path:
        """Write a policy file (dedented) and return its path."""
        path = self.root / name
        path.write_text(textwrap.dedent(text))
        return path

    def engine(
        self, name: str, signer: str = "build-signer", *, repository: str | None = None, **overrides: Any
    ) -> str:
        """Store an engine artifact manifest and its signed build manifest; return the engine reference."""
        engine = f"engine {name}".encode()
        manifest = EngineBuildManifest.model_validate(manifest_data(engine, **overrides))
        artifact = engine_artifact_manifest(
            [engine_layer("model.plan", manifest.output_engine.sha256, len(engine))]
        )
        (self.attestations / f"{name}.oci.json").write_bytes(artifact)
        envelope = sign_envelope(PAYLOAD_TYPE, manifest_statement(manifest).to_json(), self.key(signer))
        (self.attestations / f"{name}.manifest.json").write_bytes(envelope.to_json())
        self.manifest_digests[name] = manifest_digest(envelope)
        return f"registry.example.com/models/{repository or name}@sha256:{sha256_bytes(artifact)}"

    def approval(
        self,
        engine_name: str,
        changes: list[str],
        signer: str,
        *,
        audit_id: str = "AUD-1",
        expires_at: str | None = None,
        engine_digest: str | None = None,
        subject: str | None = None,
    ) -> None:
        """A signed change approval of the engine ``engine_name`` by ``signer`` (naming ``engine_digest``
        and about ``subject``, ``sha256:…``, when given: an approval of the wrong digest)."""
        engine = sha256_bytes(f"engine {engine_name}".encode())
        predicate: dict[str, Any] = {
            "engine_digest": engine_digest or f"sha256:{engine}",
            "audit_id": audit_id,
            "changes": changes,
            "approver": f"{signer}@example.com",
            "approved_at": "2026-10-15T00:00:00Z",
        }
        if expires_at is not None:
            predicate["expires_at"] = expires_at
        self.statement(
            subject.removeprefix("sha256:") if subject else engine,
            CHANGE_APPROVAL_PREDICATE_TYPE,
            predicate,
            signer,
            f"approval-{engine_name}-{signer}-{audit_id}.json",
        )

    def statement(
        self, subject_sha256: str, predicate_type: str, predicate: dict[str, Any], signer: str, file: str
    ) -> None:
        """Sign and store any in-toto statement about ``subject_sha256``."""
        statement = Statement(
            subject=[ResourceDescriptor(name="subject", digest={"sha256": subject_sha256})],
            predicate_type=predicate_type,
            predicate=predicate,
        )
        envelope = sign_envelope(PAYLOAD_TYPE, statement.to_json(), self.key(signer))
        (self.attestations / file).write_bytes(envelope.to_json())

    def sign_image(self, reference: str, signer: str = "image-signer") -> None:
        """A cosign v3-style signing statement for the image digest of ``reference``."""
        digest = reference.split("@sha256:")[1]
        self.statement(digest, COSIGN_SIGN_PREDICATE, {}, signer, f"sig-{digest[:12]}-{signer}.json")

    def verification(self, engine_name: str, *, result: str = "pass", signer: str = "gpu-verifier") -> None:
        """A GPU verification attestation for the engine ``engine_name``."""
        engine = f"engine {engine_name}".encode()
        check = {
            "field": "output_engine.sha256",
            "status": "pass" if result == "pass" else "fail",
            "declared": sha256_bytes(engine),
            "observed": sha256_bytes(engine),
        }
        predicate = {
            "verified_at": "2026-10-02T00:00:00Z",
            "verifier": {"name": "trtguard", "version": "0.1.0"},
            "engine": {"name": "model.plan", "sha256": sha256_bytes(engine), "size": len(engine)},
            "runtime": {"module": "tensorrt_lean", "tensorrt_version": "11.4.0.106"},
            "gpu": {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.159.04"},
            "io_tensors": [],
            "checks": [check],
            "result": result,
        }
        self.statement(
            sha256_bytes(engine),
            ENGINE_VERIFICATION_PREDICATE_TYPE,
            predicate,
            signer,
            f"verify-{engine_name}.json",
        )


@pytest.fixture
def material(tmp_path: Path) -> Material:
    """Fresh keys and folders for one test."""
    return Material(tmp_path)


def pod(
    name: str = "p",
    namespace: str | None = "prod",
    *,
    images: tuple[str, ...] = (RUNTIME,),
    engine: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod with one container per image; ``engine`` becomes an image volume mounted by every container."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    containers: list[dict[str, Any]] = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    spec: dict[str, Any] = {"containers": containers}
    if engine is not None:
        spec["volumes"] = [{"name": "engine", "image": {"reference": engine}}]
        for container in containers:
            container["volumeMounts"] = [{"name": "engine", "mountPath": "/models"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


MakePod = Callable[..., dict[str, Any]]
