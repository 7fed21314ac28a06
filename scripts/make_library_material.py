"""Regenerate the signed test material of the policy library's test suites.

Writes ``policies/library/tests/keys.yaml`` (fresh TEST-ONLY public keys; the private keys are thrown away)
and ``policies/library/tests/attestations/`` (engine artifact manifests, signed build manifests, image signing
statements, and SBOM and vulnerability-scan attestations made from the real pip-audit and cyclonedx-py
output in tests/data). Engine bytes, manifests and image digests are fixed, so every digest that the
hand-written ``resources.yaml`` files name stays the same across runs; only the signatures change.

Usage: ``.venv/bin/python scripts/make_library_material.py``
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from policies.schema import trusted_keys_yaml
from verifier.base._digests import sha256_bytes
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor, Statement
from verifier.crypto._keys import generate_private_key
from verifier.evidence import COSIGN_SIGN_PREDICATE
from verifier.manifest import EngineBuildManifest, manifest_statement
from verifier.registry.engine_artifact import engine_artifact_manifest, engine_layer

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "policies" / "library" / "tests"
DATA = REPO / "tests" / "data"

#: Fixed image digests used by the library's test resources.
IMAGES = {
    "tensorrt-a": "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32,
    "tensorrt-b": "nvcr.io/nvidia/tensorrt@sha256:" + "b2" * 32,
    "triton-unsigned": "nvcr.io/nvidia/tritonserver@sha256:" + "c3" * 32,
    "tool-rogue": "registry.example.com/inference/tool@sha256:" + "d4" * 32,
    # images of the scanned-images suite: each with the SBOM and scan of SCANS
    "scan-clean": "registry.example.com/inference/clean@sha256:" + "e1" * 32,
    "scan-critical": "registry.example.com/inference/critical@sha256:" + "e2" * 32,
    "scan-stale": "registry.example.com/inference/stale@sha256:" + "e3" * 32,
    "scan-no-severity": "registry.example.com/inference/unrated@sha256:" + "e4" * 32,
    "scan-skipped": "registry.example.com/inference/skipped@sha256:" + "e5" * 32,
    "scan-no-sbom": "registry.example.com/inference/no-sbom@sha256:" + "e6" * 32,
}

CDX = "https://cyclonedx.org/bom"
VULN = "https://cosign.sigstore.dev/attestation/vuln/v1"
#: image → (SBOM file or None, scan result file, scan time). Scan results are wrapped in cosign's
#: vulnerability predicate with that time; the files are real pip-audit output but 609 (a VEX document).
SCANS: dict[str, tuple[str | None, str, str]] = {
    "scan-clean": (
        "607-cyclonedx-py-requirements.cdx.json",
        "606-pip-audit-clean.cdx.json",
        "2026-10-30T06:00:00Z",
    ),
    "scan-critical": (
        "607-cyclonedx-py-requirements.cdx.json",
        "609-cyclonedx-vex-pyyaml-ratings.cdx.json",
        "2026-10-30T06:00:00Z",
    ),
    "scan-stale": (
        "607-cyclonedx-py-requirements.cdx.json",
        "606-pip-audit-clean.cdx.json",
        "2026-09-01T06:00:00Z",
    ),
    "scan-no-severity": (
        "607-cyclonedx-py-requirements.cdx.json",
        "603-pip-audit-pyyaml-5.3.cdx.json",
        "2026-10-30T06:00:00Z",
    ),
    "scan-skipped": (
        "607-cyclonedx-py-requirements.cdx.json",
        "604-pip-audit-offline-skipped.json",
        "2026-10-30T06:00:00Z",
    ),
    "scan-no-sbom": (None, "606-pip-audit-clean.cdx.json", "2026-10-30T06:00:00Z"),
}


def _engine_manifest(name: str, **overrides: Any) -> dict[str, Any]:
    engine = f"trtguard library test engine {name}\n".encode()
    base: dict[str, Any] = {
        "build_timestamp": "2026-10-01T12:00:00Z",
        "toolchain": {
            "image": IMAGES["tensorrt-a"],
            "tensorrt_version": "10.5.0.18",
            "cuda_version": "12.6.3",
        },
        "build_node": {
            "gpu_name": "NVIDIA H200",
            "compute_capability": "9.0",
            "driver_version": "580.159.04",
        },
        "onnx": {"sha256": sha256_bytes(b"onnx " + name.encode()), "name": f"{name}.onnx"},
        "calibration": None,
        "builder_config": {"typing": "weak", "precision_flags": ["fp16"], "max_workspace_size": 1 << 30},
        "output_engine": {"sha256": sha256_bytes(engine), "size": len(engine), "name": f"{name}.plan"},
        "accuracy": [
            {"metric": "top1_acc", "value": 0.78, "dataset": {"name": "imagenet-val", "sha256": "e5" * 32}}
        ],
        "audit_id": f"AUD-{name}",
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


CALIBRATION = {
    "dataset": {"sha256": "f6" * 32, "hash_method": "file", "sampling": "1,000 images, stratified by class"},
    "cache": {"sha256": "07" * 32, "algorithm": "EntropyCalibration2"},
}

#: engine name → build manifest fields that differ from the defaults, and who signs it.
ENGINES: dict[str, tuple[dict[str, Any], str]] = {
    "fp16-good": ({}, "build"),
    "int8-uncalibrated": ({"builder_config": {"precision_flags": ["fp16", "int8"]}}, "build"),
    "int8-calibrated": (
        {
            "builder_config": {"precision_flags": ["int8"]},
            "calibration": CALIBRATION,
            "accuracy": [
                {
                    "metric": "top1_acc",
                    "value": 0.76,
                    "dataset": {"name": "imagenet-val", "sha256": "e5" * 32},
                }
            ],
        },
        "build",
    ),
    "int8-inaccurate": (
        {
            "builder_config": {"precision_flags": ["int8"]},
            "calibration": CALIBRATION,
            "accuracy": [
                {
                    "metric": "top1_acc",
                    "value": 0.70,
                    "dataset": {"name": "imagenet-val", "sha256": "e5" * 32},
                }
            ],
        },
        "build",
    ),
    "fp8-engine": ({"builder_config": {"precision_flags": ["fp8"]}}, "build"),
    "huge-workspace": ({"builder_config": {"max_workspace_size": 8 << 30}}, "build"),
    "rogue-signed": ({}, "rogue"),
    "stale": ({"build_timestamp": "2024-01-10T08:00:00Z"}, "build"),
    "other-toolchain": ({"toolchain": {"image": IMAGES["tensorrt-b"]}}, "build"),
    # runs on any Ampere or newer GPU, in TensorRT 10.5 and later (gpu-fit suite)
    "portable": (
        {"builder_config": {"hardware_compatibility_level": "ampere_plus", "version_compatible": True}},
        "build",
    ),
}


def _artifact_manifest(engine_sha256: str, size: int, name: str) -> bytes:
    return engine_artifact_manifest([engine_layer(name, engine_sha256, size)])


def _vuln_predicate(result: str, scanned: str) -> dict[str, Any]:
    """A cosign vulnerability predicate around a scanner's output (what `cosign attest --type vuln` signs)."""
    return {
        "invocation": {
            "parameters": ["--format", "cyclonedx-json"],
            "uri": "",
            "event_id": "",
            "builder.id": "",
        },
        "scanner": {
            "uri": "pkg:pypi/pip-audit@2.10.1",
            "version": "2.10.1",
            "result": json.loads((DATA / result).read_text()),
        },
        "metadata": {"scanStartedOn": scanned, "scanFinishedOn": scanned},
    }


def main() -> None:
    keys = {
        "image-signer": generate_private_key(),
        "build-signer": generate_private_key(),
        "gpu-verifier": generate_private_key(),
    }
    rogue = generate_private_key()
    out = ROOT / "attestations"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    (ROOT / "keys.yaml").write_text(
        trusted_keys_yaml(
            "platform",
            {name: key.public_key() for name, key in keys.items()},
            comment="TEST-ONLY keys for the library's test suites (regenerated by\n"
            "scripts/make_library_material.py; the private keys were thrown away).\n"
            "Never trust these in a real cluster.",
        )
    )

    summary: dict[str, str] = dict(IMAGES)
    for name, (overrides, signer) in ENGINES.items():
        manifest = EngineBuildManifest.model_validate(_engine_manifest(name, **overrides))
        engine = manifest.output_engine
        artifact = _artifact_manifest(engine.sha256, engine.size, engine.name)
        (out / f"engine-{name}.oci-manifest.json").write_bytes(artifact)
        statement = manifest_statement(manifest)
        key = keys["build-signer"] if signer == "build" else rogue
        envelope = sign_envelope(PAYLOAD_TYPE, statement.to_json(), key)
        (out / f"engine-{name}.build-manifest.dsse.json").write_bytes(envelope.to_json() + b"\n")
        summary[f"engine-{name}"] = f"registry.example.com/models/{name}@sha256:{sha256_bytes(artifact)}"

    image_signers = {
        "tensorrt-a": keys["image-signer"],
        "tensorrt-b": keys["image-signer"],
        "tool-rogue": rogue,
    }
    for name, image_key in image_signers.items():
        digest = IMAGES[name].split("@sha256:")[1]
        statement = Statement(
            subject=[ResourceDescriptor(digest={"sha256": digest})], predicate_type=COSIGN_SIGN_PREDICATE
        )
        envelope = sign_envelope(PAYLOAD_TYPE, statement.to_json(), image_key)
        (out / f"image-{name}.cosign-sign.dsse.json").write_bytes(envelope.to_json() + b"\n")

    for name, (sbom, result, scanned) in SCANS.items():
        digest = IMAGES[name].split("@sha256:")[1]
        statements = [(VULN, _vuln_predicate(result, scanned), "scan")]
        if sbom is not None:
            # The pipeline makes the SBOM with the scan: dated at the scan time (the file's own time is
            # after the suites' clock, and a document dated in the future is refused).
            bom = json.loads((DATA / sbom).read_text())
            bom["metadata"] = {**bom["metadata"], "timestamp": scanned}
            statements.append((CDX, bom, "sbom"))
        for predicate_type, predicate, kind in statements:
            statement = Statement(
                subject=[ResourceDescriptor(digest={"sha256": digest})],
                predicate_type=predicate_type,
                predicate=predicate,
            )
            # the image pipeline that signs an image attests its SBOM and scan with the same key
            envelope = sign_envelope(PAYLOAD_TYPE, statement.to_json(), keys["image-signer"])
            (out / f"image-{name}.{kind}.dsse.json").write_bytes(envelope.to_json() + b"\n")

    for name, reference in summary.items():
        print(f"{name:24} {reference}")


if __name__ == "__main__":
    main()
