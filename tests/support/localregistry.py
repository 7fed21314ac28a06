"""Debian's ``docker-registry`` (distribution 2.8) on 127.0.0.1 for tests, and client settings for it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from verifier.registry.config import RegistryConfig, RegistryEntry, RetryPolicy, Timeouts

BINARY = shutil.which("docker-registry")
HTPASSWD_USER = "trtguard"
HTPASSWD_PASSWORD = "registry-test-password"  # matches tests/data/800-registry-htpasswd.txt


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LocalRegistry:
    """A running docker-registry process."""

    host: str
    process: subprocess.Popen[bytes]
    folder: Path
    tls: bool = False

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def start_registry(folder: Path, *, http: dict[str, object], auth: dict[str, object] | None) -> LocalRegistry:
    if BINARY is None:
        pytest.skip("the Debian docker-registry binary is not installed (apt-get install docker-registry)")
    port = _free_port()
    config: dict[str, object] = {
        "version": 0.1,
        "log": {"level": "error", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(folder / "storage")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}", **http},
    }
    if auth is not None:
        config["auth"] = auth
    path = folder / "config.yml"
    path.write_text(json.dumps(config))  # JSON is YAML
    log = (folder / "registry.log").open("wb")
    process = subprocess.Popen([BINARY, "serve", str(path)], stdout=log, stderr=subprocess.STDOUT)
    registry = LocalRegistry(f"127.0.0.1:{port}", process, folder, tls="tls" in http)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return registry
        except OSError:
            time.sleep(0.05)
    registry.stop()
    raise RuntimeError(f"docker-registry did not start: {(folder / 'registry.log').read_text()[-2000:]}")


def plain_config(
    *hosts: str, attempts: int = 3, backoff: float = 0.05, max_backoff: float = 0.2, **extra: object
) -> RegistryConfig:
    """A client configuration that allows plain HTTP to the given loopback hosts, with quick retries."""
    entry = RegistryEntry(
        plain_http=True,
        retry=RetryPolicy(attempts=attempts, backoff=backoff, max_backoff=max_backoff),
        timeouts=Timeouts(connect=2, read=5, request=10),
    )
    return RegistryConfig.model_validate({"registries": dict.fromkeys(hosts, entry), **extra})
