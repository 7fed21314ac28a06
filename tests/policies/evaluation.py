"""Helpers for tests that evaluate policies through a PolicyEvaluator: real keys, attestations in a folder."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from policies.results import Action, Decision
from tests.policies.conftest import Material
from verifier.evidence_folder import LocalEvidence

NOW = datetime(2026, 11, 1, tzinfo=UTC)


IMAGES_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: images}
spec:
  match: {namespaces: ["prod*"]}
  action: ACTION
  onError: ONERROR
  images:
    - name: runtime
      match: ["nvcr.io/nvidia/tensorrt:*"]
      requireDigest: true
"""


def engine_for(material: Material, *policies: str, keys: Sequence[str] = ()) -> PolicyEvaluator:
    paths = [material.policy(text, f"policy{i}.yaml") for i, text in enumerate(policies)]
    if keys:
        paths.append(material.keys_file(*keys))
    return PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations), clock=lambda: NOW)


def evaluate(engine: PolicyEvaluator, obj: dict[str, Any], **kwargs: Any) -> Decision:
    return asyncio.run(engine.evaluate(obj, **kwargs))


def rules(decision: Decision) -> set[tuple[str, str, Action]]:
    return {(v.policy, v.rule, v.action) for v in decision.violations}


def images_policy(action: str = "Deny", on_error: str = "Deny") -> str:
    return IMAGES_POLICY.replace("ACTION", action).replace("ONERROR", on_error)


MODELS_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: models}
spec:
  match: {namespaces: [prod]}
  models:
    required: true
    buildManifest: {keys: [platform/build-signer], maxAge: 90d}
"""


def models_policy(rules_yaml: str = "") -> str:
    return MODELS_POLICY + (f"    rules:\n{rules_yaml}" if rules_yaml else "")


def signature_policy(threshold: int = 1) -> str:
    keys = "[platform/image-signer, platform/second-signer]"
    return images_policy() + f"      signatures: {{keys: {keys}, threshold: {threshold}}}\n"
