"""How long a client may hold a connection to ``trtguard serve``, and how many it may hold.

uvicorn arms its keep-alive timer only after a first response and gives the TLS handshake asyncio's 60 s, the
request head and the body no deadline at all: a client that connected and sent nothing, or trickled its
headers a byte at a time, held a connection (and some 40 KiB) for minutes. :func:`guarded_http_protocol`
returns uvicorn's httptools protocol with these bounds (:class:`ConnectionLimits`):

- ``header_timeout`` from accepting the connection to the end of the request headers, the TLS handshake
  included; on a kept-alive connection, from the first byte of the next request;
- ``body_timeout`` from the end of the headers to the end of the body, read by the application or not;
- ``idle_timeout`` between requests (uvicorn's keep-alive timer);
- :data:`MAX_HEAD_BYTES` of request line and headers;
- ``max_connections`` open at once: a connection beyond it closes the one that has been idle the longest, or
  is refused when none is idle.

A connection past its deadline is cut without an answer (nothing useful can reach a client that stopped
sending) and logged at debug level only: a flood of them must not flood the log.

TLS is layered on here, the moment a connection is accepted, rather than by the listening socket: that way the
handshake runs under the head deadline and counts toward the connection limit (a client that connects and
never starts a handshake costs as much as one that never sends headers). The layer is the event loop's own TLS
protocol, the one its servers use: uvloop's, or asyncio's with a 32 KiB read buffer instead of 256 KiB.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import sys
import time
from asyncio import sslproto
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

_log = logging.getLogger(__name__)

#: Request line plus headers; the API server sends well under 2 KiB.
MAX_HEAD_BYTES: Final = 64 * 1024
#: Seconds between warnings about refused connections (each one is counted, not logged).
REFUSED_WARNING_INTERVAL: Final = 10.0

_HEAD_TOO_LARGE: Final = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
)


class _AsyncioTLS(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a smaller read buffer (allocated and zeroed whole, per connection)."""

    max_size = 32 * 1024


def _tls_protocol(loop: asyncio.AbstractEventLoop) -> Callable[..., asyncio.BaseProtocol]:
    """The TLS protocol class of ``loop``; both take asyncio's ``SSLProtocol`` arguments.

    uvloop's (C) allocates its buffer lazily and, while closing, skips what the client still sends (asyncio's,
    in Python 3.11, resets the connection, so that a client still sending a refused body misses the answer).
    """
    uvloop_tls: Callable[..., asyncio.BaseProtocol] | None = getattr(
        sys.modules.get("uvloop.loop"), "SSLProtocol", None
    )
    if uvloop_tls is not None and type(loop).__module__.startswith("uvloop"):
        return uvloop_tls
    return _AsyncioTLS


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Deadlines (seconds) and the connection cap of one listening server."""

    header_timeout: float = 5.0
    body_timeout: float = 10.0
    idle_timeout: int = 100
    max_connections: int = 1000


class ConnectionTracker:
    """The open connections of one listening server: admission at the cap, and which are idle."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open: set[GuardedHttpProtocol] = set()
        # Insertion order is idle order: the first one has waited longest for its next request.
        self._idle: dict[GuardedHttpProtocol, None] = {}
        self.refused = 0
        self._warned_at = float("-inf")

    def admit(self, connection: GuardedHttpProtocol) -> bool:
        """Count ``connection`` in, making room by closing the longest-idle one; False when there is none."""
        if len(self.open) >= self.limits.max_connections:
            if not self._idle:
                self._refuse()
                return False
            oldest = next(iter(self._idle))
            self.release(oldest)
            oldest.shed()
        self.open.add(connection)
        return True

    def release(self, connection: GuardedHttpProtocol) -> None:
        """Forget ``connection`` (closed, or being closed)."""
        self.open.discard(connection)
        self._idle.pop(connection, None)

    def idle(self, connection: GuardedHttpProtocol, waiting: bool) -> None:
        """Mark ``connection`` as waiting for its next request, or no longer waiting."""
        if not waiting:
            self._idle.pop(connection, None)
        elif connection in self.open:
            self._idle[connection] = None

    def _refuse(self) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._warned_at >= REFUSED_WARNING_INTERVAL:
            self._warned_at = now
            _log.warning(
                "connection limit reached: refusing new connections while %d are open and busy",
                len(self.open),
                extra={"fields": {"max_connections": self.limits.max_connections, "refused": self.refused}},
            )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines and the cap of the module docstring.

    Subclasses made by :func:`guarded_http_protocol` set :attr:`tracker` and :attr:`tls`.
    """

    tracker: ClassVar[ConnectionTracker]
    tls: ClassVar[ssl.SSLContext | None]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._raw: asyncio.Transport | None = None
        self._ready = False
        self._deadline: asyncio.TimerHandle | None = None
        self._reading_head = True
        self._head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Admit the connection (or refuse it at the cap), start its head deadline and any TLS handshake.

        With TLS this is called twice: first with the accepted socket, then by the TLS layer with the
        encrypted transport once the handshake is done.
        """
        if self._raw is not None:
            self._ready = True
            super().connection_made(transport)
            return
        self._raw = transport
        if not self.tracker.admit(self):
            transport.abort()
            return
        self._arm(self.tracker.limits.header_timeout, "no request headers in time")
        if self.tls is None:
            self._ready = True
            super().connection_made(transport)
            return
        # Set up in this same call, so that no byte of the handshake can reach the HTTP parser.
        handshake: asyncio.Future[None] = self.loop.create_future()
        handshake.add_done_callback(self._handshake_done)
        header_timeout = self.tracker.limits.header_timeout
        layer = _tls_protocol(self.loop)(
            self.loop,
            self,
            self.tls,
            handshake,
            server_side=True,
            ssl_handshake_timeout=math.ceil(header_timeout),
            # A closing connection waits this long for the client's close_notify.
            ssl_shutdown_timeout=header_timeout,
        )
        transport.set_protocol(layer)
        layer.connection_made(transport)

    def _handshake_done(self, handshake: asyncio.Future[None]) -> None:
        # A failed or abandoned handshake: the TLS layer closed the socket, and uvicorn never saw it.
        error = None if handshake.cancelled() else handshake.exception()
        if not self._ready:
            _log.debug("TLS handshake failed: %r", error)
            self._close()

    def data_received(self, data: bytes) -> None:
        """Feed the parser, starting the head deadline on the first byte after an idle wait."""
        if self.timeout_keep_alive_task is not None:
            self.tracker.idle(self, waiting=False)
            self._start_head()
        was_head = self._reading_head
        super().data_received(data)
        # Whole reads of an unfinished head count toward its limit (a read that ends the head may carry body).
        if was_head and self._reading_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                _log.debug("request head larger than %d bytes; closing the connection", MAX_HEAD_BYTES)
                self.transport.write(_HEAD_TOO_LARGE)
                self.transport.close()

    def on_message_begin(self) -> None:
        """A new request: its head deadline runs (a pipelined one starts it here)."""
        self._start_head()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        """The head is in: the body deadline runs until the end of the message."""
        self._reading_head = False
        # A little past body_timeout, so that an application reading the body answers 408 itself first.
        self._arm(self.tracker.limits.body_timeout + 1.0, "the request body did not arrive in time")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The whole request is in: no deadline while the application works on it."""
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        """After uvicorn armed its keep-alive timer, the connection is idle (and may be shed at the cap)."""
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:
            self.tracker.idle(self, waiting=True)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection; uvicorn only hears of it once it was handed the (TLS) transport."""
        self._close()
        if self._ready:
            super().connection_lost(exc)

    def shed(self) -> None:
        """Close this idle connection to make room for a new one."""
        _log.debug("connection limit reached: closing the connection idle the longest")
        self._disarm()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _start_head(self) -> None:
        if not self._reading_head:
            self._reading_head = True
            self._head_bytes = 0
            self._arm(self.tracker.limits.header_timeout, "no request headers in time")

    def _arm(self, seconds: float, why: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire, why)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, why: str) -> None:
        self._deadline = None
        _log.debug("closing a connection: %s", why)
        transport = self.transport if self._ready else self._raw
        if transport is not None:
            transport.abort()

    def _close(self) -> None:
        self._disarm()
        self.tracker.release(self)


def guarded_http_protocol(
    tracker: ConnectionTracker, tls: ssl.SSLContext | None
) -> type[GuardedHttpProtocol]:
    """The protocol class to give uvicorn (``Config(http=…)``) for one listening server.

    ``tls`` is the server's context (it is not given to uvicorn, which would do the handshake without a
    deadline); ``None`` serves plain HTTP.
    """

    class Bound(GuardedHttpProtocol):
        pass

    Bound.tracker = tracker
    Bound.tls = tls
    return Bound
