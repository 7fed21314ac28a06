"""webhook/_app.py end to end: ``trtguard serve`` over real TLS, called the way kube-apiserver calls it.

Every answer goes through ``verify_admission_response`` (the API server's own checks). The server runs the
bundled policies with freshly generated keys and signed demo attestations (namespaces ``prod``/``prod-*``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import shutil
import sqlite3
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from decisionlog import RecordQuery, SQLiteStore
from tests.support.harness import PodFactory, ReviewFactory, Verifier, WaitUntil, WebhookProcess
from trtguard.demo.material import OFF_LIST_IMAGE, TENSORRT_IMAGE, UNPINNED_IMAGE, Material
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._app import WebhookServices, _api_timeout, create_app
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._settings import ServeSettings
from webhook._tracing import Tracing
from webhook._wire import AdmissionRequest

ADMISSION = "admission"


def _as_v1_review(document: object) -> dict[str, Any] | None:
    """What the API server would send for this fixture: the request wrapped as ``admission.k8s.io/v1``."""
    if not isinstance(document, dict):
        return None
    request = document.get("request") if "request" in document else document
    if not isinstance(request, dict):
        return None
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": copy.deepcopy(request)}


def _uid(document: object) -> str:
    """The request uid of a fixture known to have one."""
    assert isinstance(document, dict)
    request = document.get("request", document)
    assert isinstance(request, dict)
    uid = request.get("uid")
    assert isinstance(uid, str)
    return uid


# What the fixture would get as a v1 review in its own namespace (no bundled policy matches those).
_EXPECTED_V1 = {
    "connaisseur-11_role_non_workload.json": (True, "NotAWorkload"),
    "kubewarden-trp-ingress_non_workload.json": (True, "NotAWorkload"),
    "connaisseur-12_err_pod_not_a_pod.json": (False, "PolicyViolation"),
    "kubewarden-deployment_delete_bare_request.json": (True, "OperationNotJudged"),
    "kubewarden-pod_delete_bare_request.json": (True, "OperationNotJudged"),
    "connaisseur-28_deletion_timestamp_both.json": (True, "DeletionInProgress"),
    "connaisseur-29_deletion_timestamp_new_only.json": (True, "DeletionInProgress"),
}
# UPDATEs whose images and engines are the same in object and oldObject.
_UNCHANGED_UPDATES = {
    "connaisseur-10_replicaset_update.json",
    "kubewarden-deployment_update_bare_request.json",
}
# Not answerable whatever the wrapper: the API server counts these as failed calls.
_UNANSWERABLE = {
    "connaisseur-21_broken_request.json": 422,  # no uid, no kind
    "connaisseur-25_null_body.json": 400,  # JSON null
    "k8s-api-admission.k8s.io.v1beta1.AdmissionReview.json": 422,
    "k8s-api-admission.k8s.io.v1.AdmissionReview.yaml": 400,  # not JSON
}
# A v1 review with a uid but malformed otherwise: answered, with a denial.
_MALFORMED_V1 = {
    "k8s-api-admission.k8s.io.v1.AdmissionReview.json": "request.operation",  # operation "operationValue"
}


async def test_every_shared_fixture_as_sent_gets_a_protocol_valid_answer(
    shared_admission_review: str,
    shared_fixtures: Path,
    demo_webhook: WebhookProcess,
    verify_admission_response: Verifier,
) -> None:
    name = shared_admission_review
    raw = (shared_fixtures / ADMISSION / name).read_bytes()
    try:
        document = json.loads(raw)
    except ValueError:
        document = None
    async with demo_webhook.client() as client:
        response = await client.post(raw)
    is_v1 = isinstance(document, dict) and document.get("apiVersion") == "admission.k8s.io/v1"
    if name in _MALFORMED_V1:
        answer = verify_admission_response(_uid(document), response)
        assert answer["allowed"] is False
        assert (answer["status"]["code"], answer["status"]["reason"]) == (400, "BadRequest")
        assert _MALFORMED_V1[name] in answer["status"]["message"]
    elif is_v1 and name not in _UNANSWERABLE:
        answer = verify_admission_response(_uid(document), response)
        assert (answer["allowed"], answer["auditAnnotations"]["reason"]) == _EXPECTED_V1.get(
            name, (True, "Allowed")
        )
    else:
        # Not a v1 review (v1beta1, a bare request, null, YAML, no uid): an HTTP error, never an answer,
        # so that the API server counts a failed call and its failurePolicy decides.
        assert response.status_code in (400, 422), response.text
        status = response.json()
        assert status["kind"] == "Status" and status["status"] == "Failure"
        assert status["code"] == response.status_code
        assert status["message"] and "Traceback" not in status["message"]
        if name in _UNANSWERABLE:
            assert response.status_code == _UNANSWERABLE[name]


async def test_every_shared_fixture_wrapped_as_v1_gets_the_expected_verdict(
    shared_admission_request: str,
    shared_fixtures: Path,
    demo_webhook: WebhookProcess,
    verify_admission_response: Verifier,
) -> None:
    name = shared_admission_request
    document = json.loads((shared_fixtures / ADMISSION / name).read_bytes())
    body = _as_v1_review(document)
    async with demo_webhook.client() as client:
        response = await client.post(json.dumps(body).encode())
    answer = verify_admission_response(_uid(document), response)
    assert (answer["allowed"], answer["auditAnnotations"]["reason"]) == _EXPECTED_V1.get(
        name, (True, "Allowed")
    )
    if answer["auditAnnotations"]["reason"] == "NotAWorkload":
        assert answer["warnings"] == [
            "trtguard judged nothing: it is not a workload kind trtguard knows and names no container image"
        ]


async def test_every_shared_workload_in_prod_is_judged_by_the_policies(
    shared_admission_request: str,
    shared_fixtures: Path,
    demo_webhook: WebhookProcess,
    verify_admission_response: Verifier,
) -> None:
    """Moved to ``prod``, the fixtures' unsigned public images are denied with a message that names the
    policy, the rule, the image and the fix; what must never be blocked still passes."""
    name = shared_admission_request
    body = _as_v1_review(json.loads((shared_fixtures / ADMISSION / name).read_bytes()))
    assert body is not None
    request = body["request"]
    request["namespace"] = "prod"
    for key in ("object", "oldObject"):
        if isinstance(request.get(key), dict) and isinstance(request[key].get("metadata"), dict):
            request[key]["metadata"]["namespace"] = "prod"
    async with demo_webhook.client() as client:
        answer = verify_admission_response(request["uid"], await client.post(body))
    reason = answer["auditAnnotations"]["reason"]
    if name in _UNCHANGED_UPDATES:
        # Nothing about the images changed: nothing is judged again, whatever the namespace.
        assert (answer["allowed"], reason) == (True, "Allowed"), answer
        return
    if name in _EXPECTED_V1 and _EXPECTED_V1[name][0]:
        assert answer["allowed"], answer
        assert reason == _EXPECTED_V1[name][1]
        return
    assert not answer["allowed"], answer
    assert answer["status"]["code"] == 403
    assert reason == "PolicyViolation"
    message = answer["status"]["message"]
    assert "fix:" in message
    violations = json.loads(answer["auditAnnotations"]["violations"])
    assert violations and all({"policy", "rule", "action"} <= set(v) for v in violations)
    assert answer["auditAnnotations"]["policy-revision"].startswith("sha256:")


def _data(data_dir: Path, name: str) -> dict[str, Any]:
    review: dict[str, Any] = json.loads((data_dir / name).read_text())
    return review


@pytest.mark.parametrize(
    "name",
    [
        "700-pod-ephemeralcontainers-update-review.json",
        "702-pod-image-volume-engine-review.json",
        "703-pod-update-one-image-review.json",
        "705-deployment-requestkind-differs-review.json",
    ],
)
def test_data_files_name_the_demo_fp16_engine(data_dir: Path, demo_material: Material, name: str) -> None:
    # The demo engine's artifact digest is deterministic; when the artifact layout changes, these files
    # must follow, or the tests that use them fail for the wrong reason.
    assert demo_material.engines["fp16"] in (data_dir / name).read_text(), (
        f"tests/data/{name} names another fp16 engine than the demo material: {demo_material.engines['fp16']}"
    )


async def test_ephemeral_container_subresource_judges_the_added_container(
    data_dir: Path, demo_webhook: WebhookProcess, verify_admission_response: Verifier
) -> None:
    body = _data(data_dir, "700-pod-ephemeralcontainers-update-review.json")
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert not answer["allowed"]
    message = answer["status"]["message"]
    assert "docker.io/library/busybox:1.36" in message
    fields = {c["field"] for c in answer["status"]["details"]["causes"]}
    # kubectl debug --target=server: the debugger joins the server's process namespace, so it reads the
    # engine, which is judged again with it among its readers (issue 24 review, F2)
    assert fields == {"spec.ephemeralContainers[0].image", "spec.volumes[0].image.reference"}
    assert "with ephemeralContainer 'debugger-x7k2p' (spec.ephemeralContainers[0].image)" in message
    assert "container 'server'" not in message  # the running container did not change: no finding of its own


async def test_dry_run_gets_the_same_verdict_and_is_logged_as_one(
    data_dir: Path, demo_webhook: WebhookProcess, verify_admission_response: Verifier
) -> None:
    dry = _data(data_dir, "701-pod-create-dry-run-review.json")
    real = copy.deepcopy(dry)
    real["request"]["uid"] = "a7000000-0000-4000-8000-0000000007ff"
    real["request"]["dryRun"] = False
    async with demo_webhook.client() as client:
        dry_answer = verify_admission_response(dry["request"]["uid"], await client.post(dry))
        real_answer = verify_admission_response(real["request"]["uid"], await client.post(real))
    assert dry_answer["allowed"] is real_answer["allowed"] is False
    assert dry_answer["status"] == real_answer["status"]
    assert OFF_LIST_IMAGE in dry_answer["status"]["message"]
    assert dry_answer["auditAnnotations"]["dry-run"] == "true"
    assert "dry-run" not in real_answer["auditAnnotations"]
    rows = _decision_rows(demo_webhook.workdir, dry["request"]["uid"], real["request"]["uid"])
    assert rows == {dry["request"]["uid"]: (1, 0), real["request"]["uid"]: (0, 0)}  # (dry_run, allowed)


def _sqlite_bytes(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _decision_rows(workdir: Path, *uids: str) -> dict[str, tuple[int, int]]:
    with sqlite3.connect(f"file:{workdir / 'decisions.db'}?mode=ro", uri=True) as conn:
        rows = [
            row
            for uid in uids
            for row in conn.execute(
                "SELECT uid, dry_run, allowed FROM trtguard_decisions WHERE uid = ?", (uid,)
            )
        ]
    return {uid: (dry, allowed) for uid, dry, allowed in rows}


async def test_engine_in_an_image_volume_is_admitted(
    data_dir: Path, demo_webhook: WebhookProcess, verify_admission_response: Verifier
) -> None:
    body = _data(data_dir, "702-pod-image-volume-engine-review.json")
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert answer["allowed"], answer
    assert answer["auditAnnotations"]["reason"] == "Allowed"


async def test_pod_update_judges_only_the_changed_image(
    data_dir: Path, demo_webhook: WebhookProcess, verify_admission_response: Verifier
) -> None:
    body = _data(data_dir, "703-pod-update-one-image-review.json")
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert not answer["allowed"]
    message = answer["status"]["message"]
    assert OFF_LIST_IMAGE in message
    assert "busybox" not in message  # the unchanged sidecar is not judged again


async def test_job_finalizer_removal_is_never_blocked(
    data_dir: Path, demo_webhook: WebhookProcess, verify_admission_response: Verifier
) -> None:
    body = _data(data_dir, "704-job-pod-finalizer-removal-update-review.json")
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert answer["allowed"], answer
    # The same Pod created afresh in prod would be denied: the pass comes from judging only changes.
    create = copy.deepcopy(body)
    create["request"].update(uid="a7000000-0000-4000-8000-0000000007fe", operation="CREATE", oldObject=None)
    async with demo_webhook.client() as client:
        denied = verify_admission_response(create["request"]["uid"], await client.post(create))
    assert not denied["allowed"]


async def test_request_kind_differing_from_kind_is_decoded_by_kind(
    data_dir: Path, demo_webhook: WebhookProcess, verify_admission_response: Verifier
) -> None:
    body = _data(data_dir, "705-deployment-requestkind-differs-review.json")
    assert body["request"]["requestKind"]["version"] == "v1beta2"
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert answer["allowed"], answer


@pytest.mark.parametrize(
    ("image", "engine", "fragment"),
    [
        (UNPINNED_IMAGE, "fp16", "not pinned by digest"),
        (OFF_LIST_IMAGE, "fp16", "not allowed by any image rule"),
        (TENSORRT_IMAGE, "unsigned", "build manifest not signed"),
        (TENSORRT_IMAGE, "int8-uncalibrated", "no calibration evidence"),
    ],
)
async def test_denials_name_policy_rule_subject_and_fix(
    image: str,
    engine: str,
    fragment: str,
    demo_material: Material,
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    body = make_review(obj=make_pod("p", image, engine=demo_material.engines[engine]))
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert not answer["allowed"]
    assert answer["status"]["code"] == 403
    assert answer["status"]["reason"] == "PolicyViolation"
    assert fragment in answer["status"]["message"]
    assert "; fix: " in answer["status"]["message"]


async def test_delete_and_connect_are_allowed(
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    bad = make_pod("p", OFF_LIST_IMAGE)
    async with demo_webhook.client() as client:
        for operation, obj, old in (("DELETE", None, bad), ("CONNECT", {"kind": "PodExecOptions"}, None)):
            body = make_review(obj=bad, operation=operation)
            body["request"]["object"], body["request"]["oldObject"] = obj, old
            answer = verify_admission_response(body["request"]["uid"], await client.post(body))
            assert answer["allowed"]
            assert answer["auditAnnotations"]["reason"] == "OperationNotJudged"


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b"{not json", 400, "not JSON"),
        (b"null", 400, "JSON null"),
        (b"[]", 400, "an array"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).encode(),
            422,
            "expected apiVersion",
        ),
        (b"[" * 50_000, 400, "nested too deeply"),
        (b"[" * 300_000, 400, "nested too deeply"),  # large enough to be decoded in a thread
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            422,
            "request is null",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"operation": "CREATE", "kind": {"kind": "Pod"}},
                }
            ).encode(),
            422,
            "uid is missing",
        ),
    ],
)
async def test_malformed_reviews_are_failed_calls_not_answers(
    demo_webhook: WebhookProcess, body: bytes, status: int, fragment: str
) -> None:
    async with demo_webhook.client() as client:
        response = await client.post(body)
    assert response.status_code == status
    assert fragment in response.json()["message"]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"operation": "PATCH"}, "request.operation is 'PATCH'"),
        # Unhashable: an HTTP 500 before (failurePolicy Ignore admits a failed call).
        ({"operation": ["CREATE"]}, "request.operation is ['CREATE']"),
        ({"operation": {}}, "request.operation is {}"),
        ({"dryRun": "no"}, "request.dryRun is a string"),
        ({"requestKind": {"group": "", "version": "v1"}}, "request.requestKind.kind is missing"),
        (
            {"resource": {"group": "", "version": "v1", "resource": 7}},
            "request.resource.resource is a number",
        ),
    ],
)
async def test_a_malformed_request_with_a_uid_is_denied_not_a_failed_call(
    change: dict[str, Any],
    fragment: str,
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    """An HTTP error would be a failed call, which ``failurePolicy: Ignore`` admits; a denial cannot be."""
    body = make_review(obj=make_pod("good", TENSORRT_IMAGE, namespace="dev"))
    body["request"].update(change)
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
        metrics = (await client.get("/metrics")).text
    assert answer["allowed"] is False
    assert (answer["status"]["code"], answer["status"]["reason"]) == (400, "BadRequest")
    assert fragment in answer["status"]["message"]
    assert 'trtguard_admission_review_failures_total{reason="bad_request"}' in metrics
    # Answered, so recorded (it was not, before); an odd operation is no new metric label.
    assert _decision_rows(demo_webhook.workdir, body["request"]["uid"]) == {body["request"]["uid"]: (0, 0)}
    assert 'operation="PATCH"' not in metrics


async def test_a_body_over_7_mib_is_refused_without_being_read(
    demo_webhook: WebhookProcess, make_review: ReviewFactory
) -> None:
    """Declared too large: 413 at once, before any of the body is sent."""
    host, port = "127.0.0.1", demo_webhook.port
    context = ssl.create_default_context(cafile=str(demo_webhook.ca))
    reader, writer = await asyncio.open_connection(
        host, port, ssl=context, server_hostname="trtguard.trtguard.svc"
    )
    started = time.perf_counter()
    writer.write(
        b"POST /validate?timeout=10s HTTP/1.1\r\nHost: trtguard.trtguard.svc\r\n"
        b"Content-Type: application/json\r\nContent-Length: 8388608\r\n\r\n{"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 413")
    assert b"connection: close" in head.lower()
    assert time.perf_counter() - started < 2
    writer.close()


async def test_a_body_that_trickles_in_is_cut_off(demo_webhook: WebhookProcess) -> None:
    """Headers, then nothing: the server gives up when the API server would have (``?timeout=1s``)."""
    context = ssl.create_default_context(cafile=str(demo_webhook.ca))
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", demo_webhook.port, ssl=context, server_hostname="trtguard.trtguard.svc"
    )
    started = time.perf_counter()
    writer.write(
        b"POST /validate?timeout=1s HTTP/1.1\r\nHost: trtguard.trtguard.svc\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 408")
    assert 0.9 < time.perf_counter() - started < 5
    writer.close()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_a_chunked_body_over_7_mib_is_refused_without_holding_it(demo_webhook: WebhookProcess) -> None:
    """No length given: the server counts while reading and refuses at the limit; 64 MiB offered leave its
    memory where it was (it never holds more than the limit, and drops the rest)."""
    pid = demo_webhook.pid

    async def chunks() -> AsyncIterator[bytes]:
        block = b" " * 65536
        for _ in range(1024):
            yield block

    before = _rss_mib(pid)
    async with demo_webhook.client() as client:
        response = await client.post(chunks())
    assert response.status_code == 413
    assert response.json()["reason"] == "RequestEntityTooLarge"
    assert _rss_mib(pid) - before < 16


async def test_a_body_just_under_the_limit_is_answered(
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    obj = make_pod("big", OFF_LIST_IMAGE, namespace="dev")
    obj["metadata"]["annotations"] = {"padding": "x" * (6 * 1024 * 1024)}
    body = make_review(obj=obj)
    async with demo_webhook.client() as client:
        answer = verify_admission_response(body["request"]["uid"], await client.post(body))
    assert answer["allowed"]


async def test_keep_alive_connection_serves_many_reviews(
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    """The API server reuses connections: one TLS handshake, many HTTP/1.1 requests."""
    async with demo_webhook.client() as client:
        for n in range(20):
            body = make_review(obj=make_pod(f"p{n}", TENSORRT_IMAGE, namespace="dev"))
            response = await client.post(body)
            verify_admission_response(body["request"]["uid"], response)
            assert response.http_version == "HTTP/1.1"


async def test_probes_and_metrics(
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    async with demo_webhook.client() as client:
        body = make_review(obj=make_pod("m", OFF_LIST_IMAGE))
        verify_admission_response(body["request"]["uid"], await client.post(body))
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        detail = ready.json()
        assert detail["ready"] is True
        assert detail["policies"]["revision"].startswith("sha256:")
        assert detail["decision_log"] == {"store": "sqlite:///decisions.db", "ready": True}
        assert detail["tls"]["last_reload_error"] is None
        text = (await client.get("/metrics")).text
    assert (
        'trtguard_admission_reviews_total{decision="deny",dry_run="false",kind="Pod",operation="CREATE"}'
        in text
    )
    assert "trtguard_admission_review_duration_seconds_bucket" in text
    assert 'trtguard_decision_log_writes_total{result="written"}' in text
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["trtguard_tls_certificate_expiry_timestamp_seconds"] > time.time()
    assert samples["trtguard_ready"] == 1
    assert samples["trtguard_decision_log_undelivered_total"] == 0  # every record confirmed in time
    # Measured at the last checkpoint (every second): never more than the files hold now.
    assert (
        0
        < samples["trtguard_decision_log_size_bytes"]
        <= _sqlite_bytes(demo_webhook.workdir / "decisions.db")
    )
    # The same on the plain-HTTP probe port.
    async with httpx.AsyncClient() as plain:
        probe = await plain.get(f"http://127.0.0.1:{demo_webhook.probe_port}/readyz")
        metrics = await plain.get(f"http://127.0.0.1:{demo_webhook.probe_port}/metrics")
        validate = await plain.post(f"http://127.0.0.1:{demo_webhook.probe_port}/validate", content=b"{}")
    assert probe.status_code == 200 and probe.json()["ready"] is True
    assert "trtguard_admission_reviews_total" in metrics.text
    assert validate.status_code in (404, 405)  # the probe port never judges requests


async def test_one_log_line_per_decision_with_its_uid(
    demo_webhook: WebhookProcess,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    body = make_review(obj=make_pod("logged", OFF_LIST_IMAGE))
    uid = body["request"]["uid"]
    async with demo_webhook.client() as client:
        verify_admission_response(uid, await client.post(body))
    lines = [r for r in demo_webhook.log_records() if r.get("uid") == uid]
    assert len(lines) == 1
    line = lines[0]
    assert line["message"] == "admission decision"
    assert line["level"] == "info"
    assert line["allowed"] is False and line["reason"] == "PolicyViolation"
    assert line["namespace"] == "prod" and line["name"] == "logged"
    assert line["policy_revision"].startswith("sha256:")


async def test_tls_is_what_the_api_server_expects(demo_webhook: WebhookProcess) -> None:
    context = ssl.create_default_context(cafile=str(demo_webhook.ca))
    context.set_alpn_protocols(["h2", "http/1.1"])
    _, writer = await asyncio.open_connection(
        "127.0.0.1", demo_webhook.port, ssl=context, server_hostname="trtguard.trtguard.svc"
    )
    ssl_object = writer.get_extra_info("ssl_object")
    assert ssl_object.selected_alpn_protocol() == "http/1.1"
    assert ssl_object.version() in ("TLSv1.2", "TLSv1.3")
    writer.close()
    with pytest.raises(ssl.SSLCertVerificationError):
        await asyncio.open_connection(
            "127.0.0.1",
            demo_webhook.port,
            ssl=ssl.create_default_context(),
            server_hostname="trtguard.trtguard.svc",
        )


class _FailingReviewer(Reviewer):
    """A reviewer with a bug: it raises instead of answering."""

    async def review(
        self, request: AdmissionRequest, *, api_timeout: float | None, started: float
    ) -> dict[str, Any]:
        raise RuntimeError("a bug in the webhook")


def _services(
    material: Material, tmp_path: Path, policies: PolicyStore | None = None, *, failing: bool = False
) -> WebhookServices:
    if policies is None:
        policies = PolicyStore(material.policies, LocalEvidence(material.attestations))
        policies.load()
    store = SQLiteStore(tmp_path / "decisions.db")
    metrics = Metrics()
    reviewer = (_FailingReviewer if failing else Reviewer)(policies, store, metrics)
    return WebhookServices(policies, store, metrics, reviewer, Tracing(None))


class _FailingRefusals(_FailingReviewer):
    """A reviewer whose denials fail too (recording, tracing: any bug)."""

    async def refuse(self, request: AdmissionRequest, **_: Any) -> dict[str, Any]:
        raise RuntimeError("a bug in the webhook's refusal")


async def test_a_failing_refusal_of_a_malformed_review_is_a_denial_not_an_http_500(
    demo_material: Material,
    tmp_path: Path,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    policies = PolicyStore(demo_material.policies, LocalEvidence(demo_material.attestations))
    policies.load()
    store, metrics = SQLiteStore(tmp_path / "decisions.db"), Metrics()
    services = WebhookServices(
        policies, store, metrics, _FailingRefusals(policies, store, metrics), Tracing(None)
    )
    app = create_app(ServeSettings(policies=demo_material.policies, insecure_http=True), services)
    body = make_review(obj=make_pod("good", TENSORRT_IMAGE, namespace="dev"))
    body["request"]["operation"] = "PATCH"  # malformed, but its uid is known: answered with a denial
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook") as client:
        response = await client.post("/validate?timeout=5s", content=json.dumps(body).encode())
    answer = verify_admission_response(body["request"]["uid"], response)
    assert answer["allowed"] is False
    assert (answer["status"]["code"], answer["status"]["reason"]) == (500, "InternalError")


async def test_a_failure_inside_the_webhook_is_a_denial_not_an_http_500(
    demo_material: Material,
    tmp_path: Path,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
    caplog: pytest.LogCaptureFixture,
) -> None:
    services = _services(demo_material, tmp_path, failing=True)
    app = create_app(ServeSettings(policies=demo_material.policies, insecure_http=True), services)
    body = make_review(obj=make_pod("good", TENSORRT_IMAGE, namespace="dev"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook") as client:
        response = await client.post("/validate?timeout=5s", content=json.dumps(body).encode())
        metrics = (await client.get("/metrics")).text
    answer = verify_admission_response(body["request"]["uid"], response)
    assert answer["allowed"] is False
    assert (answer["status"]["code"], answer["status"]["reason"]) == (500, "InternalError")
    assert "Traceback" not in answer["status"]["message"]
    assert 'trtguard_admission_review_failures_total{reason="internal_error"} 1.0' in metrics
    assert 'trtguard_admission_error_denials_total{reason="internal_error"} 1.0' in metrics
    # Its decision log was never opened: /readyz says 503, and the gauge the alerts read says the same.
    assert "\ntrtguard_ready 0.0\n" in metrics
    [logged] = [r for r in caplog.records if r.getMessage() == "review failed; denying"]
    assert logged.exc_info is not None and "a bug in the webhook" in str(logged.exc_info[1])


async def test_a_background_task_that_stops_is_logged(
    demo_material: Material, tmp_path: Path, wait_until: WaitUntil, caplog: pytest.LogCaptureFixture
) -> None:
    """The watchers outlive failed reloads; anything that still ends one is said, not silent."""
    folder = tmp_path / "policies"
    shutil.copytree(demo_material.policies, folder)

    calls: list[bool] = []

    def broken_callback(store: PolicyStore, succeeded: bool) -> None:
        calls.append(succeeded)
        if len(calls) > 1:  # the first load goes through; every reload after it fails in the callback
            raise RuntimeError("a bug in a reload callback")

    policies = PolicyStore(folder, LocalEvidence(demo_material.attestations), on_reload=broken_callback)
    policies.load()
    services = _services(demo_material, tmp_path, policies)
    settings = ServeSettings(policies=folder, insecure_http=True, reload_interval=0.05)
    app = create_app(settings, services)
    async with app.router.lifespan_context(app):
        (folder / "signed-images.yaml").write_text(
            (folder / "signed-images.yaml").read_text().replace("onError: Deny", "onError: Warn")
        )
        stopped = "background task trtguard-policy-watch stopped"
        await wait_until(lambda: any(r.getMessage().startswith(stopped) for r in caplog.records), within=10)
    [logged] = [r for r in caplog.records if r.getMessage().startswith(stopped)]
    assert logged.levelno == logging.ERROR
    assert "a bug in a reload callback" in logged.getMessage()


async def test_a_failure_inside_the_webhook_is_a_recorded_denial(
    demo_material: Material,
    tmp_path: Path,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    services = _services(demo_material, tmp_path, failing=True)
    app = create_app(ServeSettings(policies=demo_material.policies, insecure_http=True), services)
    body = make_review(obj=make_pod("good", TENSORRT_IMAGE, namespace="dev"))
    await services.store.open()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
            response = await client.post("/validate?timeout=5s", content=json.dumps(body).encode())
        answer = verify_admission_response(body["request"]["uid"], response)
        [stored] = await services.store.query(RecordQuery(uid=body["request"]["uid"]))
    finally:
        await services.store.close()
    assert (answer["allowed"], answer["status"]["code"]) == (False, 500)
    assert (stored.record.allowed, stored.record.reason, stored.record.name) == (
        False,
        "InternalError",
        "good",
    )


async def test_the_admission_routes_answer_as_starlette_routes_did(
    demo_material: Material,
    tmp_path: Path,
    make_pod: PodFactory,
    make_review: ReviewFactory,
    verify_admission_response: Verifier,
) -> None:
    """``POST /validate`` and ``/mutate`` skip FastAPI's stack; what reaches the stack still finds them."""
    services = _services(demo_material, tmp_path)
    app = create_app(ServeSettings(policies=demo_material.policies, insecure_http=True), services)
    body = make_review(obj=make_pod("good", TENSORRT_IMAGE, namespace="dev"))
    await services.store.open()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
            answers = [
                await client.post(f"{path}?timeout=5s", content=json.dumps(body).encode())
                for path in ("/validate", "/mutate")
            ]
            other_method = await client.get("/validate")
            trailing_slash = await client.post("/validate/", content=b"{}")
    finally:
        await services.store.close()
    for response in answers:
        assert verify_admission_response(body["request"]["uid"], response)["allowed"] is True
        assert response.headers["content-type"] == "application/json"
        assert response.headers["content-length"] == str(len(response.content))
    assert (other_method.status_code, other_method.headers["allow"]) == (405, "POST")
    redirect = (trailing_slash.status_code, trailing_slash.headers["location"])
    assert redirect == (307, "http://webhook/validate")


def test_the_api_timeout_is_read_from_the_query_string_as_starlette_reads_it() -> None:
    assert _api_timeout(b"timeout=10s") == 10.0
    assert _api_timeout(b"timeout=1m30s&timeout=5s") == 5.0  # the last one, as query_params.get gives
    assert _api_timeout(b"other=1&timeout=1%2E5s") == 1.5  # percent-decoded
    assert _api_timeout(b"") is None
    assert _api_timeout(b"timeout=soon") is None
