"""The Kubernetes API as ``audit-cluster`` uses it, through the official ``kubernetes`` client.

:func:`connect` reads a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``) or, inside
a Pod without one, the in-cluster service account. :class:`KubeApi` makes each request with a connect and a
read timeout, retries 429 and 5xx answers (and connection failures) with backoff, honouring ``Retry-After``,
and reads bodies as JSON itself: listed objects are judged as they are stored, not as the client's models
would rebuild them. Lists are read page by page (``limit`` and ``continue``); a continue token that expired
while paging (410) restarts the list, since a consistent read of the whole kind is what the audit judges.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from verifier.base import InputError, TrtguardError

__all__ = ["ApiError", "ClusterSettings", "KubeApi", "connect"]

#: Statuses worth asking again: throttling and the server's own failures.
_RETRIED: Final = frozenset({429, 500, 502, 503, 504})
#: The longest wait a ``Retry-After`` may ask for (a hostile or confused server cannot stall the audit).
_MAX_RETRY_AFTER: Final = 30.0


class ApiError(TrtguardError):
    """The API server refused a request, or could not be reached, after the retries."""

    def __init__(self, message: str, *, status: int | None = None, location: str | None = None) -> None:
        super().__init__(message, location=location, hint="check the kubeconfig, the RBAC and the API server")
        self.status = status


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """How to reach the API server and how hard to try."""

    kubeconfig: Path | None = None
    context: str | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = 4
    backoff: float = 0.5
    page_size: int = 500


@dataclass
class KubeApi:
    """JSON requests to one API server, with timeouts and retries (see the module docstring)."""

    client: Any
    """A ``kubernetes.client.ApiClient``."""
    settings: ClusterSettings
    sleep: Callable[[float], None] = time.sleep
    requests: int = field(default=0, init=False)
    """Requests sent, retries included."""

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
            self.requests += 1
            try:
                status, headers, data = self._send(method, path, query, body)
            except (OSError, ApiError) as error:  # urllib3's failures are OSErrors underneath
                if attempt > self.settings.retries:
                    raise ApiError(f"{method} {path}: {error}", location=path) from None
                self.sleep(self._backoff(attempt, None))
                continue
            if status in _RETRIED and attempt <= self.settings.retries:
                self.sleep(self._backoff(attempt, headers.get("retry-after")))
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

    def pages(self, path: str, query: Mapping[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """Every page of the list at ``path`` (``limit`` and ``continue``), each a ``…List`` object."""
        token: str | None = None
        restarts = 0
        while True:
            params: dict[str, str | int] = {**(query or {}), "limit": self.settings.page_size}
            if token:
                params["continue"] = token
            try:
                page = self.get(path, params)
            except ApiError as error:
                if error.status != 410 or token is None or restarts >= self.settings.retries:
                    raise
                # The continue token expired (the list changed past what the server keeps): start again.
                token, restarts = None, restarts + 1
                continue
            yield page
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return

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
        timeout = (self.settings.connect_timeout, self.settings.read_timeout)
        try:
            response = self.client.call_api(*serialized, _request_timeout=timeout)
        except Exception as error:  # the client wraps connection failures in its own ApiException
            status = getattr(error, "status", None)
            if isinstance(status, int) and status:
                body_bytes = getattr(error, "body", b"") or b""
                return status, dict(getattr(error, "headers", None) or {}), _bytes(body_bytes)
            raise ApiError(f"{type(error).__name__}: {error}", location=path) from None
        data = response.read()
        lowered = {k.lower(): v for k, v in dict(response.headers or {}).items()}
        return int(response.status), lowered, _bytes(data)

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
    return KubeApi(client.ApiClient(configuration), settings)


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
