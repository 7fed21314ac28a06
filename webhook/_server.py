"""Assembling and running ``trtguard serve``: settings in, a running uvicorn server (or two) out.

:func:`build` turns :class:`~webhook._settings.ServeSettings` into the services (evidence source, policies,
decision store, TLS, metrics, tracing); :func:`run` serves them until SIGINT/SIGTERM. Startup problems
(policies that do not load, a certificate that does not parse, a verification module that does not import)
raise a :class:`TrtguardError` before anything listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import socket
import ssl
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TextIO

import uvicorn
from fastapi import FastAPI

from decisionlog import open_store
from verifier import evidence_source
from verifier.base import InputError, TrtguardError
from verifier.registry.client import RegistryClient
from webhook._admission import Reviewer, ReviewSettings
from webhook._admission_history import DecisionLogHistory
from webhook._app import WebhookServices, create_app, create_probe_app
from webhook._connections import ConnectionLimits, ConnectionTracker, guarded_http_protocol
from webhook._metrics import Metrics
from webhook._policy_store import PolicyStore
from webhook._settings import ServeSettings
from webhook._tls import CertificateReloader, make_self_signed, server_context
from webhook._tracing import Tracing

_log = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_SECONDS: Final = 10

#: The lazy front doors (``lazy_loader``) of everything an admission may verify or judge with: each of their
#: names is resolved at start-up. Not ``verifier.engine`` (``verify-engine``'s, with the optional extras).
ADMISSION_DOORS: Final = (
    "verifier.base",
    "verifier.crypto",
    "verifier.signatures",
    "verifier.verification",
    "verifier.model_signing",
    "verifier.registry",
    "policies.evaluation",
    "policies.rules",
    "policies.workload_model",
)
#: The modules the admission path imports inside functions, on first use (the SBOM and scan readers, the
#: OpenPGP binding's packet parser, the OpenSSL backend cryptography's ``ECDSA`` loads, and the HTTP stack
#: httpx loads when the registry client makes its first connection: attack 37c F1).
ADMISSION_DEFERRED: Final = (
    "verifier.scans.model",
    "verifier.scans._cyclonedx",
    "verifier.scans._spdx",
    "verifier.scans._cosign",
    "pysequoia",
    "pysequoia.packet",
    "cryptography.hazmat.backends.openssl.backend",
    "httpcore",
    "httpcore._backends.anyio",
    "anyio._backends._asyncio",
    "h11",
    "certifi",
    "sniffio",
)


@dataclass(slots=True)
class Built:
    """Everything :func:`build` made; ``registry`` is closed by :func:`run`."""

    services: WebhookServices
    ssl_context: ssl.SSLContext | None
    registry: RegistryClient | None
    ca_path: str | None


def build(
    settings: ServeSettings, *, out: TextIO | None = None, after_reload: Callable[[], None] | None = None
) -> Built:
    """Build the webhook's services from ``settings`` (blocking: loads policies and certificates).

    ``after_reload`` is called after a new policy set went live.
    """
    out = out or sys.stdout
    load_admission_modules()
    metrics = Metrics()
    # Without an attestation folder the webhook reads the registries.
    evidence, registry = evidence_source(
        attestations=settings.attestations,
        registry_config=settings.registry_config,
        registry=settings.attestations is None,
    )

    def policies_reloaded(store: PolicyStore, succeeded: bool) -> None:
        metrics.policy_reloads.labels("success" if succeeded else "failure").inc()
        metrics.policy_reload_failing.set(0 if succeeded else 1)
        if store.current is not None:
            metrics.set_policy_revision(store.current.revision)
        if succeeded and after_reload is not None:
            after_reload()

    store = open_store(
        settings.decision_log,
        unavailable=settings.decision_log_unavailable,
        spool=settings.decision_log_spool,
        accept_broken=settings.accept_broken_log,
    )
    # Change control compares an engine with the one last admitted for the same workload: ask the log.
    history = DecisionLogHistory(store)
    policies = PolicyStore(
        settings.policies,
        evidence,
        history=history,
        on_reload=policies_reloaded,
        settle=settings.reload_settle,
    )
    policies.load()

    ssl_context: ssl.SSLContext | None = None
    certificates: CertificateReloader | None = None
    ca_path: str | None = None
    if settings.uses_tls:
        if settings.self_signed is not None:
            files = make_self_signed(settings.self_signed, sans=settings.sans)
            cert, key, ca_path = files.cert, files.key, str(files.ca_cert)
            print(f"trtguard: CA certificate for clients (caBundle): {ca_path}", file=out, flush=True)
        else:
            if settings.tls_cert is None or settings.tls_key is None:
                raise InputError("--tls-cert and --tls-key are required for TLS", location="--tls-cert")
            cert, key = settings.tls_cert, settings.tls_key
        ssl_context = server_context(cert, key)

        def certificate_reloaded(succeeded: bool, _error: str | None) -> None:
            metrics.tls_reloads.labels("success" if succeeded else "failure").inc()

        certificates = CertificateReloader(ssl_context, cert, key, on_reload=certificate_reloaded)

    tracing = Tracing(settings.otlp_endpoint)
    reviewer = Reviewer(
        policies,
        store,
        metrics,
        tracing,
        ReviewSettings(settings.default_timeout, settings.timeout_margin, replica=socket.gethostname()),
    )
    services = WebhookServices(policies, store, metrics, reviewer, tracing, certificates)
    return Built(services, ssl_context, registry, ca_path)


def load_admission_modules() -> None:
    """Import every module an admission may import on first use (:data:`ADMISSION_DOORS`,
    :data:`ADMISSION_DEFERRED`); a :class:`TrtguardError` naming the one that does not import.

    Loaded lazily, a module missing from a broken or partial install would fail the first admission that
    needs it, an evaluation error that a policy's ``onError: Warn`` admits; its import would also fall on
    that admission's latency (attack 37a F4). Loaded here, before :func:`run` freezes the heap.
    """
    for door in ADMISSION_DOORS:
        try:
            package = importlib.import_module(door)
            for name in package.__all__:
                getattr(package, name)
        except Exception as error:  # a module that breaks, not only one missing (attack 37c F2)
            raise _unimportable(door, error) from error
    for module in ADMISSION_DEFERRED:
        try:
            importlib.import_module(module)
        except Exception as error:
            raise _unimportable(module, error) from error


def _unimportable(needed_by: str, error: Exception) -> TrtguardError:
    missing = (error.name if isinstance(error, ImportError) else None) or needed_by
    through = "" if missing == needed_by else f" through {needed_by}"
    return TrtguardError(
        f"cannot import {missing} ({error}), which admissions need{through}",
        location=_import_statement(error) or needed_by,
        hint="the installation is broken or incomplete: reinstall trtguard with its dependencies "
        "(pip install --force-reinstall trtguard)",
    )


def _import_statement(error: BaseException) -> str | None:
    """``file:line`` where ``error`` was raised, outside this module and importlib (whose bootstrap drops its
    own frames): the import statement of a module that is missing, or the line of one that breaks."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith("<") and frame.filename not in (__file__, importlib.__file__)
    ]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def run(settings: ServeSettings, *, out: TextIO | None = None) -> int:
    """Serve until SIGINT or SIGTERM, then close all it opened; returns the exit status (0: a clean stop)."""
    out = out or sys.stdout
    built = build(settings, out=out, after_reload=_refreeze)
    # Everything loaded so far lives as long as the process: keep it out of the cyclic collector, whose
    # full collections otherwise stop every request for tens of milliseconds (about 100k objects here).
    gc.freeze()
    with _runner() as runner:
        runner.run(_serve(settings, built, out))
    return 0


async def _serve(settings: ServeSettings, built: Built, out: TextIO) -> None:
    # Opened before anything listens, so that a log that cannot be opened (unwritable, corrupt, reset) is
    # reported with the store's own error and hint, not as a port that could not be bound.
    store = built.services.store
    await store.open()
    try:
        await _serve_open(settings, built, out)
    finally:
        await store.close()


async def _serve_open(settings: ServeSettings, built: Built, out: TextIO) -> None:
    app = create_app(settings, built.services, owns_store=False)
    context = built.ssl_context
    limits = connection_limits(settings)
    config = _listener_config(
        app,
        settings.host,
        settings.port,
        limits,
        context,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    server = _Server(config)
    probe: _ProbeServer | None = None
    if settings.metrics_port is not None:
        probe_app = create_probe_app(built.services)
        probe_config = _listener_config(
            probe_app, settings.host, settings.metrics_port, limits, None, lifespan="off"
        )
        probe = _ProbeServer(probe_config)
    main = asyncio.create_task(_serve_guarded(server), name="trtguard-webhook")
    side = asyncio.create_task(_serve_guarded(probe), name="trtguard-probes") if probe is not None else None
    try:
        await _announce(server, "https" if context is not None else "http", out, main)
        if probe is not None and side is not None:
            await _announce(probe, "http", out, side, what="probes and metrics")
            if side.done():
                server.should_exit = True
                await asyncio.gather(main, return_exceptions=True)
                await _startup_checked(side, settings.host, settings.metrics_port or 0, "--metrics-port")
        await _startup_checked(main, settings.host, settings.port, "--port")
    finally:
        if probe is not None and side is not None:
            probe.should_exit = True
            await asyncio.gather(side, return_exceptions=True)
        if built.registry is not None:
            await built.registry.aclose()


async def _serve_guarded(server: uvicorn.Server) -> bool:
    """Serve; False when uvicorn gave up at startup (it logs the OSError and calls ``sys.exit(3)``).

    Caught here, inside the task's own coroutine: a SystemExit escaping a task stops the whole event loop.
    """
    try:
        await server.serve()
    except SystemExit:
        return False
    return True


async def _startup_checked(task: asyncio.Task[bool], host: str, port: int, flag: str) -> None:
    if not await task:
        raise InputError(
            f"cannot listen on {host}:{port} (see the log line above for why)",
            location=flag,
            hint=f"choose a free {flag}, or stop whatever is using this one",
        ) from None


async def _announce(
    server: uvicorn.Server,
    scheme: str,
    out: TextIO,
    task: asyncio.Task[bool] | None,
    *,
    what: str = "admission webhook",
) -> None:
    # Print the bound address once listening (the port may have been 0): scripts and tests read this line.
    while not server.started:
        if task is not None and task.done():
            return
        await asyncio.sleep(0.02)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    print(f"trtguard: {what} listening on {scheme}://{host}:{port}", file=out, flush=True)


def _refreeze() -> None:
    # The old policy set is now garbage, some of it frozen: release it in one collection at reload time
    # (a pause of the same size as the one freezing avoids, once per reload), then freeze the new set.
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _listener_config(
    app: FastAPI,
    host: str,
    port: int,
    limits: ConnectionLimits,
    context: ssl.SSLContext | None,
    *,
    lifespan: Literal["on", "off"],
    timeout_graceful_shutdown: int | None = None,
) -> uvicorn.Config:
    """uvicorn's settings for one listening server, behind the guarded protocol (TLS under ``context``).

    The protocol does the TLS handshake itself (with a deadline), so uvicorn is given no SSL context; the
    webhook logs its own requests, so uvicorn's logging is left unconfigured and its access log off.
    """
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_http_protocol(ConnectionTracker(limits), context),
        lifespan=lifespan,
        log_config=None,
        access_log=False,
        timeout_keep_alive=limits.idle_timeout,
        timeout_graceful_shutdown=timeout_graceful_shutdown,
    )


def connection_limits(settings: ServeSettings) -> ConnectionLimits:
    """The deadlines and the connection cap of ``settings``, for both listening servers."""
    return ConnectionLimits(
        header_timeout=settings.header_timeout,
        body_timeout=settings.body_timeout,
        idle_timeout=settings.idle_timeout,
        max_connections=settings.max_connections,
    )


class _Server(uvicorn.Server):
    """uvicorn's server without its "running on http://…" line (it does not do the TLS, see _announce), and
    without its re-raising of SIGTERM/SIGINT when ``serve`` returns.

    uvicorn raises the signal again as its signal handlers are restored: SIGTERM's default action then ends
    the process before the ``finally`` of :func:`_serve` closes the decision log (head file, WAL checkpoint,
    PostgreSQL pool, spool). Here the signal only stops the server, and :func:`run` returns after the log was
    closed.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's handlers while serving; the signals caught are forgotten, not raised again."""
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()

    def _log_started_message(self, listeners: Sequence[socket.SocketType]) -> None:
        """Say nothing: :func:`_announce` prints the address with the right scheme."""


class _ProbeServer(_Server):
    """The plain-HTTP probe server: the main server owns the signal handlers and stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave signals to the main server."""
        yield


@contextlib.contextmanager
def _runner() -> Iterator[asyncio.Runner]:
    factory: Callable[[], Any] | None = None
    try:
        import uvloop  # noqa: PLC0415 - optional: the faster loop where it is installed

        factory = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        yield runner
