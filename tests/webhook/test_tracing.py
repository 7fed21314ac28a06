"""webhook/_tracing.py: spans exported over OTLP/HTTP to a real (loopback) receiver, or none at all."""

from __future__ import annotations

import builtins
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from decisionlog import SQLiteStore
from tests.support.harness import PodFactory, ReviewFactory
from trtguard.demo.material import TENSORRT_IMAGE, Material
from verifier.base._errors import InputError
from verifier.evidence_folder import LocalEvidence
from webhook._admission import Reviewer
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._tracing import Tracing
from webhook._wire import parse_review_document


class _Collector(http.server.ThreadingHTTPServer):
    """Records the OTLP trace export requests it receives."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, ExportTraceServiceRequest]] = []

        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                collector.requests.append((self.path, self.headers["content-type"], message))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def spans(self) -> list[Span]:
        return [
            span
            for _, _, message in self.requests
            for resource in message.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join()


def _attributes(span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in span.attributes:
        value = item.value
        out[item.key] = value.string_value or value.bool_value or value.int_value
    return out


async def test_a_review_exports_its_spans(
    collector: _Collector,
    demo_material: Material,
    tmp_path: Path,
    make_pod: PodFactory,
    make_review: ReviewFactory,
) -> None:
    tracing = Tracing(f"http://127.0.0.1:{collector.server_address[1]}", service_name="trtguard-test")
    assert tracing.enabled
    store = SQLiteStore(tmp_path / "d.db")
    await store.open()
    policies = PolicyStore(demo_material.policies, LocalEvidence(demo_material.attestations))
    policies.load()
    reviewer = Reviewer(policies, store, Metrics(), tracing)
    body = make_review(obj=make_pod("traced", TENSORRT_IMAGE, engine=demo_material.engines["fp16"]))
    try:
        await reviewer.review(parse_review_document(body), api_timeout=10, started=time.perf_counter())
        tracing.flush()
    finally:
        await store.close()
        tracing.shutdown()

    path, content_type, message = collector.requests[0]
    assert path == "/v1/traces"
    assert content_type == "application/x-protobuf"
    resource = {a.key: a.value.string_value for a in message.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "trtguard-test"
    spans = {span.name: span for span in collector.spans()}
    assert set(spans) == {"admission.review", "policy.evaluate", "decisionlog.append"}
    root = spans["admission.review"]
    attributes = _attributes(root)
    assert attributes["k8s.admission.uid"] == body["request"]["uid"]
    assert attributes["k8s.admission.operation"] == "CREATE"
    assert attributes["k8s.namespace.name"] == "prod"
    assert attributes["trtguard.allowed"] is True
    for child in ("policy.evaluate", "decisionlog.append"):
        assert spans[child].parent_span_id == root.span_id
        assert spans[child].trace_id == root.trace_id
    assert policies.current is not None
    assert _attributes(spans["policy.evaluate"])["trtguard.policy_revision"] == policies.current.revision


def test_endpoint_that_names_the_traces_path_is_used_as_is(collector: _Collector) -> None:
    tracing = Tracing(f"http://127.0.0.1:{collector.server_address[1]}/v1/traces/")
    with tracing.span("x", a="b", skipped=None) as span:
        span.set_attribute("c", 1)
    tracing.flush()
    tracing.shutdown()
    assert [path for path, _, _ in collector.requests] == ["/v1/traces"]
    [exported] = collector.spans()
    assert _attributes(exported) == {"a": "b", "c": 1}


def test_without_an_endpoint_nothing_is_traced() -> None:
    tracing = Tracing(None)
    assert not tracing.enabled
    with tracing.span("x", a="b") as span:
        span.set_attribute("ignored", True)
    tracing.flush()
    tracing.shutdown()


def test_missing_opentelemetry_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(InputError, match="needs the OpenTelemetry packages") as raised:
        Tracing("http://collector:4318")
    assert "trtguard[otel]" in (raised.value.hint or "")
