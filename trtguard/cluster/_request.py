"""One request to the API server within its deadline, and its answer read within bounds.

A socket's read timeout counts from the last byte that came, so a server that trickles its answer (the
handshake, the status line, the headers or the body) a byte at a time never trips one. Each request therefore
has a watchdog (:class:`ApiRequest`): a timer that shuts the request's sockets at its deadline, the request
timeout within the audit's own, which ends whatever read is blocked on them. The connections of the
client's pools hand their sockets to the request under way (:func:`watch_connections`). The body is read a
chunk at a time, up to a number of bytes, and only a body read to its end, in time, is an answer.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from trtguard.cluster._errors import ApiError, AuditTimeout, Unanswered
from verifier.base import Deadline

__all__ = ["ApiRequest", "watch_connections"]

#: Bytes asked of the socket at a time.
_CHUNK: Final = 64 * 1024
#: The request under way in this thread (the client makes its requests in the thread that asks).
_CURRENT = threading.local()


@dataclass
class ApiRequest:
    """The deadline and watchdog of one request; use as a context around sending it and reading the answer."""

    method: str
    path: str
    timeout: float
    """The request's own: from connecting to the last byte of the answer."""
    audit: Deadline
    audit_timeout: float
    """The audit's, as given (for messages)."""
    max_bytes: int
    started: float = field(default_factory=time.monotonic)
    expired: bool = field(default=False, init=False)
    _sockets: list[socket.socket] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _timer: threading.Timer | None = field(default=None, init=False)

    def __enter__(self) -> ApiRequest:
        self._timer = threading.Timer(self.remaining(), self._expire)
        self._timer.daemon = True
        self._timer.start()
        _CURRENT.request = self
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.request = None
        if self._timer is not None:
            self._timer.cancel()

    def remaining(self) -> float:
        """Seconds this request has left."""
        own = self.timeout - (time.monotonic() - self.started)
        return max(0.0, min(own, self.audit.remaining()))

    def check(self, read: int | None = None) -> None:
        """Raise when the request is out of time: :class:`AuditTimeout` when the audit's deadline passed,
        else :class:`Unanswered` (the request timeout, which a retry may meet); ``read``: the bytes read."""
        if not self.expired and self.remaining() > 0:
            return
        where = f"{self.method} {self.path}"
        if self.audit.remaining() <= 0:
            raise AuditTimeout(self.audit_timeout, f"during {where}")
        got = f" ({read} bytes of it came)" if read is not None else ""
        raise Unanswered(
            f"{where}: no whole answer within {self.timeout:g} s (--request-timeout){got}", location=self.path
        )

    def read(self, response: Any, headers: Mapping[str, str]) -> bytes:
        """The body of ``response`` (a ``urllib3`` response not read yet; ``headers`` in lower case), within
        this request's deadline and ``max_bytes``; the connection is closed when it is not read to its end."""
        import urllib3  # noqa: PLC0415 - the kubernetes client's own transport

        where = f"{self.method} {self.path}"
        chunks: list[bytes] = []
        size, whole = 0, False
        try:
            encoding = headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise ApiError(f"{where}: the answer is {encoding}-encoded, which was not asked for")
            length = headers.get("content-length", "").strip()
            if length.isdigit() and int(length) > self.max_bytes:
                raise self._too_large(int(length))
            while True:
                try:
                    chunk = response.read1(_CHUNK, decode_content=False)
                except (OSError, urllib3.exceptions.HTTPError) as error:
                    self.check(size)
                    cut = f"{where}: the answer was cut off after {size} bytes: {error}"
                    raise Unanswered(cut, location=self.path) from None
                self.check(size)  # the watchdog's shutdown reads as the end of a body of no stated length
                if not chunk:
                    whole = True
                    return b"".join(chunks)
                size += len(chunk)
                if size > self.max_bytes:
                    raise self._too_large(None)
                chunks.append(chunk)
        finally:
            if whole:
                response.release_conn()
            else:
                response.close()  # what is left unread must not be read by the next request

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` at this request's deadline (at once if it passed)."""
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def _too_large(self, length: int | None) -> ApiError:
        said = f" (it says {length} bytes)" if length is not None else ""
        return ApiError(
            f"{self.method} {self.path}: the answer is larger than {self.max_bytes} bytes{said} "
            "(--max-response-mib)",
            location=self.path,
            hint="raise --max-response-mib, or lower --page-size so that each page is smaller",
        )


def watch_connections(pool_manager: Any) -> None:
    """Make the connections of ``pool_manager`` (the client's ``urllib3.PoolManager``, before its first
    request) hand their sockets to the :class:`ApiRequest` under way: a new one as soon as its socket
    exists, before the TLS handshake, and every one again when it waits for an answer (a kept-alive
    connection serves several requests)."""
    pool_manager.pool_classes_by_scheme = {
        scheme: _watched(pool) for scheme, pool in pool_manager.pool_classes_by_scheme.items()
    }


def _watched(pool: type[Any]) -> type[Any]:
    base: type[Any] = pool.ConnectionCls

    def new_conn(self: Any) -> socket.socket:
        sock: socket.socket = base._new_conn(self)
        _watch(sock)
        return sock

    def getresponse(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.sock is not None:
            _watch(self.sock)
        return base.getresponse(self, *args, **kwargs)

    connection = type(f"Watched{base.__name__}", (base,), {"_new_conn": new_conn, "getresponse": getresponse})
    return type(f"Watched{pool.__name__}", (pool,), {"ConnectionCls": connection})


def _watch(sock: socket.socket) -> None:
    request: ApiRequest | None = getattr(_CURRENT, "request", None)
    if request is not None:
        request.watch(sock)


def _shut(sock: socket.socket) -> None:
    """End both directions of ``sock``, waking a read blocked on it (the plain socket's shutdown: a TLS
    socket's own would also drop its TLS state under the reader)."""
    with contextlib.suppress(OSError):  # closed already
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
