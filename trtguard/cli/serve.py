"""``trtguard serve``: the validating admission webhook.

Every flag has a ``TRTGUARD_*`` variable and a config-file key of the same name (see docs/ARCHITECTURE.md);
flags win over variables, which win over the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trtguard.cli._commands import Subparsers, add_command
from webhook import DEFAULT_DECISION_LOG, load_settings

#: Settings fields set by flags of the same name.
_FIELDS = (
    "config",
    "policies",
    "attestations",
    "registry",
    "registry_config",
    "host",
    "port",
    "tls_cert",
    "tls_key",
    "self_signed",
    "sans",
    "insecure_http",
    "decision_log",
    "decision_log_file",
    "decision_log_unavailable",
    "decision_log_spool",
    "accept_broken_log",
    "default_timeout",
    "timeout_margin",
    "metrics_port",
    "otlp_endpoint",
    "log_level",
    "reload_interval",
    "reload_settle",
    "header_timeout",
    "body_timeout",
    "idle_timeout",
    "max_connections",
)


def register(subparsers: Subparsers) -> None:
    """Add ``serve``."""
    parser = add_command(
        subparsers,
        "serve",
        description="Serve POST /validate (AdmissionReview v1), /healthz, /readyz and /metrics. Settings "
        "come from flags, then TRTGUARD_* environment variables, then the --config YAML file.",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="YAML file with any of these settings")
    parser.add_argument(
        "--policies", type=Path, metavar="PATH", help="policy file or directory (reloaded when it changes)"
    )
    evidence = parser.add_argument_group("evidence")
    evidence.add_argument(
        "--attestations", type=Path, metavar="DIR", help="local attestation folder (offline evidence)"
    )
    evidence.add_argument(
        "--registry",
        action="store_const",
        const=True,
        help="read evidence from the registries (the default without --attestations)",
    )
    evidence.add_argument(
        "--registry-config",
        type=Path,
        metavar="FILE",
        help="registries: CA bundles, plain-HTTP hosts, credentials (implies --registry)",
    )
    listen = parser.add_argument_group("listening")
    listen.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    listen.add_argument("--port", type=int, help="port to listen on (default 8443; 0 picks a free one)")
    listen.add_argument(
        "--tls-cert", type=Path, metavar="FILE", help="PEM certificate chain (re-read on change)"
    )
    listen.add_argument("--tls-key", type=Path, metavar="FILE", help="PEM private key (re-read on change)")
    listen.add_argument(
        "--self-signed", type=Path, metavar="DIR", help="make a local CA and serving certificate in DIR"
    )
    listen.add_argument(
        "--san",
        dest="sans",
        action="append",
        metavar="NAME",
        help="extra DNS name for --self-signed, e.g. trtguard.trtguard.svc (repeatable)",
    )
    listen.add_argument(
        "--insecure-http",
        action="store_const",
        const=True,
        help="serve plain HTTP (local experiments only; the API server requires TLS)",
    )
    log = parser.add_argument_group("decision log")
    log.add_argument(
        "--decision-log",
        metavar="URL",
        help=f"sqlite:///path[?synchronous=normal] or postgresql://… (default {DEFAULT_DECISION_LOG})",
    )
    log.add_argument(
        "--decision-log-file",
        type=Path,
        metavar="FILE",
        help="read the --decision-log URL from FILE (e.g. a mounted Secret), so that a database password "
        "stays out of the command line and the environment",
    )
    log.add_argument(
        "--decision-log-unavailable",
        choices=("deny", "spool"),
        help="when PostgreSQL cannot be written: deny the request (default), or admit it and spool the "
        "record locally until it can be shipped",
    )
    log.add_argument("--decision-log-spool", type=Path, metavar="FILE", help="local spool file (SQLite)")
    log.add_argument(
        "--accept-broken-log",
        action="store_const",
        const=True,
        help="start even when the decision log's last records do not verify, or the log was truncated or "
        "reset (refused by default: restore it from a backup, or accept the break with this flag)",
    )
    timing = parser.add_argument_group("timing")
    _duration(timing, "--default-timeout", "deadline without ?timeout= (default 10)")
    _duration(timing, "--timeout-margin", "kept back from the API server's timeout (0.5)")
    _duration(timing, "--reload-interval", "how often policies and certificates are checked (default 2)")
    _duration(
        timing,
        "--reload-settle",
        "how long changed policy files must stay unchanged before they are loaded (default 1)",
    )
    connections = parser.add_argument_group("connections")
    _duration(
        connections,
        "--header-timeout",
        "from connecting to the end of the request headers, TLS handshake included (default 5)",
    )
    _duration(
        connections,
        "--body-timeout",
        "from the end of the request headers to the end of the body (default 10)",
    )
    _duration(
        connections,
        "--idle-timeout",
        "how long a kept-alive connection may wait for its next request (default 100)",
        kind=int,
    )
    connections.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="open connections at most; beyond it the longest-idle one is closed, else the new one (1000)",
    )
    observe = parser.add_argument_group("observability")
    observe.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="plain-HTTP port for probes and /metrics"
    )
    observe.add_argument(
        "--otlp-endpoint", metavar="URL", help="OpenTelemetry collector (OTLP/HTTP) base URL"
    )
    observe.add_argument(
        "--log-level", type=str.lower, choices=("debug", "info", "warning", "error"), help="default info"
    )
    parser.set_defaults(handler=_run)


def _duration(
    group: argparse._ArgumentGroup, flag: str, text: str, *, kind: type[float] | type[int] = float
) -> None:
    """A setting of seconds: ``flag SECONDS`` (``text``: its help), read as ``kind``."""
    group.add_argument(flag, type=kind, metavar="SECONDS", help=text)


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `trtguard --help` and other commands do not load uvicorn and the policy evaluator.
    from webhook import (  # noqa: PLC0415
        configure_logging,
        run,
    )

    settings = load_settings({name: getattr(args, name) for name in _FIELDS})
    configure_logging(settings.log_level)
    return run(settings)
