"""Real registries for the registry tests: Debian's ``docker-registry`` (distribution 2.8) on 127.0.0.1.

Three session-wide instances, each with a temporary storage folder and a free port, stopped at the end:
``registry`` (plain HTTP, anonymous), ``tls_registry`` (TLS with a test CA, htpasswd Basic auth) and
``token_registry`` (Bearer token auth against :class:`TokenServer`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.faultproxy import FaultProxy
from tests.support.localregistry import LocalRegistry, plain_config, start_registry
from tests.support.tokenserver import TokenServer
from trtguard.release.publish import RegistryWriter
from verifier.registry.client import RegistryClient
from webhook._tls import make_self_signed


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    """An anonymous plain-HTTP registry."""
    running = start_registry(tmp_path_factory.mktemp("registry"), http={}, auth=None)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def tls_registry(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[LocalRegistry]:
    """A TLS registry (certificate from a test CA, ``ca.crt`` in its folder) with htpasswd Basic auth."""
    folder = tmp_path_factory.mktemp("tls-registry")
    files = make_self_signed(folder)  # the CA and serving certificate `trtguard serve --self-signed` makes
    cert, key = files.cert, files.key
    running = start_registry(
        folder,
        http={"tls": {"certificate": str(cert), "key": str(key)}},
        auth={"htpasswd": {"realm": "trtguard-test", "path": str(data_dir / "800-registry-htpasswd.txt")}},
    )
    yield running
    running.stop()


@pytest.fixture(scope="session")
def token_server() -> Iterator[TokenServer]:
    server = TokenServer(
        service="trtguard-test", issuer="trtguard-test-issuer", username="robot", password="robot-secret"
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def token_registry(
    tmp_path_factory: pytest.TempPathFactory, token_server: TokenServer
) -> Iterator[LocalRegistry]:
    """A plain-HTTP loopback registry that demands Bearer tokens from ``token_server``."""
    folder = tmp_path_factory.mktemp("token-registry")
    bundle = folder / "token-signer.pem"
    bundle.write_bytes(token_server.certificate_pem())
    running = start_registry(
        folder,
        http={},
        auth={
            "token": {
                "realm": token_server.realm,
                "service": token_server.service,
                "issuer": token_server.issuer,
                "rootcertbundle": str(bundle),
            }
        },
    )
    yield running
    running.stop()


@pytest.fixture
async def client(registry: LocalRegistry) -> AsyncIterator[RegistryClient]:
    """A client for the anonymous registry."""
    async with RegistryClient(plain_config(registry.host)) as made:
        yield made


@pytest.fixture
def writer(client: RegistryClient) -> RegistryWriter:
    """A writer over ``client`` (the anonymous registry)."""
    return RegistryWriter(client)


@pytest.fixture
async def proxy(registry: LocalRegistry) -> AsyncIterator[FaultProxy]:
    """A fault-injecting proxy in front of the anonymous registry."""
    host, port = registry.host.split(":")
    async with FaultProxy(host, int(port)) as running:
        yield running


@pytest.fixture
async def faulty(
    proxy: FaultProxy, registry: LocalRegistry
) -> AsyncIterator[tuple[RegistryClient, FaultProxy]]:
    """A client for the fault proxy (and the registry behind it, directly), with the proxy."""
    async with RegistryClient(plain_config(proxy.host, registry.host)) as made:
        yield made, proxy


_REGISTRY_FIXTURES = frozenset({"registry", "tls_registry", "token_registry"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that starts a registry with ``registry`` (``-m "not registry"`` leaves them out)."""
    for item in items:
        if _REGISTRY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.registry)
