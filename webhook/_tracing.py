"""OpenTelemetry spans for admission reviews, only when an OTLP endpoint is configured.

The ``opentelemetry`` packages are an optional extra (``pip install trtguard[otel]``); without an endpoint
nothing is imported and spans cost nothing. The tracer provider is private to this object: trtguard never
installs a process-global provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from verifier.base import InputError

AttributeValue = str | bool | int | float


class Span(Protocol):
    """The part of a span the webhook uses."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Attach one attribute."""
        ...


class _NoSpan:
    """The span, and the block around it, while tracing is off: one object for every request."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Ignored: tracing is off."""

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *_: object) -> None:
        return None


_NO_SPAN = _NoSpan()


class Tracing:
    """Creates spans that go to ``endpoint`` over OTLP/HTTP, or does nothing when ``endpoint`` is ``None``.

    ``endpoint`` is the collector's base URL (``http://otel-collector:4318``), as in
    ``OTEL_EXPORTER_OTLP_ENDPOINT``; ``/v1/traces`` is appended unless it is already there.
    """

    def __init__(self, endpoint: str | None, *, service_name: str = "trtguard", timeout: float = 5.0) -> None:
        self.endpoint = endpoint
        self._provider: Any = None
        self._tracer: Any = None
        if endpoint is None:
            return
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415
            from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
            from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
            from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
        except ImportError:
            raise InputError(
                "--otlp-endpoint needs the OpenTelemetry packages",
                location="--otlp-endpoint",
                hint="pip install 'trtguard[otel]', or leave the OTLP endpoint unset",
            ) from None
        url = endpoint.rstrip("/")
        if not url.endswith("/v1/traces"):
            url += "/v1/traces"
        self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        # The batch processor exports from its own thread: a slow collector never delays an admission.
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=timeout)))
        self._tracer = self._provider.get_tracer("trtguard.webhook")

    @property
    def enabled(self) -> bool:
        """True when spans are exported."""
        return self._tracer is not None

    def span(self, name: str, **attributes: AttributeValue | None) -> contextlib.AbstractContextManager[Span]:
        """A span around the block (a child of the current one); ``None`` attributes are left out."""
        if self._tracer is None:
            # Three spans per admission: while tracing is off, no generator-based context manager for each.
            return _NO_SPAN
        return self._span(name, attributes)

    @contextlib.contextmanager
    def _span(self, name: str, attributes: dict[str, AttributeValue | None]) -> Iterator[Span]:
        clean = {key: value for key, value in attributes.items() if value is not None}
        with self._tracer.start_as_current_span(name, attributes=clean) as span:
            yield span

    def flush(self, timeout_millis: int = 5000) -> None:
        """Export the spans that are still buffered."""
        if self._provider is not None:
            self._provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Flush and stop the exporter thread."""
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None
            self._tracer = None
