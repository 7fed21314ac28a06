"""trtguard/cli/review.py: manifests sent to a real ``trtguard serve`` over TLS as the API server sends them.

The demo's Pods (one admitted, four denied) are written as the demo writes them, sent with ``trtguard
review`` and answered by the webhook; the requester reaches the decision log; UPDATE takes the old object; a
server that cannot be reached, an untrusted certificate and a mismatched answer are errors (exit 2), never
allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from decisionlog import RecordQuery, SQLiteStore
from tests.support.harness import SERVICE, WebhookProcess
from trtguard.cli import main
from trtguard.demo._run import scenarios, write_manifests
from trtguard.demo.material import Material


def cli(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def pods(demo_material: Material, tmp_path: Path) -> Path:
    manifests, _ = write_manifests(scenarios(demo_material), tmp_path)
    return manifests


def _server(webhook: WebhookProcess) -> list[str]:
    assert webhook.ca is not None
    return ["--server", f"https://127.0.0.1:{webhook.port}", "--ca", str(webhook.ca)]


def test_review_prints_the_webhooks_answers_like_check(demo_webhook: WebhookProcess, pods: Path) -> None:
    status, out, err = cli("review", pods, *_server(demo_webhook), "--as", "alice@corp", "--as-group", "ml")
    assert status == 1, err
    lines = out.splitlines()
    assert lines[0] == f"ALLOW  Pod prod/resnet50-fp16 ({pods}:1)"
    assert sum(line.startswith("DENY   Pod prod/") for line in lines) == 4
    assert f"DENY   Pod prod/resnet50-unpinned ({pods}:" in out and ": 403 PolicyViolation" in out
    assert "  x trusted-tensorrt-images/images:" in out and "; fix: " in out
    assert lines[-1].startswith("5 resources: 1 allowed, 4 denied, 0 errors; answered by https://127.0.0.1:")
    assert lines[-1].endswith("for alice@corp (groups: ml, system:authenticated)")

    async def newest() -> tuple[str | None, tuple[str, ...]]:
        store = SQLiteStore(demo_webhook.workdir / "decisions.db", read_only=True)
        await store.open()
        try:
            [record] = await store.query(RecordQuery(newest_first=True, limit=1))
        finally:
            await store.close()
        return record.record.user, record.record.groups

    assert asyncio.run(newest()) == ("alice@corp", ("ml", "system:authenticated"))


def test_review_json_and_the_server_name(demo_webhook: WebhookProcess, pods: Path) -> None:
    status, out, _ = cli(
        "review", pods, *_server(demo_webhook), "--tls-server-name", SERVICE, "--format", "json", "--dry-run"
    )
    assert status == 1
    answers = json.loads(out)
    assert [a["allowed"] for a in answers] == [True, False, False, False, False]
    assert answers[1]["response"]["status"]["reason"] == "PolicyViolation"


def test_an_update_sends_the_old_object(demo_webhook: WebhookProcess, pods: Path, tmp_path: Path) -> None:
    first = next(yaml.safe_load_all(pods.read_text()))
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(first))
    status, out, _ = cli(
        "review", tmp_path / "one.yaml", *_server(demo_webhook), "--operation", "UPDATE", "--old", pods
    )
    assert status == 0 and out.startswith("ALLOW  Pod prod/resnet50-fp16")
    other = {**first, "metadata": {**first["metadata"], "name": "elsewhere"}}
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    status, out, _ = cli(
        "review", tmp_path / "other.yaml", *_server(demo_webhook), "--operation", "UPDATE", "--old", pods
    )
    assert status == 2 and f"--old {pods} holds no Pod prod/elsewhere" in out
    status, _, err = cli("review", pods, *_server(demo_webhook), "--operation", "UPDATE")
    assert status == 2 and "--operation UPDATE and --old FILE go together" in err


def test_no_usable_answer_is_an_error_never_an_allow(
    demo_webhook: WebhookProcess, pods: Path, tmp_path: Path
) -> None:
    # Without the webhook's CA its certificate is not trusted.
    status, out, _ = cli("review", pods, "--server", f"https://127.0.0.1:{demo_webhook.port}")
    assert status == 2 and "ERROR  Pod prod/resnet50-fp16" in out and "cannot reach" in out
    assert "ALLOW" not in out


class _WrongUid(BaseHTTPRequestHandler):
    """A webhook that answers allowed: true for another request's uid."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        body = json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": "another", "allowed": True},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def wrong_uid_server() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _WrongUid)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    thread.join()


def test_an_answer_for_another_uid_is_refused(wrong_uid_server: int, pods: Path) -> None:
    status, out, _ = cli("review", pods, "--server", f"http://127.0.0.1:{wrong_uid_server}")
    assert status == 2 and "ALLOW" not in out
    assert "the API server would reject" in out and "not the request's" in out


def test_the_namespace_applied_to_is_in_the_title_and_no_policy_is_said(
    demo_webhook: WebhookProcess, pods: Path, tmp_path: Path
) -> None:
    """Attack 28 finding 6c: an object without a namespace, sent with --namespace, was titled without it,
    and an allow that no policy judged read as a plain ALLOW (``check`` says "(no policy applies)")."""
    first = next(yaml.safe_load_all(pods.read_text()))
    del first["metadata"]["namespace"]
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump(first))
    status, out, err = cli("review", tmp_path / "bare.yaml", *_server(demo_webhook), "--namespace", "prod")
    assert status == 0, err
    assert out.startswith(f"ALLOW  Pod prod/resnet50-fp16 ({tmp_path / 'bare.yaml'}:1)\n"), out
    status, out, _ = cli("review", tmp_path / "bare.yaml", *_server(demo_webhook), "--namespace", "dev")
    assert status == 0
    assert out.startswith(
        f"ALLOW (no policy applies) Pod dev/resnet50-fp16 ({tmp_path / 'bare.yaml'}:1)\n"
    ), out
    status, out, _ = cli("review", tmp_path / "bare.yaml", *_server(demo_webhook), "--format", "json")
    assert status == 0 and json.loads(out)[0]["namespace"] == "default"


def test_a_server_that_did_not_answer_is_not_said_to_have_answered(pods: Path) -> None:
    """Attack 28 finding 6b: "answered by https://127.0.0.1:1/validate" though nothing answered."""
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        status, out, _ = cli("review", pods, "--server", f"https://127.0.0.1:{port}")
    assert status == 2
    last = out.splitlines()[-1]
    assert last.startswith(
        f"5 resources: 0 allowed, 0 denied, 5 errors; https://127.0.0.1:{port}/validate did"
    )
    assert "did not answer; asked as kubernetes-admin" in last and "answered by" not in last
