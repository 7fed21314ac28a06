"""Policy evaluation time per workload: 3 containers, 1 engine, 20 rules of which 5 CEL (goal: median ≤ 1 ms).

Baselines in the same run: extracting the workload alone, and evaluating against a policy set that matches
nothing. Keys, signatures and the engine's build manifest are real (made fresh in a temporary folder).

Also the request of the webhook benchmark (issue 15: ``bench/webhook_latency.py``'s AdmissionReview, a Pod of
3 containers and 1 engine judged by the bundled library policies, admitted), evaluated in-process as the
webhook does it: median µs and CPU µs per evaluation.

Usage: ``.venv/bin/python bench/policy_eval.py [--runs N] [--only-webhook-request]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import webhook_latency as webhook_bench
from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.requesters import Requester
from policies.schema import trusted_keys_yaml
from policies.workload_model._extraction import extract
from trtguard.demo.material import make_material
from verifier.base._digests import sha256_bytes
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE, ResourceDescriptor, Statement
from verifier.crypto._keys import generate_private_key
from verifier.evidence import COSIGN_SIGN_PREDICATE
from verifier.evidence_folder import LocalEvidence
from verifier.manifest import EngineBuildManifest, manifest_statement
from verifier.registry.engine_artifact import engine_artifact_manifest, engine_layer

RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
SIDECARS = (
    "registry.example.com/inference/metrics@sha256:" + "b2" * 32,
    "registry.example.com/inference/proxy@sha256:" + "c3" * 32,
)

# 20 rules: 5 image rule checks, 10 model rule checks, 5 CEL expressions.
POLICIES = f"""
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {{name: images}}
spec:
  match: {{namespaces: ["prod-*"]}}
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      requireDigest: true
      signatures: {{keys: [platform/image-signer]}}
    - name: sidecars
      match: ["registry.example.com/inference/*"]
      requireDigest: true
      digests: ["sha256:{"b2" * 32}", "sha256:{"c3" * 32}"]
    - name: engines
      match: ["registry.example.com/models/*"]
      requireDigest: true
---
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {{name: models}}
spec:
  match: {{namespaces: ["prod-*"]}}
  models:
    required: true
    buildManifest: {{keys: [platform/build-signer], maxAge: 365d}}
    rules:
      precisions: [fp32, fp16, int8]
      int8RequiresCalibration: true
      minAccuracy: {{top1_acc: 0.75, top5_acc: 0.9}}
      toolchain: {{sameAsRuntimeImage: true, allowed: ["nvcr.io/nvidia/tensorrt:*"]}}
      pluginsAllowed: ["sha256:{"d4" * 32}"]
      expressions:
        - {{cel: "manifest.builder_config.max_workspace_size <= 4 * 1024 * 1024 * 1024", message: m1}}
        - {{cel: "manifest.accuracy.exists(m, m.metric == 'top1_acc' && m.value >= 0.75)", message: m2}}
        - {{cel: "size(manifest.builder_config.optimization_profiles) <= 4", message: m3}}
        - cel: "workload.metadata.namespace.startsWith('prod') && has(workload.metadata.labels.team)"
          message: m4
        - {{cel: "manifest.builder_config.plugins.all(p, p.library_sha256 != '')", message: m5}}
"""

NOTHING = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: elsewhere}
spec:
  match: {namespaces: ["nowhere"]}
  images: [{name: any, match: ["*"]}]
"""


def build(root: Path) -> tuple[PolicyEvaluator, PolicyEvaluator, dict[str, Any]]:
    signers = {"image-signer": generate_private_key(), "build-signer": generate_private_key()}
    public = {name: key.public_key() for name, key in signers.items()}
    (root / "keys.yaml").write_text(trusted_keys_yaml("platform", public))
    (root / "policies.yaml").write_text(POLICIES)
    (root / "nothing.yaml").write_text(NOTHING)
    evidence_dir = root / "evidence"
    evidence_dir.mkdir()

    engine_bytes = b"benchmark engine"
    manifest = EngineBuildManifest.model_validate(
        {
            "build_timestamp": "2026-10-01T12:00:00Z",
            "toolchain": {"image": RUNTIME, "tensorrt_version": "10.5.0.18", "cuda_version": "12.6.3"},
            "build_node": {
                "gpu_name": "NVIDIA H200",
                "compute_capability": "9.0",
                "driver_version": "580.159.04",
            },
            "onnx": {"sha256": "0e" * 32},
            "calibration": {"dataset": {"sha256": "f6" * 32}, "cache": {"sha256": "07" * 32}},
            "builder_config": {
                "typing": "weak",
                "precision_flags": ["fp16", "int8"],
                "max_workspace_size": 1 << 30,
                "optimization_profiles": [
                    {
                        "inputs": {
                            "input": {
                                "min": [1, 3, 224, 224],
                                "opt": [8, 3, 224, 224],
                                "max": [32, 3, 224, 224],
                            }
                        }
                    }
                ],
                "plugins": [{"name": "AddScalar", "library_sha256": "d4" * 32}],
            },
            "output_engine": {
                "sha256": sha256_bytes(engine_bytes),
                "size": len(engine_bytes),
                "name": "m.plan",
            },
            "accuracy": [
                {"metric": "top1_acc", "value": 0.78, "dataset": {"name": "val", "sha256": "e5" * 32}},
                {"metric": "top5_acc", "value": 0.94, "dataset": {"name": "val", "sha256": "e5" * 32}},
            ],
            "audit_id": "AUD-1",
        }
    )
    envelope = sign_envelope(PAYLOAD_TYPE, manifest_statement(manifest).to_json(), signers["build-signer"])
    (evidence_dir / "manifest.json").write_bytes(envelope.to_json())
    engine = manifest.output_engine
    artifact = engine_artifact_manifest([engine_layer("m.plan", engine.sha256, engine.size)])
    (evidence_dir / "artifact.json").write_bytes(artifact)
    signature = Statement(
        subject=[ResourceDescriptor(digest={"sha256": "a1" * 32})], predicate_type=COSIGN_SIGN_PREDICATE
    )
    (evidence_dir / "sig.json").write_bytes(
        sign_envelope(PAYLOAD_TYPE, signature.to_json(), signers["image-signer"]).to_json()
    )

    containers = [
        {"name": "server", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/m"}]}
    ]
    containers += [{"name": f"side{i}", "image": image} for i, image in enumerate(SIDECARS)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "resnet", "namespace": "prod-eu", "labels": {"team": "vision"}},
        "spec": {
            "containers": containers,
            "volumes": [
                {
                    "name": "engine",
                    "image": {
                        "reference": f"registry.example.com/models/resnet@sha256:{sha256_bytes(artifact)}"
                    },
                }
            ],
        },
    }
    evidence = LocalEvidence(evidence_dir)
    full = PolicyEvaluator(load_policy_set([root / "policies.yaml", root / "keys.yaml"]), evidence)
    empty = PolicyEvaluator(load_policy_set([root / "nothing.yaml"]), evidence)
    return full, empty, pod


def webhook_request(root: Path) -> Callable[[], Coroutine[Any, Any, Any]]:
    """One evaluation of the webhook benchmark's request, as ``webhook._admission`` asks for it."""
    material = make_material(root)
    request = json.loads(webhook_bench._review_body(material, root).read_text())["request"]
    engine = PolicyEvaluator(load_policy_set(material.policies), LocalEvidence(material.attestations))
    requester = Requester(request["userInfo"]["username"], request["userInfo"]["groups"])

    def evaluate() -> Coroutine[Any, Any, Any]:
        return engine.evaluate(
            request["object"], namespace=request["namespace"], unknown_kinds="judge", requester=requester
        )

    return evaluate


def cpu_per_call(runs: int, make: Callable[[], Coroutine[Any, Any, Any]]) -> float:
    """CPU seconds (this process) per awaited call."""

    async def loop() -> float:
        start = time.process_time()
        for _ in range(runs):
            await make()
        return (time.process_time() - start) / runs

    return asyncio.run(loop())


def webhook_figures(runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        evaluate = webhook_request(Path(folder))
        decision = asyncio.run(evaluate())
        assert decision.allowed, [v.one_line() for v in decision.violations]
        timed_async(200, evaluate)  # warm: verified evidence cached, as in a running webhook
        samples = timed_async(runs, evaluate)
        cpu = cpu_per_call(runs, evaluate)
        print(
            describe(f"webhook request ({len(decision.matched_policies)} library policies)", samples)
            + f"   CPU {cpu * 1e6:.1f} µs/evaluation"
        )


def timed(runs: int, call: Callable[[], Any]) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def timed_async(runs: int, make: Callable[[], Coroutine[Any, Any, Any]]) -> list[float]:
    async def loop() -> list[float]:
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            await make()
            samples.append(time.perf_counter() - start)
        return samples

    return asyncio.run(loop())


def describe(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name:44} median {statistics.median(samples) * 1e6:8.1f} µs   p99 {p99 * 1e6:8.1f} µs   "
        f"({len(samples)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument(
        "--only-webhook-request", action="store_true", help="only the webhook benchmark's request (issue 15)"
    )
    args = parser.parse_args()
    if args.only_webhook_request:
        webhook_figures(args.runs)
        return
    with tempfile.TemporaryDirectory() as folder:
        full, empty, pod = build(Path(folder))
        first = timed_async(1, lambda: full.evaluate(pod))
        decision = asyncio.run(full.evaluate(pod))
        assert decision.allowed, [v.one_line() for v in decision.violations]
        assert len(decision.matched_policies) == 2
        print("workload: 3 containers, 1 engine; policies: 20 rules, 5 of them CEL; decision: allowed")
        print(describe("baseline: extract() only", timed(args.runs, lambda: extract(pod))))
        print(
            describe(
                "baseline: evaluate, no policy matches", timed_async(args.runs, lambda: empty.evaluate(pod))
            )
        )
        print(describe("evaluate, first call (verifies signatures)", first))
        print(describe("evaluate, 20 rules (warm)", timed_async(args.runs, lambda: full.evaluate(pod))))
    webhook_figures(args.runs)


if __name__ == "__main__":
    main()
