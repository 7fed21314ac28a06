"""webhook/_tls.py: the local CA and serving certificate, real TLS handshakes, and reload on a live
context."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import shutil
import ssl
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support.harness import WaitUntil
from verifier.base._errors import InputError
from webhook._tls import CertificateReloader, make_self_signed, server_context

SERVICE = "trtguard.trtguard.svc"


def _leaf(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _sans(cert: x509.Certificate) -> tuple[set[str], set[object]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), set(san.get_values_for_type(x509.IPAddress))


def test_self_signed_has_the_names_the_api_server_checks(tmp_path: Path) -> None:
    files = make_self_signed(tmp_path, sans=[SERVICE, "trtguard.trtguard.svc.cluster.local"])
    cert = _leaf(files.cert)
    dns, ips = _sans(cert)
    assert dns == {"localhost", SERVICE, "trtguard.trtguard.svc.cluster.local"}
    assert ips == {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert cert.signature_hash_algorithm is not None
    assert cert.signature_hash_algorithm.name == "sha256"
    cert.verify_directly_issued_by(_leaf(files.ca_cert))
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "ca.key").stat().st_mode) == 0o600


def test_self_signed_is_reused_while_valid_and_reissued_for_new_names(tmp_path: Path) -> None:
    first = make_self_signed(tmp_path, sans=[SERVICE])
    ca_bytes, leaf_bytes = first.ca_cert.read_bytes(), first.cert.read_bytes()
    make_self_signed(tmp_path, sans=[SERVICE])
    assert first.cert.read_bytes() == leaf_bytes  # nothing changed: reused
    make_self_signed(tmp_path, sans=[SERVICE, "other.ns.svc"])
    assert first.cert.read_bytes() != leaf_bytes  # a new name needs a new leaf …
    assert first.ca_cert.read_bytes() == ca_bytes  # … from the same CA, so pinned clients keep working
    assert "other.ns.svc" in _sans(_leaf(first.cert))[0]


def test_a_leaf_near_expiry_is_renewed(tmp_path: Path) -> None:
    files = make_self_signed(tmp_path, valid_days=40)
    before = files.cert.read_bytes()
    make_self_signed(tmp_path, valid_days=40, now=datetime.now(UTC) + timedelta(days=15))
    assert files.cert.read_bytes() != before


@pytest.mark.parametrize("bad", ["under_score.svc", "-x.svc", "a..b", "x" * 64 + ".svc", "exa mple"])
def test_bad_san_is_an_input_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InputError, match="neither a DNS name nor an IP address"):
        make_self_signed(tmp_path, sans=[bad])


def test_server_context_refuses_a_mismatched_pair(tmp_path: Path) -> None:
    a = make_self_signed(tmp_path / "a")
    b = make_self_signed(tmp_path / "b")
    with pytest.raises(InputError, match="cannot load the TLS certificate and key"):
        server_context(a.cert, b.key)


def _client(
    ca: Path,
    *,
    minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
    maximum: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED,
) -> ssl.SSLContext:
    """What the API server does: verify against the caBundle only, check the name, offer HTTP/1.1."""
    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = minimum
    context.maximum_version = maximum
    context.set_alpn_protocols(["http/1.1"])
    return context


class _TlsServer:
    """A TLS echo server on the context under test."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> _TlsServer:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            data = await reader.read(100)
            writer.write(data)
            await writer.drain()
            writer.close()

        self._server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=self.context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def handshake(
        self, client: ssl.SSLContext, server_name: str = SERVICE
    ) -> tuple[x509.Certificate, str | None, bytes]:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=client, server_hostname=server_name
        )
        ssl_object = writer.get_extra_info("ssl_object")
        peer = x509.load_der_x509_certificate(ssl_object.getpeercert(binary_form=True))
        alpn = ssl_object.selected_alpn_protocol()
        writer.write(b"ping")
        echoed = await reader.read(4)
        writer.close()
        return peer, alpn, echoed


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
async def test_handshake_with_sni_and_pinned_ca(tmp_path: Path) -> None:
    files = make_self_signed(tmp_path, sans=[SERVICE])
    async with _TlsServer(server_context(files.cert, files.key)) as server:
        peer, alpn, echoed = await server.handshake(_client(files.ca_cert))
        assert peer.serial_number == _leaf(files.cert).serial_number
        assert alpn == "http/1.1"
        assert echoed == b"ping"
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            await server.handshake(_client(files.ca_cert), server_name="evil.example.com")
        other = make_self_signed(tmp_path / "other")
        with pytest.raises(ssl.SSLCertVerificationError):
            await server.handshake(_client(other.ca_cert))
        with pytest.raises(ssl.SSLError):
            await server.handshake(
                _client(files.ca_cert, minimum=ssl.TLSVersion.TLSv1, maximum=ssl.TLSVersion.TLSv1_1)
            )


async def test_reload_swaps_the_certificate_on_the_live_context(tmp_path: Path) -> None:
    served = tmp_path / "served"
    first = make_self_signed(tmp_path / "one", sans=[SERVICE])
    second = make_self_signed(tmp_path / "two", sans=[SERVICE])
    served.mkdir()
    shutil.copy(first.cert, served / "tls.crt")
    shutil.copy(first.key, served / "tls.key")
    context = server_context(served / "tls.crt", served / "tls.key")
    events = []
    reloader = CertificateReloader(
        context,
        served / "tls.crt",
        served / "tls.key",
        on_reload=lambda ok, error: events.append((ok, error)),
    )
    assert await reloader.check() is None  # unchanged

    async with _TlsServer(context) as server:
        peer, _, _ = await server.handshake(_client(first.ca_cert))
        assert peer.serial_number == _leaf(first.cert).serial_number

        # Renewal as a Secret update does it: both files replaced.
        shutil.copy(second.key, served / "tls.key")
        shutil.copy(second.cert, served / "tls.crt")
        assert await reloader.check() is True
        assert events == [(True, None)]
        peer, _, _ = await server.handshake(_client(second.ca_cert))
        assert peer.serial_number == _leaf(second.cert).serial_number
        with pytest.raises(ssl.SSLCertVerificationError):
            await server.handshake(_client(first.ca_cert))
        assert reloader.not_after == _leaf(second.cert).not_valid_after_utc

        # A half-written update (new certificate, old key) is refused and the current pair stays.
        shutil.copy(first.cert, served / "tls.crt")
        assert await reloader.check() is False
        assert events[-1][0] is False
        assert "previous one stays in force" in (reloader.last_error or "")
        peer, _, _ = await server.handshake(_client(second.ca_cert))
        assert peer.serial_number == _leaf(second.cert).serial_number
        assert await reloader.check() is None  # reported once, not on every poll

        # Completing the update makes it go live.
        shutil.copy(first.key, served / "tls.key")
        assert await reloader.check() is True
        assert reloader.last_error is None
        peer, _, _ = await server.handshake(_client(first.ca_cert))
        assert peer.serial_number == _leaf(first.cert).serial_number


async def test_watch_picks_up_a_change_by_itself(tmp_path: Path) -> None:
    files = make_self_signed(tmp_path / "a", sans=[SERVICE])
    renewed = make_self_signed(tmp_path / "b", sans=[SERVICE])
    context = server_context(files.cert, files.key)
    reloaded = asyncio.Event()

    def on_reload(ok: bool, _error: str | None) -> None:
        if ok:
            reloaded.set()

    reloader = CertificateReloader(context, files.cert, files.key, on_reload=on_reload)
    task = asyncio.create_task(reloader.watch(0.05))
    try:
        shutil.copy(renewed.key, files.key)
        shutil.copy(renewed.cert, files.cert)
        await asyncio.wait_for(reloaded.wait(), 5)
    finally:
        task.cancel()
    async with _TlsServer(context) as server:
        peer, _, _ = await server.handshake(_client(renewed.ca_cert))
    assert peer.serial_number == _leaf(renewed.cert).serial_number


async def test_missing_files_keep_the_current_pair(tmp_path: Path) -> None:
    files = make_self_signed(tmp_path, sans=[SERVICE])
    context = server_context(files.cert, files.key)
    reloader = CertificateReloader(context, files.cert, files.key)
    files.cert.unlink()
    assert await reloader.check() is False
    assert "cannot read" in (reloader.last_error or "")
    async with _TlsServer(context) as server:
        await server.handshake(_client(files.ca_cert))


class _WatchedContext(ssl.SSLContext):
    """A server context that notes the thread of every load into it, and can fail the next one."""

    threads: list[int]
    fail_next: bool

    def load_cert_chain(self, certfile: Any, keyfile: Any = None, password: Any = None) -> None:
        self.threads.append(threading.get_ident())
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("injected failure")
        super().load_cert_chain(certfile, keyfile, password)


def _watched_context(cert: Path, key: Path) -> _WatchedContext:
    context = _WatchedContext(ssl.PROTOCOL_TLS_SERVER)
    context.threads, context.fail_next = [], False
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(cert, key)
    context.threads.clear()
    return context


async def test_the_watch_loads_a_new_pair_on_the_event_loop_thread(
    tmp_path: Path, wait_until: WaitUntil
) -> None:
    """Handshakes run on the event loop's thread; the live context is never changed from another one."""
    files = make_self_signed(tmp_path / "a", sans=[SERVICE])
    renewed = make_self_signed(tmp_path / "b", sans=[SERVICE])
    context = _watched_context(files.cert, files.key)
    events: list[bool] = []
    reloader = CertificateReloader(context, files.cert, files.key, on_reload=lambda ok, _: events.append(ok))
    task = asyncio.create_task(reloader.watch(0.05))
    try:
        shutil.copy(renewed.key, files.key)
        shutil.copy(renewed.cert, files.cert)
        await wait_until(lambda: events, within=5)
    finally:
        task.cancel()
    assert events == [True]
    assert context.threads == [threading.get_ident()]
    async with _TlsServer(context) as server:
        peer, _, _ = await server.handshake(_client(renewed.ca_cert))
    assert peer.serial_number == _leaf(renewed.cert).serial_number


async def test_the_watch_survives_a_reload_that_fails_unexpectedly(
    tmp_path: Path, wait_until: WaitUntil, caplog: pytest.LogCaptureFixture
) -> None:
    files = make_self_signed(tmp_path / "a", sans=[SERVICE])
    renewed = make_self_signed(tmp_path / "b", sans=[SERVICE])
    context = _watched_context(files.cert, files.key)
    context.fail_next = True
    events: list[tuple[bool, str | None]] = []
    reloader = CertificateReloader(
        context, files.cert, files.key, on_reload=lambda ok, error: events.append((ok, error))
    )
    task = asyncio.create_task(reloader.watch(0.05))
    try:
        shutil.copy(renewed.key, files.key)
        shutil.copy(renewed.cert, files.cert)
        # The first attempt fails inside the watch, is counted and logged, and the next poll succeeds.
        await wait_until(lambda: any(ok for ok, _ in events), within=5)
        assert not task.done()
    finally:
        task.cancel()
    assert events[0] == (False, "certificate reload failed: RuntimeError: injected failure")
    failed = [r for r in caplog.records if "injected failure" in r.getMessage()]
    assert failed and failed[0].levelno == logging.ERROR and failed[0].exc_info is not None
    async with _TlsServer(context) as server:
        peer, _, _ = await server.handshake(_client(renewed.ca_cert))
    assert peer.serial_number == _leaf(renewed.cert).serial_number
