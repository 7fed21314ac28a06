"""The API server's view of the webhook, for tests: assertion helper, review builders, client, process.

- ``verify_admission_response``: the one assertion helper, mirroring kube-apiserver's checks of a webhook's
  answer (``VerifyAdmissionResponse`` in k8s.io/apiserver plus the warning and audit-annotation handling).
- ``ApiServerClient``: an HTTP client that behaves like the API server (HTTP/1.1, SNI = the Service DNS name,
  CA pinned, ``?timeout=`` on the URL).
- ``WebhookProcess``: ``trtguard serve`` as a real process over real TLS.
- ``TcpProxy``: a loopback forwarder to PostgreSQL that a test can cut, to play an outage.

The fixtures that hand these out are in ``conftest.py`` beside this file.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from decisionlog import DecisionRecord

SERVICE = "trtguard.trtguard.svc"
TRTGUARD = Path(sys.executable).with_name("trtguard")
_LISTENING = re.compile(r"admission webhook listening on (https?)://([^:]+):(\d+)")
_PROBES = re.compile(r"probes and metrics listening on http://([^:]+):(\d+)")
# The API server's audit-annotation keys are "<webhook name>/<key>" and must be qualified names.
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


#: ``verify_admission_response`` as a fixture hands it out.
Verifier = Callable[[str, httpx.Response], dict[str, Any]]
#: ``review`` and ``pod`` as fixtures hand them out.
ReviewFactory = Callable[..., dict[str, Any]]
PodFactory = Callable[..., dict[str, Any]]
#: ``wait_until(predicate, within=…)``.
WaitUntil = Callable[..., Awaitable[Any]]
#: ``make_record(**fields)`` of the decision-log tests.
RecordFactory = Callable[..., DecisionRecord]


def verify_admission_response(
    uid: str, response: httpx.Response, *, mutating: bool = False
) -> dict[str, Any]:
    """Assert what kube-apiserver asserts about a validating webhook's answer; return ``response``.

    ``mutating``: the answer of a mutating webhook, which may carry a ``patch`` (base64 of a JSON array of
    operations) with ``patchType: JSONPatch``, and only in an allow.

    The rules, from k8s.io/apiserver ``VerifyAdmissionResponse`` (v1) and the dispatcher: HTTP 200 with a
    JSON AdmissionReview of exactly ``admission.k8s.io/v1``/``AdmissionReview``; a ``response`` whose uid
    echoes the request; a boolean ``allowed``; no ``patch`` or ``patchType`` from a validating webhook; a
    denial's ``status.code`` at least 400 (the API server raises smaller codes) with a message to show;
    warnings as strings (we hold ourselves to the API doc's 120 characters, no duplicates, under the 4096
    total where the API server starts truncating); audit annotations as string values under keys that make a
    qualified name.
    """
    assert response.status_code == 200, f"HTTP {response.status_code}: {response.text[:500]}"
    assert response.headers["content-type"].startswith("application/json")
    review = response.json()
    assert isinstance(review, dict)
    assert review.get("apiVersion") == "admission.k8s.io/v1"
    assert review.get("kind") == "AdmissionReview"
    answer = review.get("response")
    assert isinstance(answer, dict), "webhook response was absent"
    assert answer.get("uid") == uid, f"expected response.uid={uid!r}, got {answer.get('uid')!r}"
    assert isinstance(answer.get("allowed"), bool)
    if mutating and "patch" in answer:
        assert answer["allowed"], "a denial carries no patch"
        assert answer.get("patchType") == "JSONPatch", "the only patchType the API server accepts"
        assert isinstance(json.loads(base64.b64decode(answer["patch"], validate=True)), list)
    else:
        assert "patch" not in answer, "validating webhook may not return response.patch"
        assert "patchType" not in answer, "validating webhook may not return response.patchType"
    if not answer["allowed"]:
        status = answer.get("status")
        assert isinstance(status, dict), "a denial needs a status"
        assert isinstance(status.get("code"), int) and status["code"] >= 400
        assert isinstance(status.get("message"), str) and status["message"].strip()
        assert "\n" not in status["message"], "status.message is one line"
        assert isinstance(status.get("reason"), str) and status["reason"]
        for cause in status.get("details", {}).get("causes", []):
            assert isinstance(cause.get("field"), str) and isinstance(cause.get("message"), str)
    warnings = answer.get("warnings", [])
    assert isinstance(warnings, list)
    assert all(isinstance(w, str) and 0 < len(w) <= 120 and "\n" not in w for w in warnings), warnings
    assert len(set(warnings)) == len(warnings), "warnings are de-duplicated"
    assert sum(len(w) for w in warnings) <= 4096
    annotations = answer.get("auditAnnotations", {})
    assert isinstance(annotations, dict)
    for key, value in annotations.items():
        assert _QUALIFIED_NAME_PART.fullmatch(key) and len(key) <= 63, key
        assert isinstance(value, str)
    return answer


def review(
    request: Mapping[str, Any] | None = None,
    *,
    uid: str | None = None,
    operation: str = "CREATE",
    obj: Mapping[str, Any] | None = None,
    old: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    dry_run: bool | None = None,
    sub_resource: str | None = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 around ``request`` (or one built from ``obj``), with a fresh uid."""
    if request is None:
        assert obj is not None
        api_version = str(obj.get("apiVersion", "v1"))
        group, _, version = api_version.rpartition("/")
        kind = str(obj["kind"])
        ns = namespace or obj.get("metadata", {}).get("namespace")
        request = {
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "name": obj.get("metadata", {}).get("name"),
            "namespace": ns,
            "operation": operation,
            "userInfo": {
                "username": "kubernetes-admin",
                "groups": ["system:masters", "system:authenticated"],
            },
            "object": obj,
            "oldObject": old,
            "dryRun": bool(dry_run),
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
        }
        if sub_resource:
            request["subResource"] = sub_resource
            request["requestSubResource"] = sub_resource
    built = dict(request)
    built["uid"] = uid or str(uuid.uuid4())
    if dry_run is not None:
        built["dryRun"] = dry_run
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": built}


def pod(
    name: str,
    image: str,
    *,
    namespace: str = "prod",
    engine: str | None = None,
    extra_images: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A Pod with one container (plus ``extra_images``) and, optionally, an engine image volume."""
    containers: list[dict[str, Any]] = [{"name": "server", "image": image}]
    containers += [{"name": f"side{n}", "image": img} for n, img in enumerate(extra_images)]
    spec: dict[str, Any] = {"containers": containers}
    if engine is not None:
        containers[0]["volumeMounts"] = [{"name": "engine", "mountPath": "/models"}]
        spec["volumes"] = [{"name": "engine", "image": {"reference": engine, "pullPolicy": "IfNotPresent"}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def client_ssl_context(ca: Path) -> ssl.SSLContext:
    """The API server's TLS client: trusts only the caBundle, checks the name, offers HTTP/1.1 only."""
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["http/1.1"])
    return context


@dataclass
class ApiServerClient:
    """Posts AdmissionReviews the way kube-apiserver does (service reference, HTTP/1.1, keep-alive)."""

    port: int
    ca: Path | None
    timeout_seconds: int = 10
    host: str = "127.0.0.1"
    _client: httpx.AsyncClient | None = field(default=None, init=False)

    async def __aenter__(self) -> ApiServerClient:
        verify: ssl.SSLContext | bool = client_ssl_context(self.ca) if self.ca is not None else False
        self._client = httpx.AsyncClient(
            http1=True,
            http2=False,
            verify=verify,
            timeout=httpx.Timeout(self.timeout_seconds + 5.0),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=32),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._client is not None
        await self._client.aclose()

    @property
    def scheme(self) -> str:
        return "https" if self.ca is not None else "http"

    async def post(
        self,
        body: bytes | Mapping[str, Any] | AsyncIterable[bytes],
        *,
        api_timeout: int | None = None,
        path: str = "/validate",
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """POST to ``path?timeout=Ns`` with SNI and Host set to the Service DNS name."""
        assert self._client is not None
        content = json.dumps(body).encode() if isinstance(body, Mapping) else body
        seconds = self.timeout_seconds if api_timeout is None else api_timeout
        return await self._client.post(
            f"{self.scheme}://{self.host}:{self.port}{path}?timeout={seconds}s",
            content=content,
            headers={
                "content-type": "application/json",
                "accept": "application/json",
                "host": f"{SERVICE}:443",
                **(headers or {}),
            },
            extensions={"sni_hostname": SERVICE},
        )

    async def get(self, path: str) -> httpx.Response:
        assert self._client is not None
        return await self._client.get(
            f"{self.scheme}://{self.host}:{self.port}{path}", extensions={"sni_hostname": SERVICE}
        )


@dataclass
class WebhookProcess:
    """``trtguard serve`` in a child process; ``port``/``probe_port`` are read from its startup lines."""

    args: list[str]
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    port: int = 0
    probe_port: int | None = None
    scheme: str = "https"
    ca: Path | None = None
    stdout_lines: list[str] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.workdir / "serve.log"

    def start(self, timeout: float = 30.0) -> WebhookProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRTGUARD_")} | self.env
        self.process = subprocess.Popen(
            [str(TRTGUARD), "serve", "--port", "0", *self.args],
            cwd=self.workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.log_path.open("a"),
            text=True,
        )
        deadline = time.monotonic() + timeout
        want_probes = "--metrics-port" in self.args
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"trtguard serve exited ({self.process.wait()}):\n{self.log_text()}")
            self.stdout_lines.append(line.rstrip("\n"))
            if "CA certificate for clients" in line:
                self.ca = self.workdir / line.rsplit(": ", 1)[1].strip()
            if match := _LISTENING.search(line):
                self.scheme, self.port = match.group(1), int(match.group(3))
            if match := _PROBES.search(line):
                self.probe_port = int(match.group(2))
            if self.port and (self.probe_port or not want_probes):
                return self
        raise AssertionError(f"trtguard serve did not start in {timeout} s:\n{self.log_text()}")

    @property
    def pid(self) -> int:
        """The server's process id (it has been started)."""
        assert self.process is not None
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the process ended, else ``None``."""
        assert self.process is not None
        return self.process.poll()

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far."""
        records = []
        for line in self.log_text().splitlines():
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))
        return records

    def client(self, **kwargs: Any) -> ApiServerClient:
        return ApiServerClient(self.port, self.ca if self.scheme == "https" else None, **kwargs)

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


StartWebhook = Callable[..., WebhookProcess]
"""``webhook_process(*args, workdir=…, env=…)``."""


class TcpProxy:
    """A loopback TCP forwarder to PostgreSQL that a test can cut and restore, to play a database outage.

    Cutting it closes the listening socket and every proxied connection, which is what clients see when the
    database host goes away. Hanging it keeps every connection open but forwards nothing (new connections are
    accepted and left waiting), which is what clients see when the database is stopped (SIGSTOP) or a network
    path silently drops packets; ``resume`` lets the held bytes through.
    """

    def __init__(self, target_port: int = 5432) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    def hang(self) -> None:
        """Forward nothing more, in either direction, until :meth:`resume`."""
        self._flowing.clear()

    def resume(self) -> None:
        """Forward again, held bytes first."""
        self._flowing.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        # Held connections are gone: their handlers may finish, and a restarted proxy forwards again.
        self._flowing.set()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        await self._flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    await self._flowing.wait()
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._writers.difference_update((writer, up_writer))
