"""Fixtures for the decision-log tests: a record factory (PostgreSQL fixtures are one level up)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from webhook.decisionlog import DecisionRecord

RecordFactory = Callable[..., DecisionRecord]


@pytest.fixture
def make_record() -> RecordFactory:
    """Build a plausible decision record; keyword arguments override fields."""
    counter = iter(range(1, 1_000_000))

    def factory(**overrides: Any) -> DecisionRecord:
        n = next(counter)
        fields: dict[str, Any] = {
            "uid": f"uid-{n:05d}-{uuid.uuid4().hex[:8]}",
            "operation": "CREATE",
            "kind": "Deployment",
            "api_version": "apps/v1",
            "namespace": "prod",
            "name": f"llm-{n}",
            "user": "system:serviceaccount:ci:deployer",
            "allowed": True,
            "reason": "Allowed",
            "images": (
                {"reference": "nvcr.io/nvidia/tritonserver:25.01-py3", "digest": None, "path": "spec.x"},
            ),
            "engines": (
                {
                    "reference": "registry.corp/engines/llm@sha256:" + "a" * 64,
                    "digest": "sha256:" + "a" * 64,
                    "path": "metadata.annotations[trtguard.dev/engines][0]",
                },
            ),
            "policy_revision": "sha256:" + "b" * 64,
            "latency_us": 1250,
        }
        fields.update(overrides)
        return DecisionRecord(**fields)

    return factory
