"""A minimal Kubernetes API server on 127.0.0.1, enough for ``helm template --dry-run=server`` and ``lookup``.

No kube-apiserver binary can be had here (research note §4.8), and ``lookup`` returns nothing without a
cluster. This answers discovery for the kinds the chart renders and GETs of the Secrets a test stores, so
that the chart's certificate reuse across upgrades runs exactly as it would against a cluster. Anything else
is 404, which is what an empty cluster answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: group/version -> (resource, kind, namespaced), for discovery.
_RESOURCES: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [
        ("secrets", "Secret", True),
        ("services", "Service", True),
        ("serviceaccounts", "ServiceAccount", True),
        ("configmaps", "ConfigMap", True),
        ("persistentvolumeclaims", "PersistentVolumeClaim", True),
    ],
    "apps/v1": [("deployments", "Deployment", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "admissionregistration.k8s.io/v1": [
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False)
    ],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy", True)],
    "batch/v1": [("jobs", "Job", True)],
}


class FakeApiServer:
    """Holds Secrets by (namespace, name); serves them and discovery until closed."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def store_secret(self, secret: dict[str, Any]) -> None:
        """Make ``secret`` exist, as if an earlier ``helm install`` had created it."""
        metadata = secret["metadata"]
        self.secrets[(metadata["namespace"], metadata["name"])] = secret

    def kubeconfig(self, folder: Path) -> Path:
        """A kubeconfig file pointing at this server."""
        host, port = self._server.server_address[:2]
        path = folder / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://{host!s}:{port}"}}],
            "users": [{"name": "test", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "test"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    def _answer(self, path: str) -> tuple[int, dict[str, Any]]:
        if path == "/version":
            return 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            groups = []
            for group_version in _RESOURCES:
                if "/" in group_version:
                    group, version = group_version.split("/")
                    entry = {"groupVersion": group_version, "version": version}
                    groups.append({"name": group, "versions": [entry], "preferredVersion": entry})
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        for group_version, resources in _RESOURCES.items():
            base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            if path == base:
                listed = [
                    {
                        "name": name,
                        "singularName": kind.lower(),
                        "namespaced": namespaced,
                        "kind": kind,
                        "verbs": ["get", "list", "create", "update", "patch", "delete"],
                    }
                    for name, kind, namespaced in resources
                ]
                return 200, {"kind": "APIResourceList", "groupVersion": group_version, "resources": listed}
        parts = path.strip("/").split("/")
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets":
            secret = self.secrets.get((parts[3], parts[5]))
            if secret is not None:
                return 200, secret
        return 404, {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": "NotFound",
            "code": 404,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                owner.requests.append(path)
                status, body = owner._answer(path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read ``requests`` instead."""

        return Handler

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextmanager
def fake_apiserver() -> Iterator[FakeApiServer]:
    """A running :class:`FakeApiServer`, stopped on exit."""
    server = FakeApiServer()
    server.start()
    try:
        yield server
    finally:
        server.close()
