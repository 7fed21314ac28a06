"""The Kubernetes API as ``audit-cluster`` uses it, through the official ``kubernetes`` client.

:func:`connect` reads a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``) or, inside
a Pod without one, the in-cluster service account. :class:`KubeApi` makes each request with a connect and a
read timeout, retries 429 and 5xx answers (and connection failures) with backoff, honouring ``Retry-After``,
and reads bodies as JSON itself: listed objects are judged as they are stored, not as the client's models
would rebuild them. Lists are read page by page (``limit`` and ``continue``); a continue token that expired
while paging (410) restarts the list, dropping what was read of it, since a consistent read of the whole kind
is what the audit judges (no object is counted twice).

Nothing the API server does can hold the audit forever: every request has its own deadline
(:attr:`ClusterSettings.request_timeout`, from connecting to the last byte read, kept by a watchdog of
:mod:`trtguard.cluster._request`, so an answer trickling in byte by byte is cut off too) inside the deadline
of the whole audit (:attr:`ClusterSettings.timeout`, retries and their waits included); an answer is read up
to :attr:`ClusterSettings.max_response_bytes`; a list ends with a clear error when its server hands back a
continue token it gave before, or pages past :attr:`ClusterSettings.max_pages`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from trtguard.cluster._errors import ApiError, AuditTimeout, Unanswered
from trtguard.cluster._request import ApiRequest, watch_connections
from verifier.base import Deadline, InputError

__all__ = ["ClusterSettings", "KubeApi", "Listed", "connect", "resource_path"]

#: Statuses worth asking again: throttling and the server's own failures.
_RETRIED: Final = frozenset({429, 500, 502, 503, 504})
#: The longest wait a ``Retry-After`` may ask for (a hostile or confused server cannot stall the audit).
_MAX_RETRY_AFTER: Final = 30.0


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """How to reach the API server, how hard to try, and how much of it to take."""

    kubeconfig: Path | None = None
    context: str | None = None
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    """The most one request may take, from the connection to the last byte of the answer."""
    timeout: float = 900.0
    """The most the whole audit may take (every request, retry and wait, and the judging)."""
    retries: int = 4
    backoff: float = 0.5
    page_size: int = 500
    max_pages: int = 10_000
    """Pages of one list (at ``page_size`` objects each)."""
    max_response_bytes: int = 128 * 1024 * 1024
    """Bytes of one answer."""


@dataclass(frozen=True, slots=True)
class Listed:
    """The items of one list, read whole, and the pages it took (those of a restarted read included)."""

    items: list[dict[str, Any]]
    pages: int


@dataclass
class KubeApi:
    """JSON requests to one API server, with timeouts and retries (see the module docstring)."""

    client: Any
    """A ``kubernetes.client.ApiClient``."""
    settings: ClusterSettings
    sleep: Callable[[float], None] = time.sleep
    requests: int = field(default=0, init=False)
    """Requests sent, retries included."""
    deadline: Deadline = field(init=False)
    """The audit's: :attr:`ClusterSettings.timeout` from when this was made."""

    def __post_init__(self) -> None:
        self.deadline = Deadline.after(self.settings.timeout)

    def out_of_time(self, doing: str) -> AuditTimeout:
        """The error that ends the audit when its deadline passed while ``doing`` something."""
        return AuditTimeout(self.settings.timeout, doing)

    def get(self, path: str, query: Mapping[str, str | int] | None = None) -> dict[str, Any]:
        """The JSON object at ``path``; raises :class:`ApiError` (``status`` 404 when there is none)."""
        return self.request("GET", path, query=query)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send one request (retried on 429, 5xx and connection failures); the answer's JSON object."""
        attempt = 0
        while True:
            attempt += 1
            if self.deadline.remaining() <= 0:
                raise self.out_of_time(f"before {method} {path}")
            self.requests += 1
            try:
                status, headers, data = self._send(method, path, query, body)
            except Unanswered as error:
                if attempt > self.settings.retries:
                    raise ApiError(error.message, location=path) from None
                self._pause(self._backoff(attempt, None), method, path)
                continue
            if status in _RETRIED and attempt <= self.settings.retries:
                self._pause(self._backoff(attempt, headers.get("retry-after")), method, path)
                continue
            if status >= 400:
                raise ApiError(
                    f"{method} {path}: HTTP {status}: {_status_message(data)}", status=status, location=path
                )
            try:
                answer = json.loads(data)
            except ValueError:
                raise ApiError(
                    f"{method} {path}: the answer is not JSON", status=status, location=path
                ) from None
            if not isinstance(answer, dict):
                raise ApiError(
                    f"{method} {path}: the answer is not a JSON object", status=status, location=path
                )
            return answer

    def list(self, path: str, query: Mapping[str, str] | None = None) -> Listed:
        """Every item of the list at ``path``, read page by page (``limit`` and ``continue``) as one list.

        A continue token that expired while paging (410) starts the list again from its first page, and
        what was read of it is dropped. Raises :class:`ApiError` when the server hands back a continue
        token it gave before in this read (it would page forever), pages past ``max_pages``, or answers
        anything but a list.
        """
        restarts, pages = 0, 0
        while True:
            items: list[dict[str, Any]] = []
            token: str | None = None
            seen: set[str] = set()
            try:
                while True:
                    params: dict[str, str | int] = {**(query or {}), "limit": self.settings.page_size}
                    if token:
                        params["continue"] = token
                    page = self.get(path, params)
                    pages += 1
                    found = page.get("items")
                    if found is not None and not isinstance(found, list):
                        raise ApiError(f"GET {path}: the answer's items are not a list", location=path)
                    items += [item for item in found or () if isinstance(item, dict)]
                    token = _continue_token(page, path)
                    if token is None:
                        return Listed(items, pages)
                    if token in seen:
                        raise ApiError(
                            f"GET {path}: page {len(seen) + 1} handed back a continue token an earlier page "
                            "gave, so the list would never end",
                            location=path,
                            hint="the API server (or a proxy in front of it) pages wrongly; report it",
                        )
                    seen.add(token)
                    if len(seen) >= self.settings.max_pages:
                        raise ApiError(
                            f"GET {path}: more than {self.settings.max_pages} pages of "
                            f"{self.settings.page_size} (--max-pages, --page-size)",
                            location=path,
                            hint="raise --max-pages, or audit one namespace at a time (--namespace)",
                        )
            except ApiError as error:
                if error.status != 410 or token is None or restarts >= self.settings.retries:
                    raise
                # The continue token expired (the list changed past what the server keeps): start again.
                restarts += 1

    def _pause(self, seconds: float, method: str, path: str) -> None:
        """Wait before a retry, unless the wait would end past the audit's deadline."""
        if seconds >= self.deadline.remaining():
            raise self.out_of_time(f"waiting to retry {method} {path}")
        self.sleep(seconds)

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int] | None,
        body: Mapping[str, Any] | None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        serialized = self.client.param_serialize(
            method,
            path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=dict(body) if body is not None else None,
            auth_settings=["BearerToken"],
        )
        settings = self.settings
        limits = (settings.request_timeout, self.deadline, settings.timeout, settings.max_response_bytes)
        with ApiRequest(method, path, *limits) as call:
            timeout = (min(settings.connect_timeout, call.remaining()), call.remaining())
            try:
                response = self.client.call_api(*serialized, _request_timeout=timeout)
            except Exception as error:  # the client wraps connection failures in its own ApiException
                status = getattr(error, "status", None)
                if isinstance(status, int) and status:
                    body_bytes = getattr(error, "body", b"") or b""
                    return status, dict(getattr(error, "headers", None) or {}), _bytes(body_bytes)
                call.check()
                raise Unanswered(f"{method} {path}: {type(error).__name__}: {error}", location=path) from None
            lowered = {k.lower(): v for k, v in dict(response.headers or {}).items()}
            return int(response.status), lowered, call.read(response.response, lowered)

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None and retry_after.strip().isdigit():
            return min(float(retry_after.strip()), _MAX_RETRY_AFTER)
        return float(self.settings.backoff * 2 ** (attempt - 1))


def connect(settings: ClusterSettings) -> KubeApi:
    """A :class:`KubeApi` for the cluster the kubeconfig names, or, without one inside a Pod, the
    in-cluster service account's; raises :class:`InputError` when neither can be loaded."""
    from kubernetes import client, config  # noqa: PLC0415 - loaded by audit-cluster alone

    configuration = client.Configuration()
    try:
        explicit = settings.kubeconfig is not None or os.environ.get("KUBECONFIG")
        if not explicit and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(settings.kubeconfig) if settings.kubeconfig is not None else None,
                context=settings.context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (config.ConfigException, OSError, ValueError, TypeError) as error:
        raise InputError(
            f"cannot load the cluster's configuration: {error}",
            location=str(settings.kubeconfig or "kubeconfig"),
            hint="pass --kubeconfig FILE, or run inside the cluster with a service account",
        ) from None
    configuration.retries = 0  # KubeApi retries, on its own terms and within its timeouts
    api_client = client.ApiClient(configuration)
    watch_connections(api_client.rest_client.pool_manager)
    return KubeApi(api_client, settings)


def _continue_token(page: Mapping[str, Any], path: str) -> str | None:
    metadata = page.get("metadata")
    token = metadata.get("continue") if isinstance(metadata, dict) else None
    if token is not None and not isinstance(token, str):
        raise ApiError(f"GET {path}: the answer's continue token is not a string", location=path)
    return token or None


def resource_path(group: str, version: str, resource: str, namespace: str | None = None) -> str:
    """``/api/v1/…`` or ``/apis/GROUP/VERSION/…``, in ``namespace`` when given."""
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    where = f"/namespaces/{quote(namespace, safe='')}" if namespace is not None else ""
    return f"{base}{where}/{resource}"


def _status_message(data: bytes) -> str:
    """A ``metav1.Status`` answer's message, or the start of the body."""
    try:
        status = json.loads(data)
    except ValueError:
        return data[:200].decode("utf-8", "replace").strip() or "no message"
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        return f"{status.get('reason') or 'Failure'}: {status['message']}"
    return "no message"


def _bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    return str(data).encode() if data is not None else b""
