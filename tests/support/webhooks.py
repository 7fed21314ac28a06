"""Webhook fixtures for every test folder (a plugin of tests/conftest.py); helpers live in ``harness.py``.

- ``verify_admission_response``, ``make_review``, ``make_pod``: the API server's checks and review builders.
- ``webhook_process`` / ``demo_webhook``: ``trtguard serve`` as a real process over real TLS.
- ``demo_material``: fresh keys, the bundled policies and signed attestations (trtguard.demo.material).
- ``pg_url`` / ``pg_proxy``: a fresh database on the local PostgreSQL server, and a cuttable path to it.
- ``tiny_disk``: a 2 MiB tmpfs to fill up (skipped where it cannot be mounted).
- ``shared_admission_review`` / ``shared_admission_request``: one test per public AdmissionReview fixture.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.availability import unavailable
from tests.support.harness import (
    SERVICE,
    PodFactory,
    ReviewFactory,
    StartWebhook,
    TcpProxy,
    Verifier,
    WaitUntil,
    WebhookProcess,
    pod,
    review,
    verify_admission_response,
)
from trtguard.demo.material import Material, make_material

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per public AdmissionReview fixture.

    ``shared_admission_review``: every file in ``fixtures/admission``. ``shared_admission_request``: those
    holding a request the API server could send (JSON, with a uid and a real operation), wrapped or bare.
    """
    for name, answerable in (("shared_admission_review", False), ("shared_admission_request", True)):
        if name in metafunc.fixturenames:
            folder = _shared_fixtures_root(metafunc.config) / "admission"
            if not folder.is_dir():
                # One case that asks for ``shared_fixtures``: skipped, or failed under .ci/run, saying why.
                metafunc.parametrize(name, ["shared-fixtures-missing"])
                continue
            metafunc.parametrize(
                name, [p.name for p in sorted(folder.iterdir()) if not answerable or _has_request(p)]
            )


def _has_request(path: Path) -> bool:
    try:
        document = json.loads(path.read_bytes())
    except ValueError:
        return False
    request = document.get("request", document) if isinstance(document, dict) else None
    return (
        isinstance(request, dict)
        and isinstance(request.get("uid"), str)
        and request.get("operation") in ("CREATE", "UPDATE", "DELETE", "CONNECT")
    )


def _shared_fixtures_root(config: pytest.Config) -> Path:
    # The top-level tests/conftest.py decides where the public data lives; ask it rather than repeat it.
    top = config.rootpath / "tests" / "conftest.py"
    for plugin in config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) == str(top):
            return Path(plugin.SHARED_FIXTURES)
    raise RuntimeError(f"{top} is not loaded")


@pytest.fixture(name="verify_admission_response")
def _verify_admission_response() -> Verifier:
    """The API server's checks of a webhook answer, as a function ``(uid, response) -> response dict``."""
    return verify_admission_response


@pytest.fixture(name="make_review")
def _make_review() -> ReviewFactory:
    """:func:`review` as a fixture."""
    return review


@pytest.fixture(name="make_pod")
def _make_pod() -> PodFactory:
    """:func:`pod` as a fixture."""
    return pod


@pytest.fixture
def webhook_process(tmp_path: Path) -> Iterator[StartWebhook]:
    """Factory ``webhook_process(*args, workdir=…, env=…)``: a ``trtguard serve`` stopped after the test."""
    started: list[WebhookProcess] = []

    def start(*args: str, workdir: Path | None = None, env: dict[str, str] | None = None) -> WebhookProcess:
        process = WebhookProcess(list(args), workdir or tmp_path, env or {})
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def demo_material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    """Keys, the bundled policies and signed attestations, generated once per test session."""
    return make_material(tmp_path_factory.mktemp("material"))


@pytest.fixture
async def wait_until() -> AsyncIterator[WaitUntil]:
    """``await wait_until(predicate, within=5)``: poll an (async or plain) predicate until it holds."""

    async def wait(predicate: Callable[[], Any], within: float = 10.0, interval: float = 0.05) -> Any:
        deadline = time.monotonic() + within
        while True:
            value = predicate()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {within} s")
            await asyncio.sleep(interval)

    yield wait


@pytest.fixture(scope="module")
def demo_webhook(
    demo_material: Material, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebhookProcess]:
    """One ``trtguard serve`` per test module: the bundled policies with demo keys, the demo attestations,
    a self-signed certificate for the Service name, a SQLite decision log and a probe port."""
    workdir = tmp_path_factory.mktemp("webhook")
    process = WebhookProcess(
        [
            "--policies",
            str(demo_material.policies),
            "--attestations",
            str(demo_material.attestations),
            "--self-signed",
            "tls",
            "--san",
            SERVICE,
            "--decision-log",
            "sqlite:///decisions.db",
            "--metrics-port",
            "0",
        ],
        workdir,
    )
    process.start()
    yield process
    process.stop()


def _pg_available() -> bool:
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty database on the local PostgreSQL server, dropped after the test."""
    if not _pg_available():
        if os.environ.get("TRTGUARD_REQUIRE_POSTGRES"):  # .ci/run sets it: there, a skip would hide a gap
            pytest.fail("no PostgreSQL server on 127.0.0.1:5432, and TRTGUARD_REQUIRE_POSTGRES is set")
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    name = f"trtguard_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def pg_proxy() -> AsyncIterator[TcpProxy]:
    """A started :class:`TcpProxy` to the local PostgreSQL server."""
    proxy = TcpProxy()
    await proxy.start()
    yield proxy
    await proxy.stop()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs to fill up (needs root to mount); skipped where it cannot be mounted (failed in CI)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        unavailable(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
