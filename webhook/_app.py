"""The FastAPI application: ``POST /validate``, ``POST /mutate``, ``GET /healthz``, ``GET /readyz``,
``GET /metrics``.

``/mutate`` is the same review (same policies, same decision log) answered with the JSONPatch that pins what
``pinDigest`` rules verified (``webhook._admission``); everything below holds for both.

``create_app`` takes the settings and the already-built services (policy store, decision store, reviewer,
metrics, tracing, certificate reloader) and wires them to HTTP; it reads nothing from the environment. Its
lifespan runs the policy and certificate watchers, and opens the decision store unless ``trtguard serve``
already has (it opens the store before anything listens).

Once a request's uid is known, every outcome is an AdmissionReview answer: a malformed request and a failure
inside the webhook are denials, never an HTTP error that ``failurePolicy: Ignore`` would turn into an allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from decisionlog import DecisionStore, SpoolingStore
from webhook._admission import Reviewer
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._settings import ServeSettings
from webhook._tls import CertificateReloader
from webhook._tracing import Tracing
from webhook._wire import (
    MAX_BODY_BYTES,
    AdmissionRequest,
    ReviewError,
    deny_response,
    encode,
    parse_review,
    parse_timeout,
)

_log = logging.getLogger(__name__)

#: Bodies above this size are decoded in a thread, so a large review does not stall other requests.
THREAD_DECODE_BYTES: Final = 256 * 1024


@dataclass(slots=True)
class WebhookServices:
    """Everything the HTTP layer needs, built by ``trtguard serve`` (or a test)."""

    policies: PolicyStore
    store: DecisionStore
    metrics: Metrics
    reviewer: Reviewer
    tracing: Tracing
    certificates: CertificateReloader | None = None


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    """The client went away before sending the whole body (Starlette's ``ClientDisconnect``)."""


class _WebhookApp(FastAPI):
    """FastAPI, with ``POST /validate`` and ``POST /mutate`` served before its middleware and router.

    Those two read the raw ASGI messages themselves and answer every outcome (an AdmissionReview, or a
    metav1.Status before the uid is known), so FastAPI's stack around them (error, telemetry, body-limit and
    exception middleware, routing, a Request and a Response object) only added CPU to every admission
    (issue 31). An exception that escapes still becomes uvicorn's HTTP 500, as it did through the stack.
    Any other request, method or path (a ``root_path`` prefix included) takes the full stack.
    """

    def __init__(self, admissions: dict[str, _Admission], **options: Any) -> None:
        super().__init__(**options)
        self.admissions = admissions
        # Also routes of the router: what the fast path passes on (another method: 405) finds them there.
        for path, admission in admissions.items():
            self.router.routes.append(Route(path, admission, methods=["POST"], name=path.removeprefix("/")))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            admission = self.admissions.get(scope["path"])
            if admission is not None:
                await admission(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


@dataclass(frozen=True, slots=True)
class _Admission:
    """``POST /validate`` (or ``/mutate``, with a pinning reviewer) as a plain ASGI app."""

    settings: ServeSettings
    services: WebhookServices
    reviewer: Reviewer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = await self._admit(scope, receive)
        if isinstance(answer, Response):
            await answer(scope, receive, send)
            return
        # What Starlette's Response(answer, media_type="application/json") sends.
        headers = [(b"content-length", b"%d" % len(answer)), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    async def _admit(self, scope: Scope, receive: Receive) -> bytes | Response:
        """The encoded AdmissionReview answer, or a metav1.Status response while no uid is known."""
        settings, services = self.settings, self.services
        started = time.perf_counter()
        api_timeout = _api_timeout(scope["query_string"])
        try:
            # A body that trickles in is cut off when the API server itself would have given up, and never
            # later than --body-timeout (a client may ask for any ?timeout=).
            async with asyncio.timeout(min(api_timeout or settings.default_timeout, settings.body_timeout)):
                body = await _read_body(scope, receive)
        except _Disconnected:
            # Nobody is left to answer and nothing went wrong in the webhook: no ASGI error, no traceback.
            _log.debug("client disconnected before sending the whole AdmissionReview")
            return _status(400, "BadRequest", "the client disconnected before sending the body", close=True)
        except TimeoutError:
            services.metrics.review_failures.labels("bad_request").inc()
            return _status(408, "Timeout", "the request body did not arrive in time", close=True)
        except _TooLarge:
            services.metrics.review_failures.labels("too_large").inc()
            return _status(
                413,
                "RequestEntityTooLarge",
                f"AdmissionReview bodies above {MAX_BODY_BYTES // (1024 * 1024)} MiB are refused",
                close=True,
            )
        try:
            if len(body) > THREAD_DECODE_BYTES:
                admission = await asyncio.to_thread(parse_review, body)
            else:
                admission = parse_review(body)
        except ReviewError as error:
            if error.request is not None:
                # The uid is known: a denial, recorded like every answer (and counted as bad_request).
                _log.warning("malformed AdmissionReview denied", extra={"fields": {"uid": error.uid}})
                try:
                    refused = await services.reviewer.refuse(
                        error.request,
                        reason="BadRequest",
                        message=str(error),
                        code=400,
                        failure="bad_request",
                        api_timeout=api_timeout,
                        started=started,
                    )
                except Exception:  # as below: a bug must deny, never become an HTTP 500
                    _log.exception("refusal failed; denying", extra={"fields": {"uid": error.uid}})
                    refused = await _internal_error(services, error.request, api_timeout, started)
                return encode(refused)
            services.metrics.review_failures.labels("bad_request").inc()
            return _status(
                error.status, "BadRequest" if error.status == 400 else "Invalid", error.diagnostics()
            )
        try:
            review = await self.reviewer.review(admission, api_timeout=api_timeout, started=started)
        except Exception:  # a bug in the webhook: deny, rather than an HTTP 500 that failurePolicy decides
            _log.exception("review failed; denying", extra={"fields": {"uid": admission.uid}})
            review = await _internal_error(services, admission, api_timeout, started)
        return encode(review)


def create_app(settings: ServeSettings, services: WebhookServices, *, owns_store: bool = True) -> FastAPI:
    """The webhook application; its lifespan starts the watchers, and opens and closes the decision store
    unless ``owns_store`` is False (``trtguard serve`` opens it before anything listens)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if owns_store:
            await services.store.open()
        tasks = [
            asyncio.create_task(
                services.policies.watch(settings.reload_interval), name="trtguard-policy-watch"
            )
        ]
        if services.certificates is not None:
            tasks.append(
                asyncio.create_task(
                    services.certificates.watch(settings.reload_interval), name="trtguard-tls-watch"
                )
            )
        for task in tasks:
            task.add_done_callback(_report_stopped)
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if owns_store:
                await services.store.close()
            services.tracing.shutdown()

    admissions = {
        "/validate": _Admission(settings, services, services.reviewer),
        "/mutate": _Admission(settings, services, dataclasses.replace(services.reviewer, pinning=True)),
    }
    app = _WebhookApp(
        admissions,
        title="trtguard admission webhook",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    _add_probes(app, services)
    return app


def create_probe_app(services: WebhookServices) -> FastAPI:
    """``/healthz``, ``/readyz`` and ``/metrics`` alone, for the plain-HTTP ``--metrics-port``."""
    app = FastAPI(title="trtguard probes", docs_url=None, redoc_url=None, openapi_url=None)
    _add_probes(app, services)
    return app


def readiness(services: WebhookServices) -> tuple[bool, dict[str, Any]]:
    """Whether the webhook can judge requests, with the details ``/readyz`` shows."""
    loaded = services.policies.current
    failure = services.policies.last_failure
    store = services.store
    policies: dict[str, Any] = {
        "loaded": loaded is not None,
        "revision": loaded.revision if loaded else None,
        "loaded_at": loaded.loaded_at.isoformat() if loaded else None,
        "policies": [p.name for p in loaded.policy_set.policies] if loaded else [],
        "last_reload_error": {"message": failure.message, "at": failure.at.isoformat()} if failure else None,
    }
    problem = store.problem
    decision_log: dict[str, Any] = {"store": store.description, "ready": problem is None}
    if problem is not None:
        decision_log["problem"] = problem
    if isinstance(store, SpoolingStore):
        decision_log["spooled"] = store.pending
    detail: dict[str, Any] = {"policies": policies, "decision_log": decision_log}
    if services.certificates is not None:
        cert = services.certificates
        detail["tls"] = {
            "not_after": cert.not_after.isoformat() if cert.not_after else None,
            "last_reload_error": cert.last_error,
        }
    ready = loaded is not None and problem is None
    detail["ready"] = ready
    return ready, detail


def _add_probes(app: FastAPI, services: WebhookServices) -> None:
    @app.get("/healthz")
    async def healthz() -> Response:
        return JSONResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        ready, detail = readiness(services)
        return JSONResponse(detail, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        services.metrics.refresh_decision_log(services.store)  # read beside the scrape, never awaited
        _update_gauges(services)
        body, content_type = services.metrics.render()
        return Response(body, media_type=content_type)


def _update_gauges(services: WebhookServices) -> None:
    metrics: Metrics = services.metrics
    metrics.ready.set(1 if readiness(services)[0] else 0)
    if isinstance(services.store, SpoolingStore):
        metrics.decision_log_spooled.set(services.store.pending)
    metrics.observe_undelivered(services.store.undelivered_written)
    if (size := services.store.size_bytes) is not None:
        metrics.decision_log_size.set(size)
    if services.certificates is not None and services.certificates.not_after is not None:
        metrics.tls_not_after.set(services.certificates.not_after.timestamp())


async def _read_body(scope: Scope, receive: Receive) -> bytes:
    """The body, refusing to read past :data:`MAX_BODY_BYTES` (checked before and while reading).

    The messages are read as Starlette's ``Request.stream`` reads them; ``http.disconnect`` raises
    :class:`_Disconnected`.
    """
    declared = _header(scope["headers"], b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _TooLarge
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif kind == "http.disconnect":
            raise _Disconnected


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (lower case), as Starlette's ``Headers.get`` reads it."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


@functools.lru_cache(maxsize=16)
def _api_timeout(query_string: bytes) -> float | None:
    """The API server's ``?timeout=`` in seconds, or None; it sends the same query string with every call,
    so the few last seen are kept rather than parsed again (bounded: a client may send any)."""
    return parse_timeout(_query_value(query_string, "timeout"))


def _query_value(query_string: bytes, name: str) -> str | None:
    """The last value of ``name`` in the query string, as Starlette's ``query_params.get`` reads it."""
    if not query_string:
        return None
    found = None
    for key, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if key == name:
            found = value
    return found


async def _internal_error(
    services: WebhookServices, admission: AdmissionRequest, api_timeout: float | None, started: float
) -> dict[str, Any]:
    """The denial for a request the webhook failed to judge, recorded if the reviewer can still record it."""
    message = "trtguard failed while checking this request, so it denies it; retry shortly"
    try:
        return await services.reviewer.refuse(
            admission,
            reason="InternalError",
            message=message,
            code=500,
            failure="internal_error",
            api_timeout=api_timeout,
            started=started,
        )
    except Exception:  # not even the denial could be recorded: it is answered all the same
        _log.exception("recording the denial failed", extra={"fields": {"uid": admission.uid}})
        services.metrics.review_failures.labels("internal_error").inc()
        services.metrics.error_denials.labels("internal_error").inc()
        return deny_response(admission.uid, message=message, reason="InternalError", code=500)


def _report_stopped(task: asyncio.Task[None]) -> None:
    """Log a background task that ended by itself: its work (reloading policies or certificates) stopped."""
    if task.cancelled():
        return
    error = task.exception()
    _log.error(
        "background task %s stopped: %r; its reloads no longer happen",
        task.get_name(),
        error,
        exc_info=error,
    )


def _status(code: int, reason: str, message: str, *, close: bool = False) -> Response:
    # A metav1.Status body: the API server shows its message when it reports the failed call.
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    body.update(reason=reason, message=message)
    headers = {"connection": "close"} if close else None
    return JSONResponse(body, status_code=code, headers=headers)
