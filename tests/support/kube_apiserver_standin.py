"""A stand-in for kube-apiserver (none can run on these machines), to test ``audit-cluster`` against.

It is a stand-in, not a fake of trtguard's code: an HTTPS server on 127.0.0.1 that the official
``kubernetes`` client talks to through a real kubeconfig (CA, bearer token). What it serves:

- discovery: ``/api`` and ``/apis/apps/v1``, ``/apis/batch/v1`` are the kube-apiserver's own recorded answers
  (tests/data/781-kube-apiserver-responses); ``/api/v1``, ``/apis`` and the groups of custom resources are
  built in the same shape, naming only what the tests need (pods, replicationcontrollers; wgpolicyk8s.io and
  the custom resource definitions added with :meth:`KubeApiStandIn.add_crd`);
- lists, cluster-wide and per namespace, paged with ``limit`` and an opaque ``continue`` token as the API
  server pages them (items without ``apiVersion``/``kind``, ``metadata.resourceVersion``,
  ``remainingItemCount``); a token from before the collection changed is answered ``410 Expired``;
- get, create (``409 AlreadyExists``), update (``409 Conflict`` on a stale ``resourceVersion``) of
  ``wgpolicyk8s.io/v1alpha2`` PolicyReports and ClusterPolicyReports, and ``labelSelector`` equality;
- ``metav1.Status`` bodies for every failure, and :attr:`faults`: answers to give before the real one
  (``(429, "1")`` is a 429 with ``Retry-After: 1``; a 503 is answered as an aggregated API that is down
  answers it, in plain text);
- :attr:`changes`: an object to add to the collection right after the first page of a list at a path was
  served (the list then changes under the reader's continue token, as a busy cluster's does);
- :attr:`misbehaving`: what a broken or hostile server (or a proxy in front of one) does instead, per path
  (:data:`MISBEHAVIOURS`), each bounded so that a client that never gives up still ends; what the client
  got of it is in :attr:`sent` (bytes of the body written), and :attr:`hung_up` names the paths whose
  client closed the connection before the body was whole.

Every request is recorded in :attr:`requests` (method, path, query).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from webhook._tls import make_self_signed

RECORDED = Path(__file__).resolve().parents[1] / "data" / "781-kube-apiserver-responses"
TOKEN = "stand-in-token"
_REPORTS = ("policyreports", "clusterpolicyreports")
_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter."
)
_MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"
#: What :attr:`KubeApiStandIn.misbehaving` may name: the same continue token on every page; a new token on
#: every page, for ever; a body dripped a byte at a time; headers dripped so; an enormous body, of the length
#: it declares or (``huge-unsized``) with no length, ended by closing the connection.
MISBEHAVIOURS = ("repeat-continue", "endless-continue", "drip", "drip-headers", "huge", "huge-unsized")
#: Bounds that end a misbehaviour for a client that never gives up: pages, seconds of dripping, bytes.
_MAX_PAGES = 500
_DRIP_SECONDS = 60.0
_HUGE = 64 * 1024 * 1024


@dataclass
class _Resource:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool = True
    objects: list[dict[str, Any]] = field(default_factory=list)
    generation: int = 0


@dataclass
class KubeApiStandIn:
    """The stand-in API server (see the module docstring); start with :meth:`start`, or as a context."""

    folder: Path
    port: int = 0
    faults: dict[str, list[tuple[int, str | None]]] = field(default_factory=dict)
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    misbehaving: dict[str, str] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)
    hung_up: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)
    _resources: dict[tuple[str, str, str], _Resource] = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _version: int = 1000

    def __post_init__(self) -> None:
        for group, version, resource, kind in (
            ("", "v1", "pods", "Pod"),
            ("", "v1", "replicationcontrollers", "ReplicationController"),
            ("apps", "v1", "deployments", "Deployment"),
            ("apps", "v1", "replicasets", "ReplicaSet"),
            ("apps", "v1", "statefulsets", "StatefulSet"),
            ("apps", "v1", "daemonsets", "DaemonSet"),
            ("batch", "v1", "jobs", "Job"),
            ("batch", "v1", "cronjobs", "CronJob"),
            ("wgpolicyk8s.io", "v1alpha2", "policyreports", "PolicyReport"),
            ("wgpolicyk8s.io", "v1alpha2", "clusterpolicyreports", "ClusterPolicyReport"),
        ):
            self._resources[(group, version, resource)] = _Resource(
                group, version, resource, kind, namespaced=resource != "clusterpolicyreports"
            )

    def add_crd(self, group: str, version: str, resource: str, kind: str) -> None:
        """Serve a custom resource (as if its CRD were installed)."""
        self._resources[(group, version, resource)] = _Resource(group, version, resource, kind)

    def add(self, obj: dict[str, Any]) -> None:
        """Store ``obj`` (with ``apiVersion`` and ``kind``) as if it had been created; gives it a uid."""
        with self._lock:
            self._add(obj)

    def _add(self, obj: dict[str, Any]) -> None:
        group, _, version = obj["apiVersion"].rpartition("/")
        key = (group, version, obj["kind"])
        entry = next(r for r in self._resources.values() if (r.group, r.version, r.kind) == key)
        stored = json.loads(json.dumps(obj))
        self._stamp(stored)
        entry.objects.append(stored)
        entry.generation += 1

    def objects(self, resource: str) -> list[dict[str, Any]]:
        """What is stored of ``resource`` (``policyreports``, …), as the API server would return it."""
        return [o for r in self._resources.values() if r.resource == resource for o in r.objects]

    def saw_hang_up(self, path: str, within: float = 30.0) -> bool:
        """Whether the client of a misbehaving ``path`` closed the connection before the body was whole;
        waits up to ``within`` seconds for the server to notice (at its next write)."""
        stop = time.monotonic() + within
        while path not in self.hung_up and time.monotonic() < stop:
            time.sleep(0.01)
        return path in self.hung_up

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for the stand-in: its CA and a bearer token."""
        ca = (self.folder / "ca.crt").read_bytes()
        cluster = {
            "server": f"https://127.0.0.1:{self.port}",
            "certificate-authority-data": base64.b64encode(ca).decode(),
        }
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "standin", "cluster": cluster}],
            "users": [{"name": "auditor", "user": {"token": TOKEN}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "auditor"}}],
            "current-context": "standin",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def start(self) -> KubeApiStandIn:
        files = make_self_signed(self.folder, sans=["127.0.0.1"])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(files.cert, files.key)
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> KubeApiStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers ------------------------------------------------------------------------------------------

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        with self._lock:
            self.requests.append((method, path, query))
            queued = self.faults.get(path)
            if queued:
                status, retry_after = queued.pop(0)
                return status, ("fault", retry_after)
            if path in self.misbehaving:
                return 200, ("misbehave", self.misbehaving[path])
            answered = self._answer(method, path, query, body)
            change = self.changes.get(path) if "continue" not in query else None
            if change is not None and answered[0] == 200:
                del self.changes[path]
                self._add(change)
            return answered

    def _answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if path == "/api":
            return 200, json.loads((RECORDED / "api.json").read_text())
        if path == "/apis":
            return 200, self._group_list()
        if parts[:1] == ["api"]:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return 404, _status(404, "NotFound", f"the server could not find the requested resource ({path})")
        if not rest:
            return self._resource_list(group, version)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        entry = self._resources.get((group, version, rest[0]))
        if entry is None or len(rest) > 2:
            return 404, _status(404, "NotFound", f"the server could not find the requested resource ({path})")
        name = rest[1] if len(rest) == 2 else None
        if method == "GET" and name is None:
            return self._list(entry, namespace, query)
        if method == "GET":
            found = self._find(entry, namespace, name)
            if found is None:
                return 404, _status(
                    404, "NotFound", f'{entry.resource}.{group} "{name}" not found', name, entry
                )
            return 200, found
        if entry.resource not in _REPORTS:
            return 405, _status(405, "MethodNotAllowed", "the stand-in writes PolicyReports only")
        return self._write(method, entry, namespace, name, body)

    def _group_list(self) -> dict[str, Any]:
        recorded = {"apps": "apps/v1", "batch": "batch/v1"}
        groups = []
        for group in dict.fromkeys(r.group for r in self._resources.values() if r.group):
            version = recorded.get(
                group, next(r.version for r in self._resources.values() if r.group == group)
            )
            version = version.rpartition("/")[2]
            entry = {"groupVersion": f"{group}/{version}", "version": version}
            groups.append({"name": group, "preferredVersion": entry, "versions": [entry]})
        return {"apiVersion": "v1", "groups": groups, "kind": "APIGroupList"}

    def _resource_list(self, group: str, version: str) -> tuple[int, Any]:
        recorded = RECORDED / f"apis__{group}__{version}.json"
        if group and recorded.is_file():
            return 200, json.loads(recorded.read_text())
        served = [r for r in self._resources.values() if (r.group, r.version) == (group, version)]
        if not served:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        return 200, {
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "kind": "APIResourceList",
            "resources": [
                {
                    "kind": r.kind,
                    "name": r.resource,
                    "namespaced": r.namespaced,
                    "singularName": r.kind.lower(),
                    "verbs": [
                        "create",
                        "delete",
                        "deletecollection",
                        "get",
                        "list",
                        "patch",
                        "update",
                        "watch",
                    ],
                }
                for r in served
            ],
        }

    def _list(self, entry: _Resource, namespace: str | None, query: dict[str, list[str]]) -> tuple[int, Any]:
        items = [o for o in entry.objects if namespace is None or o["metadata"].get("namespace") == namespace]
        selector = query.get("labelSelector", [""])[0]
        if selector:
            key, _, value = selector.partition("=")
            items = [o for o in items if (o["metadata"].get("labels") or {}).get(key) == value]
        start = 0
        token = query.get("continue", [None])[0]
        if token:
            state = json.loads(base64.b64decode(token))
            if state["generation"] != entry.generation:
                return 410, _status(410, "Expired", _EXPIRED)
            start = state["start"]
        limit = int(query.get("limit", ["0"])[0]) or len(items) or 1
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(self._version)}
        if start + limit < len(items):
            state = {"generation": entry.generation, "start": start + limit, "rv": self._version}
            metadata["continue"] = base64.b64encode(json.dumps(state).encode()).decode()
            metadata["remainingItemCount"] = len(items) - start - limit
        listed = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in page]
        api_version = f"{entry.group}/{entry.version}" if entry.group else entry.version
        return 200, {
            "apiVersion": api_version,
            "items": listed,
            "kind": f"{entry.kind}List",
            "metadata": metadata,
        }

    def _find(self, entry: _Resource, namespace: str | None, name: str | None) -> dict[str, Any] | None:
        return next(
            (
                o
                for o in entry.objects
                if o["metadata"].get("name") == name and o["metadata"].get("namespace") == namespace
            ),
            None,
        )

    def _write(
        self, method: str, entry: _Resource, namespace: str | None, name: str | None, body: Any
    ) -> tuple[int, Any]:
        if not isinstance(body, dict) or body.get("kind") != entry.kind:
            return 400, _status(400, "BadRequest", f"the body is not a {entry.kind}")
        body_name = body.get("metadata", {}).get("name")
        body_namespace = body.get("metadata", {}).get("namespace")
        if (body_namespace or None) != namespace:
            return 400, _status(400, "BadRequest", "the namespace of the provided object does not match the "
                                "namespace sent on the request")  # fmt: skip
        if method == "POST" and name is None:
            if self._find(entry, namespace, body_name) is not None:
                message = f'{entry.resource}.{entry.group} "{body_name}" already exists'
                return 409, _status(409, "AlreadyExists", message, body_name, entry)
            stored = json.loads(json.dumps(body))
            self._stamp(stored)
            entry.objects.append(stored)
            entry.generation += 1
            return 201, stored
        if method == "PUT" and name is not None:
            current = self._find(entry, namespace, name)
            if current is None:
                return 404, _status(
                    404, "NotFound", f'{entry.resource}.{entry.group} "{name}" not found', name, entry
                )
            sent = body.get("metadata", {}).get("resourceVersion")
            if sent != current["metadata"]["resourceVersion"]:
                message = (
                    f'Operation cannot be fulfilled on {entry.resource}.{entry.group} "{name}": {_MODIFIED}'
                )
                return 409, _status(409, "Conflict", message, name, entry)
            stored = json.loads(json.dumps(body))
            stored["metadata"]["uid"] = current["metadata"]["uid"]
            stored["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"]
            self._version += 1
            stored["metadata"]["resourceVersion"] = str(self._version)
            entry.objects[entry.objects.index(current)] = stored
            entry.generation += 1
            return 200, stored
        return 405, _status(405, "MethodNotAllowed", f"{method} is not supported here")

    def _stamp(self, obj: dict[str, Any]) -> None:
        self._version += 1
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata["resourceVersion"] = str(self._version)
        metadata.setdefault("creationTimestamp", "2026-11-01T09:00:00Z")


def _status(
    code: int, reason: str, message: str, name: str | None = None, entry: _Resource | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code}  # fmt: skip
    if name is not None and entry is not None:
        status["details"] = {"name": name, "group": entry.group, "kind": entry.resource}
    return status


def _handler(standin: KubeApiStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _serve(self) -> None:
            url = urlsplit(self.path)
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() != "bearer" or token != TOKEN:  # the scheme is case-insensitive, as there
                self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            query = parse_qs(url.query)
            status, answer = standin.answer(self.command, url.path, query, body)
            if isinstance(answer, tuple) and answer[0] == "misbehave":
                self._misbehave(url.path, answer[1], query)
            elif isinstance(answer, tuple):
                self._fault(status, answer[1])
            else:
                self._send(status, answer)

        def _misbehave(self, path: str, how: str, query: dict[str, list[str]]) -> None:
            if how in ("repeat-continue", "endless-continue"):
                pages = sum(1 for _, p, _ in standin.requests if p == path)
                token = "c3RhbmQtaW4" if how == "repeat-continue" else f"page-{pages}"
                metadata = {"resourceVersion": "1", "continue": token} if pages < _MAX_PAGES else {}
                self._send(200, {"apiVersion": "apps/v1", "kind": "DeploymentList", "metadata": metadata,
                                 "items": []})  # fmt: skip
                return
            if how == "drip-headers":
                self._drip_headers(path)
                return
            head = b'{"apiVersion":"apps/v1","kind":"DeploymentList","metadata":{},"items":[]'
            size = 100_000 if how == "drip" else _HUGE
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if how == "huge-unsized":
                self.send_header("Connection", "close")
                self.close_connection = True
            else:
                self.send_header("Content-Length", str(len(head) + size + 1))
            self.end_headers()
            written = 0
            stop = time.monotonic() + _DRIP_SECONDS
            try:
                self.wfile.write(head)
                while written < size and time.monotonic() < stop:
                    step = 1 if how == "drip" else min(1024 * 1024, size - written)
                    self.wfile.write(b" " * step)
                    self.wfile.flush()
                    written += step
                    with standin._lock:
                        standin.sent[path] = written
                    if how == "drip":
                        time.sleep(0.02)
                if written == size:
                    self.wfile.write(b"}")
                    self.wfile.flush()
                else:
                    self.close_connection = True  # gave up dripping: the client got a body cut short
            except OSError:  # the client hung up before the body was whole
                with standin._lock:
                    standin.hung_up.add(path)
                self.close_connection = True

        def _drip_headers(self, path: str) -> None:
            """A status line, then one header a byte at a time (http.client reads lines of up to 64 KiB)."""
            self.close_connection = True
            stop = time.monotonic() + _DRIP_SECONDS
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                while time.monotonic() < stop:
                    self.wfile.write(b"a")
                    self.wfile.flush()
                    with standin._lock:
                        standin.sent[path] = standin.sent.get(path, 0) + 1
                    time.sleep(0.02)
            except OSError:
                with standin._lock:
                    standin.hung_up.add(path)

        def _fault(self, status: int, retry_after: str | None) -> None:
            if status == 503:
                # what an aggregated API that is down answers (plain text, no Status)
                self._raw(503, b"service unavailable\n", "text/plain; charset=utf-8", {})
                return
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            message = "Too many requests, please try again later." if status == 429 else "Internal error"
            reason = "TooManyRequests" if status == 429 else "InternalError"
            data = json.dumps(_status(status, reason, message)).encode()
            self._raw(status, data, "application/json", headers)

        def _send(self, status: int, answer: Any) -> None:
            self._raw(status, json.dumps(answer).encode(), "application/json", {})

        def _raw(self, status: int, data: bytes, content_type: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _serve

    return Handler


def workloads(count: int, namespaces: tuple[str, ...], image: str) -> Iterator[dict[str, Any]]:
    """``count`` Deployments spread over ``namespaces``, each running ``image``."""
    for n in range(count):
        namespace = namespaces[n % len(namespaces)]
        labels = {"app": f"app-{n}"}
        yield {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"app-{n}", "namespace": namespace, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "main", "image": image}]},
                },
            },
        }
