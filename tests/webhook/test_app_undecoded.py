"""webhook/_app.py end to end: a review json.loads refuses only for its depth or a too-long integer (the API
server sends both) is denied with a recorded answer, not failed with an HTTP 400 that ``failurePolicy:
Ignore`` admits (attack 39d F2, F3); without a readable uid it is the failed call it was."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import pytest

from tests.support.harness import PodFactory, ReviewFactory, Verifier, WebhookProcess
from trtguard.demo.material import TENSORRT_IMAGE

FAILURES = re.compile(r'^trtguard_admission_review_failures_total\{reason="bad_request"\} (\S+)$', re.M)


def _kubernetes_order(review: dict[str, Any]) -> dict[str, Any]:
    """The review as the API server writes it: request.uid first."""
    request = review["request"]
    return {**review, "request": {"uid": request["uid"], **request}}


async def _bad_requests(process: WebhookProcess) -> float:
    async with process.client() as client:
        found = FAILURES.search((await client.get("/metrics")).text)
    return float(found.group(1)) if found else 0.0


def _recorded(process: WebhookProcess, uid: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{process.workdir / 'decisions.db'}?mode=ro", uri=True) as conn:
        query = "SELECT allowed, kind, namespace, name, body FROM trtguard_decisions WHERE uid = ?"
        return list(conn.execute(query, (uid,)))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"[" * 990 + b"]" * 990, "request.object is nested too deeply to judge (limit about 1000 levels)"),
        (b"[" * 9000 + b"]" * 9000, "request.object is nested too deeply to judge"),
        (b"9" * 4301, "request.object holds a number of more than 4300 digits, too long to judge"),
    ],
)
async def test_a_review_too_deep_or_too_long_to_decode_is_denied(
    value: bytes,
    message: str,
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    pod = make_pod("good", TENSORRT_IMAGE, namespace="dev")
    pod["metadata"]["annotations"] = {"free-form": "HERE"}
    review = _kubernetes_order(make_review(obj=pod))
    uid = review["request"]["uid"]
    body = json.dumps(review).encode().replace(b'"HERE"', value)
    before = await _bad_requests(demo_webhook)
    async with demo_webhook.client() as client:
        answer = verify_admission_response(uid, await client.post(body))
    assert answer["allowed"] is False
    assert (answer["status"]["code"], answer["status"]["reason"]) == (400, "BadRequest")
    assert message in answer["status"]["message"]
    assert await _bad_requests(demo_webhook) == before + 1
    [(allowed, kind, namespace, name, record)] = _recorded(demo_webhook, uid)
    assert (allowed, kind, namespace, name) == (0, "Pod", "dev", "good")
    assert message in record


@pytest.mark.parametrize(
    ("value", "fragment"),
    [(b"[" * 5000 + b"]" * 5000, "nested too deeply"), (b"9" * 4301, "Exceeds the limit (4300 digits)")],
)
async def test_without_a_readable_uid_it_is_still_a_failed_call(
    value: bytes,
    fragment: str,
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
) -> None:
    review = make_review(obj=make_pod("good", TENSORRT_IMAGE, namespace="dev"))
    review["request"]["uid"] = ""
    review["request"]["object"]["metadata"]["annotations"] = {"free-form": "HERE"}
    body = json.dumps(review).encode().replace(b'"HERE"', value)
    before = await _bad_requests(demo_webhook)
    async with demo_webhook.client() as client:
        response = await client.post(body)
    assert response.status_code == 400
    assert fragment in response.json()["message"]
    assert await _bad_requests(demo_webhook) == before + 1
