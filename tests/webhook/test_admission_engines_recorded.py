"""webhook/_admission.py: an admission whose decision record cannot hold every engine entry is refused, since
change control reads what ran from the records (attack 35a F1: a record cut behind ``{"omitted": N}`` made
change control forget an engine and admit an unapproved INT8 build after it), with the demo's policies and a
real SQLite decision log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from decisionlog import DecisionRecord, RecordQuery, SQLiteStore, engines_left_out
from tests.support.harness import ReviewFactory
from tests.webhook.test_admission_history import reviewing
from trtguard.demo.material import TENSORRT_IMAGE, Material


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "decisions.db")
    await s.open()
    yield s
    await s.close()


def deployment(engines: list[str], containers: int = 1, name: str = "server") -> dict[str, Any]:
    volumes = [{"name": f"e{i}", "image": {"reference": ref}} for i, ref in enumerate(engines)]
    mounts = [{"name": v["name"], "mountPath": f"/m/{v['name']}"} for v in volumes]
    listed = [
        {"name": f"{name}{j}" if containers > 1 else name, "image": TENSORRT_IMAGE, "volumeMounts": mounts}
        for j in range(containers)
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "release"},
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {
                "metadata": {"labels": {"app": "llm"}},
                "spec": {"containers": listed, "volumes": volumes},
            },
        },
    }


async def test_an_admission_whose_record_would_leave_engines_out_is_refused(
    demo_material: Material, store: SQLiteStore, make_review: ReviewFactory
) -> None:
    review = reviewing(demo_material.policies, demo_material, store)

    engines = demo_material.engines
    first = deployment([engines["int8-calibrated"]])
    assert (await review(make_review(obj=first)))["allowed"]
    # valid Kubernetes within trtguard's own caps: 16 image volumes in 400 containers with long names
    padded = deployment([engines["int8-calibrated"]] * 15 + [engines["fp16"]], containers=400, name="c" * 58)
    body = make_review(obj=padded, old=first, operation="UPDATE")
    answer = await review(body)
    assert not answer["allowed"]
    assert "cannot hold all 16 engine entries" in answer["status"]["message"]
    [stored] = await store.query(RecordQuery(uid=body["request"]["uid"]))
    assert (stored.record.allowed, stored.record.reason) == (False, "EnginesNotRecorded")
    # the same change, named once per container, is recorded whole and judged as before
    plain = deployment([engines["int8-calibrated"], engines["fp16"]])
    assert (await review(make_review(obj=plain, old=first, operation="UPDATE")))["allowed"]


def test_a_record_that_keeps_every_engine_says_nothing() -> None:
    record = DecisionRecord(
        uid="u", operation="CREATE", kind="Pod", api_version="v1", allowed=True, reason="Allowed"
    )
    assert engines_left_out(record) is None
    entry = {"reference": "r@sha256:" + "a" * 64, "containers": ["c" * 60] * 400}
    cut = DecisionRecord(
        uid="u",
        operation="CREATE",
        kind="Pod",
        api_version="v1",
        allowed=True,
        reason="Allowed",
        engines=(entry,) * 16,
    )
    left_out = engines_left_out(cut)
    assert left_out is not None and "cannot hold all 16 engine entries" in left_out
