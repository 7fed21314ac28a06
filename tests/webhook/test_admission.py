"""webhook/_admission.py: the verdict rules, the deadline backstop and fail-closed behaviour, with the real
policy engine, the bundled policies and a real SQLite decision log.

Evidence sources that hang or break are stand-ins for a registry that does so; the real registry client
honours deadlines itself, so these exercise the webhook's own backstop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from decisionlog import RecordQuery, SQLiteStore
from tests.support.harness import PodFactory, ReviewFactory
from trtguard.demo.material import OFF_LIST_IMAGE, TENSORRT_IMAGE, Material
from verifier.base._deadline import Deadline
from verifier.base._errors import EvidenceUnavailable
from verifier.base._references import ImageReference
from verifier.evidence import ArtifactAttestations, EvidenceSource, ImageSignatures
from verifier.evidence_folder import LocalEvidence
from webhook._admission import MAX_ANNOTATED, Reviewer, ReviewSettings
from webhook._metrics import ERROR_DENIAL_REASONS, FAILURE_REASONS, Metrics
from webhook._policy_store import PolicyStore
from webhook._wire import MAX_ANNOTATION_CHARS, parse_review_document


class _HangingEvidence(LocalEvidence):
    """Answers digests from the folder but never returns attestations or signatures."""

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class _BrokenEvidence(LocalEvidence):
    """Fails with a programming error, as a bug in an evidence source would."""

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        raise RuntimeError("boom")

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        raise RuntimeError("boom")


class _UnavailableEvidence(LocalEvidence):
    """Answers digests from the folder; signatures and attestations fail as a registry that is down does."""

    async def attestations(self, reference: ImageReference, deadline: Deadline) -> ArtifactAttestations:
        raise EvidenceUnavailable("registry.example.com: 503 Service Unavailable", transient=True)

    async def image_signatures(self, reference: ImageReference, deadline: Deadline) -> ImageSignatures:
        raise EvidenceUnavailable("registry.example.com: 503 Service Unavailable", transient=True)


def _policies_with_on_error(material: Material, tmp_path: Path, on_error: str) -> Path:
    folder = tmp_path / f"policies-{on_error}"
    shutil.copytree(material.policies, folder)
    for path in folder.glob("*.yaml"):
        path.write_text(re.sub(r"onError: \w+", f"onError: {on_error}", path.read_text()))
    return folder


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "decisions.db")
    await s.open()
    yield s
    await s.close()


def _reviewer(
    policy_path: Path, evidence: EvidenceSource, store: SQLiteStore, *, load: bool = True, **settings: Any
) -> Reviewer:
    policies = PolicyStore(policy_path, evidence)
    if load:
        policies.load()
    return Reviewer(policies, store, Metrics(), settings=ReviewSettings(**settings))


async def _review(
    reviewer: Reviewer, body: dict[str, Any], api_timeout: float | None = 10.0
) -> dict[str, Any]:
    request = parse_review_document(body)
    answer: dict[str, Any] = (
        await reviewer.review(request, api_timeout=api_timeout, started=time.perf_counter())
    )["response"]
    return answer


async def test_allowed_review_is_recorded_before_it_is_returned(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(
        demo_material.policies, LocalEvidence(demo_material.attestations), store, replica="r-1"
    )
    body = make_review(obj=make_pod("ok", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    answer = await _review(reviewer, body)
    assert answer["allowed"] is True
    [stored] = await store.query(RecordQuery(uid=body["request"]["uid"]))
    record = stored.record
    assert (record.allowed, record.reason, record.kind, record.namespace, record.name) == (
        True,
        "Allowed",
        "Pod",
        "prod",
        "ok",
    )
    assert record.user == "kubernetes-admin"
    assert record.replica == "r-1"
    assert reviewer.policies.current is not None
    assert record.policy_revision == reviewer.policies.current.revision
    # The engine's image volume is an image-bearing field too.
    assert [i["reference"] for i in record.images] == [TENSORRT_IMAGE, demo_material.engines["fp16"]]
    assert [e["digest"] for e in record.engines] == [demo_material.engines["fp16"].split("@")[1]]
    assert record.latency_us > 0


async def test_evaluation_that_runs_out_of_time_is_denied_in_time(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, _HangingEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("slow", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    started = time.perf_counter()
    answer = await _review(reviewer, body, api_timeout=2.0)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, "answered within the API server's timeout"
    assert answer["allowed"] is False
    assert answer["status"]["reason"] == "EvaluationTimeout"
    assert "ran out of time after 1.5 s" in answer["status"]["message"]
    [stored] = await store.query(RecordQuery(uid=body["request"]["uid"]))
    assert (stored.record.allowed, stored.record.reason) == (False, "EvaluationTimeout")
    assert all(v["error"] for v in stored.record.violations)
    assert reviewer.metrics.review_failures.labels("timeout")._value.get() == 1
    assert reviewer.metrics.error_denials.labels("timeout")._value.get() == 1


async def test_on_error_warn_admits_with_a_warning_when_out_of_time(
    demo_material: Material,
    tmp_path: Path,
    store: SQLiteStore,
    make_pod: PodFactory,
    make_review: ReviewFactory,
) -> None:
    policies = _policies_with_on_error(demo_material, tmp_path, "Warn")
    reviewer = _reviewer(policies, _HangingEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("slow", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    answer = await _review(reviewer, body, api_timeout=1.0)
    assert answer["allowed"] is True  # every matching policy said onError: Warn
    assert answer["auditAnnotations"]["reason"] == "EvaluationTimeout"
    assert answer["warnings"] and all("ran out of time" in w for w in answer["warnings"])
    # Admitted: no error denial, though the failure is counted.
    assert reviewer.metrics.review_failures.labels("timeout")._value.get() == 1
    assert reviewer.metrics.error_denials.labels("timeout")._value.get() == 0


async def test_a_bug_in_evaluation_denies(
    demo_material: Material,
    store: SQLiteStore,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reviewer = _reviewer(demo_material.policies, _BrokenEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("bug", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    with caplog.at_level(logging.ERROR):
        answer = await _review(reviewer, body)
    assert answer["allowed"] is False
    assert answer["status"]["reason"] == "EvaluationError"
    assert "internal error while evaluating (RuntimeError)" in answer["status"]["message"]
    assert any(r.exc_info for r in caplog.records), "the traceback goes to the log, not to the user"


async def test_a_cancelled_review_answers_nothing_and_records_nothing(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, _HangingEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("gone", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    task = asyncio.create_task(_review(reviewer, body, api_timeout=30.0))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.query(RecordQuery(uid=body["request"]["uid"])) == []


async def test_a_decision_that_cannot_be_recorded_is_denied(
    demo_material: Material, tmp_path: Path, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    closed = SQLiteStore(tmp_path / "never-opened.db")
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), closed)
    body = make_review(obj=make_pod("ok", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    answer = await _review(reviewer, body)
    assert answer["allowed"] is False
    assert answer["status"]["reason"] == "DecisionLogUnavailable"
    assert "could not record this decision" in answer["status"]["message"]
    assert reviewer.metrics.decision_log_writes.labels("failed")._value.get() == 1
    assert reviewer.metrics.review_failures.labels("decision_log")._value.get() == 1
    assert reviewer.metrics.error_denials.labels("decision_log")._value.get() == 1


@pytest.mark.parametrize(("on_error", "denied"), [("Deny", True), ("Warn", False)])
async def test_evidence_that_cannot_be_had_counts_as_an_error_denial_when_on_error_denies(
    on_error: str,
    denied: bool,
    demo_material: Material,
    tmp_path: Path,
    store: SQLiteStore,
    make_pod: PodFactory,
    make_review: ReviewFactory,
) -> None:
    """What the alert on denials by error reads: a registry outage, not a policy, refused the workload."""
    policies = _policies_with_on_error(demo_material, tmp_path, on_error)
    reviewer = _reviewer(policies, _UnavailableEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("outage", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    answer = await _review(reviewer, body)
    assert answer["allowed"] is not denied
    metrics = reviewer.metrics
    assert metrics.error_denials.labels("evidence_unavailable")._value.get() == (1 if denied else 0)
    # Judged normally, with rules that could not be checked: no review failure.
    assert sum(metrics.review_failures.labels(r)._value.get() for r in FAILURE_REASONS) == 0
    # With the evidence at hand, a policy violation alone is no error denial.
    checked = _reviewer(policies, LocalEvidence(demo_material.attestations), store)
    assert (await _review(checked, make_review(obj=make_pod("off-list", OFF_LIST_IMAGE))))["allowed"] is False
    assert sum(checked.metrics.error_denials.labels(r)._value.get() for r in ERROR_DENIAL_REASONS) == 0


async def test_no_policies_loaded_denies(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store, load=False)
    answer = await _review(reviewer, make_review(obj=make_pod("x", TENSORRT_IMAGE, namespace="dev")))
    assert answer["allowed"] is False
    assert answer["status"]["reason"] == "PoliciesNotLoaded"
    assert reviewer.metrics.error_denials.labels("no_policies")._value.get() == 1


async def test_pre_1_22_ephemeral_containers_kind_is_denied(
    demo_material: Material, store: SQLiteStore, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    obj = {
        "apiVersion": "v1",
        "kind": "EphemeralContainers",
        "metadata": {"name": "p", "namespace": "prod"},
        "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
    }
    body = make_review(obj=obj, operation="UPDATE", old=obj, sub_resource="ephemeralcontainers")
    answer = await _review(reviewer, body)
    assert answer["allowed"] is False
    assert answer["status"]["reason"] == "UnsupportedRequest"


async def test_create_without_object_is_denied(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("x", TENSORRT_IMAGE))
    body["request"]["object"] = None
    answer = await _review(reviewer, body)
    assert (answer["allowed"], answer["status"]["reason"]) == (False, "UnsupportedRequest")


async def test_update_of_an_object_being_deleted_is_allowed(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    old = make_pod("x", OFF_LIST_IMAGE)
    new = make_pod("x", OFF_LIST_IMAGE)
    new["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    answer = await _review(reviewer, make_review(obj=new, old=old, operation="UPDATE"))
    assert (answer["allowed"], answer["auditAnnotations"]["reason"]) == (True, "DeletionInProgress")
    # A CREATE carrying the field gets no such pass (the API server clears it; a forged one is judged).
    answer = await _review(reviewer, make_review(obj=new))
    assert answer["allowed"] is False


async def test_object_without_kind_is_decoded_with_the_request_kind(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("nokind", OFF_LIST_IMAGE))
    del body["request"]["object"]["kind"], body["request"]["object"]["apiVersion"]
    answer = await _review(reviewer, body)
    assert answer["allowed"] is False
    assert OFF_LIST_IMAGE in answer["status"]["message"]


async def test_object_naming_another_kind_than_the_request_is_denied(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("x", TENSORRT_IMAGE, namespace="dev"))
    body["request"]["kind"]["kind"] = "Deployment"
    body["request"]["kind"]["group"] = "apps"
    answer = await _review(reviewer, body)
    assert answer["allowed"] is False
    assert answer["status"]["reason"] == "UnsupportedRequest"
    assert "the object is a Pod but the request says Deployment" in answer["status"]["message"]


async def test_object_of_another_api_group_than_the_request_is_denied(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    """The decision is recorded, and change control's history looked up, by the request's group: an object
    of another group (a Volcano Job sent as batch/v1's) would be compared with another workload's history."""
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "dev"},
        "spec": {"tasks": [{"name": "run", "template": {"spec": make_pod("x", TENSORRT_IMAGE)["spec"]}}]},
    }
    body = make_review(obj=job)
    body["request"]["kind"] = {"group": "batch", "version": "v1", "kind": "Job"}
    answer = await _review(reviewer, body)
    assert (answer["allowed"], answer["status"]["reason"]) == (False, "UnsupportedRequest")
    assert (
        "the object is of API group 'batch.volcano.sh' but the request says batch/v1/Job"
        in (answer["status"]["message"])
    )
    # The same object sent as what it is, in another version of its group, is judged.
    body["request"]["kind"] = {"group": "batch.volcano.sh", "version": "v1alpha2", "kind": "Job"}
    answer = await _review(reviewer, body)
    assert answer["auditAnnotations"]["reason"] != "UnsupportedRequest"


async def test_without_api_timeout_the_default_applies(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(
        demo_material.policies,
        _HangingEvidence(demo_material.attestations),
        store,
        default_timeout=1.0,
        timeout_margin=0.25,
    )
    body = make_review(obj=make_pod("slow", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    answer = await _review(reviewer, body, api_timeout=None)
    # 1.0 s default minus the 0.25 s margin minus what already passed.
    assert re.search(r"ran out of time after 0\.[67] s", answer["status"]["message"])


async def test_warn_findings_become_short_warnings_and_the_message_lists_every_denial(
    demo_material: Material,
    tmp_path: Path,
    store: SQLiteStore,
    make_pod: PodFactory,
    make_review: ReviewFactory,
) -> None:
    folder = tmp_path / "warn"
    shutil.copytree(demo_material.policies, folder)
    target = folder / "trusted-base-images.yaml"
    target.write_text(target.read_text().replace("action: Deny", "action: Warn"))
    reviewer = _reviewer(folder, LocalEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("w", OFF_LIST_IMAGE, engine=demo_material.engines["int8-uncalibrated"]))
    answer = await _review(reviewer, body)
    assert answer["allowed"] is False
    assert any("trusted-tensorrt-images" in w for w in answer["warnings"])
    assert all(len(w) <= 120 for w in answer["warnings"])
    message = answer["status"]["message"]
    assert message.startswith(f"{message.split(' ')[0]} policy violations: (1) ")
    assert "int8RequiresCalibration" in message


async def test_the_violations_annotation_is_whole_json_within_the_limit(
    demo_material: Material, store: SQLiteStore, make_pod: PodFactory, make_review: ReviewFactory
) -> None:
    """Long image names: whole items are left out (and counted) rather than the JSON cut mid-way."""
    images = tuple(f"registry.example.com/{'a' * 200}/image-{n}:{'t' * 120}" for n in range(25))
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    body = make_review(obj=make_pod("long", images[0], extra_images=images[1:]))
    answer = await _review(reviewer, body)
    assert answer["allowed"] is False
    text = answer["auditAnnotations"]["violations"]
    assert len(text) <= MAX_ANNOTATION_CHARS
    items = json.loads(text)
    *shown, more = items
    [stored] = await store.query(RecordQuery(uid=body["request"]["uid"]))
    assert len(shown) < MAX_ANNOTATED
    assert more == {"more": len(stored.record.violations) - len(shown)}
    # The first violations, in order, with their subjects.
    recorded = stored.record.violations[: len(shown)]
    assert [(i["policy"], i["rule"], i.get("image")) for i in shown] == [
        (v["policy"], v["rule"], v.get("image")) for v in recorded
    ]
    assert sum("image" in item for item in shown) > 0


@pytest.mark.parametrize("marked", ["object", "oldObject", "both"])
async def test_updates_of_an_object_being_deleted_are_admitted_unjudged_and_recorded(
    demo_material: Material,
    store: SQLiteStore,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    marked: str,
) -> None:
    """Not a bug, a decision (issue 10): see the comment at ``DeletionInProgress`` in webhook/_admission.py.

    Even an UPDATE that swaps in an image the policies deny is let through once a deletion is under way: the
    API server keeps deletionTimestamp as stored, nothing new is started from an object being deleted, and
    blocking its clean-up (finalizer removal) would leave it undeletable. The pass is recorded.
    """
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    old = make_pod("going", TENSORRT_IMAGE)
    new = make_pod("going", OFF_LIST_IMAGE)
    for obj, name in ((new, "object"), (old, "oldObject")):
        if marked in (name, "both"):
            obj["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
            obj["metadata"]["finalizers"] = []
    body = make_review(obj=new, old=old, operation="UPDATE")
    answer = await _review(reviewer, body)
    assert (answer["allowed"], answer["auditAnnotations"]["reason"]) == (True, "DeletionInProgress")
    [stored] = await store.query(RecordQuery(uid=body["request"]["uid"]))
    assert (stored.record.allowed, stored.record.reason, stored.record.operation) == (
        True,
        "DeletionInProgress",
        "UPDATE",
    )
    # Without the deletion, the same UPDATE is judged, and denied.
    for obj in (new, old):
        obj["metadata"].pop("deletionTimestamp", None)
    assert (await _review(reviewer, make_review(obj=new, old=old, operation="UPDATE")))["allowed"] is False


async def test_a_shipped_operator_kind_is_judged_by_its_pod_templates(
    demo_material: Material, store: SQLiteStore, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    template = {"spec": {"containers": [{"name": "ray-head", "image": OFF_LIST_IMAGE}]}}
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "prod"},
        "spec": {"headGroupSpec": {"template": template}},
    }
    answer = await _review(reviewer, make_review(obj=cluster))
    assert answer["allowed"] is False
    violations = json.loads(answer["auditAnnotations"]["violations"])
    # The image where it is, and no engine in the pod template where one would be mounted.
    assert {v["path"] for v in violations} == {
        "spec.headGroupSpec.template.spec.containers[0].image",
        "spec.headGroupSpec.template.spec.volumes",
    }
    assert "warnings" not in answer


async def test_a_kind_trtguard_does_not_know_is_judged_as_found_never_admitted_unjudged(
    demo_material: Material, store: SQLiteStore, make_review: ReviewFactory
) -> None:
    """The chart never sends such kinds; a webhook configured by hand to send them must not wave them by."""
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    custom = {
        "apiVersion": "example.com/v1",
        "kind": "Predictor",
        "metadata": {"name": "p", "namespace": "prod"},
        "spec": {"server": {"template": {"spec": {"containers": [{"name": "s", "image": OFF_LIST_IMAGE}]}}}},
    }
    answer = await _review(reviewer, make_review(obj=custom))
    assert answer["allowed"] is False
    assert answer["warnings"] == [
        "trtguard does not know example.com/v1/Predictor; it judged the images found in the whole object"
    ]
    violations = json.loads(answer["auditAnnotations"]["violations"])
    assert "spec.server.template.spec.containers[0].image" in {v["path"] for v in violations}
    # One that names no image is admitted, and says why.
    empty = {**custom, "spec": {"replicas": 1}}
    answer = await _review(reviewer, make_review(obj=empty))
    assert (answer["allowed"], answer["auditAnnotations"]["reason"]) == (True, "NotAWorkload")
    assert answer["warnings"] == [
        "trtguard judged nothing: it is not a workload kind trtguard knows and names no container image"
    ]


async def test_a_rollout_that_takes_its_template_from_a_deployment_is_admitted_with_why(
    demo_material: Material, store: SQLiteStore, make_review: ReviewFactory
) -> None:
    reviewer = _reviewer(demo_material.policies, LocalEvidence(demo_material.attestations), store)
    rollout = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "r", "namespace": "prod"},
        "spec": {"workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    answer = await _review(reviewer, make_review(obj=rollout))
    assert (answer["allowed"], answer["auditAnnotations"]["reason"]) == (True, "NotAWorkload")
    assert answer["warnings"] == [
        "trtguard judged nothing: its Pods come from the object spec.workloadRef names (checked on its own)"
    ]
