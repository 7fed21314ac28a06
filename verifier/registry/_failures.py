"""What a failed registry request means and how it is told: the words of every transport failure.

A refusal (403, 400, 405, …) and a body above its limit are definitive; giving up after retries is
transient. The reasons behind a failed attempt (the operating system's, the kind of timeout, an untrusted
certificate, the OCI error body) are read here, and so is when a registry may be asked again (``Retry-After``,
back-off with jitter).
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import ssl
import time
from datetime import UTC

import httpx

from verifier.base import EvidenceUnavailable

__all__ = [
    "backoff",
    "error_detail",
    "gave_up",
    "os_reason",
    "plain_http_answer",
    "refusal",
    "retry_after",
    "short",
    "timeout_kind",
    "tls_failure",
    "too_large",
    "unauthorised",
]


#: What servers answer to a plain-HTTP request on a TLS port.
_HTTPS_ONLY = (
    b"Client sent an HTTP request to an HTTPS server",
    b"plain HTTP request was sent to HTTPS port",
)
#: OpenSSL's reasons when the other end answers a TLS handshake with something that is not TLS.
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG"}
)


def plain_http_answer(error: BaseException) -> bool:
    """Whether ``error`` is (or was caused by) a TLS handshake answered in something else: plain HTTP."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLError) and seen.reason in _NOT_TLS:
            return True
        seen = seen.__cause__ or seen.__context__
    return any(reason in str(error) for reason in _NOT_TLS)


#: What a definitive status answered to a request says: the words after the host, and the hint.
_REFUSED = {
    403: ("denied access to", "the credentials in use lack permission for this repository"),
    401: ("requires authentication for", "add the registry to the credentials file (dockerconfigjson)"),
}
_REFUSED_OTHERWISE = "the registry refused the request; check that it supports the OCI distribution API"


def refusal(status: int, body: bytes, host: str, what: str) -> EvidenceUnavailable:
    """A definitive error for an unexpected status (403, 400, 405, …) to the request for ``what``."""
    if status == 400 and any(marker in body for marker in _HTTPS_ONLY):
        # Go's net/http (distribution, Harbor, Zot) and nginx answer a plain-HTTP request on a TLS port so.
        return _definitive(
            host,
            f"{host} speaks TLS (HTTPS), but trtguard asked it in plain HTTP (for {what})",
            f"remove plain_http for {host} from the registry configuration (set ca_bundle if its "
            "certificate is not signed by a public CA)",
        )
    said, hint = _REFUSED.get(status, (f"answered {status} to", _REFUSED_OTHERWISE))
    return _definitive(host, f"{host} {said} {what}{error_detail(body)}", hint)


def unauthorised(host: str, what: str, *, configured: bool) -> EvidenceUnavailable:
    """A definitive error for a 401 to the request for ``what`` that answered the registry's challenge,
    with the credentials ``configured`` for ``host`` or without any."""
    if configured:
        return _definitive(
            host,
            f"{host} refused the credentials for {what}",
            "check the registry's entry in the credentials file (dockerconfigjson)",
        )
    return _definitive(
        host,
        f"{host} requires credentials for {what}, and none are configured for it",
        "add the registry to the credentials_file of the registry configuration",
    )


def _definitive(host: str, message: str, hint: str) -> EvidenceUnavailable:
    return EvidenceUnavailable(message, transient=False, location=f"registry {host}", hint=hint)


def gave_up(
    host: str, what: str, failures: list[str], started: float, reason: str | None
) -> EvidenceUnavailable:
    """A transient error after the attempts in ``failures`` (begun at monotonic ``started``) all failed."""
    elapsed = time.monotonic() - started
    if not failures:
        message = f"{host} could not be asked for {what}"
    elif len(failures) == 1:
        message = f"{host} {failures[0]} for {what} ({elapsed:.1f} s)"
    elif len(set(failures)) == 1:
        message = f"{host} {failures[0]} {_times(len(failures))} in {elapsed:.1f} s for {what}"
    else:
        message = (
            f"{host} failed {_times(len(failures))} in {elapsed:.1f} s for {what} ({'; '.join(failures)})"
        )
    if reason:
        message += f"; {reason}"
    return EvidenceUnavailable(
        message,
        transient=True,
        location=f"registry {host}",
        hint="the registry is down, slow or rate-limiting; the policy's onError decides what happens",
    )


def too_large(what: str, host: str, limit: int, expect_size: int | None) -> EvidenceUnavailable:
    """A body above ``limit``: more than its descriptor's ``expect_size``, or above a configured limit."""
    if expect_size is not None and limit == expect_size:
        message = f"{what} from {host}: the registry sends more than the {limit} bytes of its descriptor"
        hint = "the registry (or something between it and trtguard) altered the content"
    else:
        message = f"{what} from {host} is larger than the limit of {limit} bytes"
        hint = "raise limits in the registry configuration if content this large is expected"
    return _definitive(host, message, hint)


def error_detail(body: bytes) -> str:
    """``": MANIFEST_UNKNOWN manifest unknown"`` from an OCI error body, or nothing."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return ""
    errors = document.get("errors") if isinstance(document, dict) else None
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return ""
    code, message = errors[0].get("code"), errors[0].get("message")
    text = " ".join(str(part) for part in (code, message) if part)
    return f": {text}" if text else ""


def backoff(base: float, ceiling: float, attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1``."""
    # Equal jitter: at least half of the exponential delay, so that retries of a burst spread out.
    delay: float = min(ceiling, base * 2 ** (attempt - 1))
    return delay / 2 + random.uniform(0, delay / 2)  # noqa: S311 - jitter, not a secret


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        # RFC 9110 dates are in GMT; "-0000" parses naive, which .timestamp() would take as local time.
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - time.time())


def short(error: BaseException) -> str:
    """The error's text, cut to 160 characters."""
    text = str(error) or type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def os_reason(error: BaseException) -> str:
    """The innermost operating-system reason ("connection refused") behind a connection error."""
    seen: BaseException | None = error
    reason = short(error)
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            # An SSLError's errno is OpenSSL's code, not the operating system's ("operation not permitted").
            reason = f"TLS: {(seen.reason or short(seen)).replace('_', ' ').lower()}"
        elif isinstance(seen, OSError) and seen.errno is not None:
            reason = os.strerror(seen.errno).lower()
        seen = seen.__cause__ or seen.__context__
    return reason


def timeout_kind(error: httpx.TimeoutException) -> str:
    """What the client was doing when ``error`` struck ("connecting", "waiting for data", …)."""
    if isinstance(error, httpx.ConnectTimeout):
        return "connecting"
    if isinstance(error, httpx.ReadTimeout):
        return "waiting for data"
    if isinstance(error, httpx.WriteTimeout):
        return "sending data"
    return "waiting for a free connection"


def tls_failure(error: BaseException) -> bool:
    """Whether ``error`` is (or was caused by) an untrusted certificate."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(error)


def _times(count: int) -> str:
    words = {1: "once", 2: "twice", 3: "three times", 4: "four times", 5: "five times"}
    return words.get(count, f"{count} times")
