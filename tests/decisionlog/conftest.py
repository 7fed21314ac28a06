"""Fixtures for the decision-log tests: a record factory, a checkpoint key, and a log on SQLite and on
PostgreSQL (``log``: each test once per store; ``pg_url`` is in tests/support/webhooks.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, DecisionStore, PostgresStore, SQLiteStore
from verifier.crypto._keys import PrivateKey, generate_private_key

RecordFactory = Callable[..., DecisionRecord]


@pytest.fixture(scope="module")
def key() -> PrivateKey:
    return generate_private_key()


@pytest.fixture
async def sqlite_log(tmp_path: Path) -> AsyncIterator[tuple[DecisionStore, str]]:
    store = SQLiteStore(tmp_path / "decisions.db")
    await store.open()
    yield store, f"sqlite:///{store.path}"
    await store.close()


@pytest.fixture
async def pg_log(pg_url: str) -> AsyncIterator[tuple[DecisionStore, str]]:
    store = PostgresStore(pg_url)
    await store.open()
    yield store, pg_url
    await store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def log(request: pytest.FixtureRequest) -> Iterator[tuple[DecisionStore, str]]:
    yield request.getfixturevalue("sqlite_log" if request.param == "sqlite" else "pg_log")


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
