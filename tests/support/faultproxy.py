"""An HTTP/1.1 proxy on 127.0.0.1 that sits between the client and a registry and injects faults.

Each request is forwarded to the upstream registry on a fresh connection, unless a matching rule says
otherwise: answer with a status (500, 429 with ``Retry-After``), reset the connection, wait before
answering, send half the body and close, flip a byte of the body, or drip the body out a byte at a time.
Every request seen is recorded, so tests can count what the client sent.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

FaultKind = Literal["status", "reset", "delay", "truncate", "corrupt", "drip", "redirect", "challenge"]


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    status: int = 500
    seconds: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    #: Where a redirect points (host:port); the upstream registry by default.
    target: str | None = None
    #: Body and Content-Type of an injected answer (an OCI error document by default).
    body: bytes | None = None
    content_type: str = "application/json"

    @classmethod
    def answer(
        cls,
        status: int,
        *,
        retry_after: str | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> Fault:
        headers = (("Retry-After", retry_after),) if retry_after is not None else ()
        return cls("status", status=status, headers=headers, body=body, content_type=content_type)


@dataclass
class _Rule:
    fault: Fault
    method: str | None
    path: str | None
    times: int | None

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        return (self.method is None or self.method == method) and (self.path is None or self.path in path)


@dataclass
class _Response:
    status_line: bytes
    headers: list[tuple[str, str]]
    body: bytes = field(default=b"")


class FaultProxy:
    """``async with FaultProxy(host, port) as proxy``: ``proxy.host`` is the address to give the client."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._rules: list[_Rule] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: (method, path) of every request received, in order.
        self.requests: list[tuple[str, str]] = []
        #: The Authorization header of each request (None when absent), in the same order.
        self.authorizations: list[str | None] = []

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def host(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    def inject(
        self, fault: Fault, *, method: str | None = None, path: str | None = None, times: int | None = None
    ) -> None:
        """Apply ``fault`` to matching requests (``path`` is a substring), ``times`` times or forever."""
        self._rules.append(_Rule(fault, method, path, times))

    def clear(self) -> None:
        self._rules.clear()

    def count(self, method: str | None = None, path: str | None = None) -> int:
        return sum(
            1 for m, p in self.requests if (method is None or m == method) and (path is None or path in p)
        )

    def _rule_for(self, method: str, path: str) -> Fault | None:
        for rule in self._rules:
            if rule.matches(method, path):
                if rule.times is not None:
                    rule.times -= 1
                return rule.fault
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = [tuple(line.split(":", 1)) for line in lines[1:] if ":" in line]
        pairs = [(k.strip(), v.strip()) for k, v in headers]
        length = int(next((v for k, v in pairs if k.lower() == "content-length"), "0"))
        body = await reader.readexactly(length) if length else b""
        self.requests.append((method, path))
        authorization = next((v for k, v in pairs if k.lower() == "authorization"), None)
        self.authorizations.append(authorization)
        fault = self._rule_for(method, path)
        if fault is not None and fault.kind == "challenge":
            if authorization is None:
                writer.write(
                    b'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm="fault proxy"\r\n'
                    b"Content-Length: 0\r\n\r\n"
                )
                await writer.drain()
                return True
            fault = None
        if fault is not None and fault.kind == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault is not None and fault.kind == "status":
            payload = fault.body
            if payload is None:
                payload = b'{"errors":[{"code":"INJECTED","message":"injected by the fault proxy"}]}'
            extra = "".join(f"{k}: {v}\r\n" for k, v in fault.headers)
            writer.write(
                f"HTTP/1.1 {fault.status} Injected\r\nContent-Type: {fault.content_type}\r\n{extra}"
                f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
            return True
        if fault is not None and fault.kind == "redirect":
            where = fault.target or f"{self._upstream[0]}:{self._upstream[1]}"
            target = f"http://{where}{path}"
            writer.write(
                f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n".encode()
            )
            await writer.drain()
            return True
        if fault is not None and fault.kind == "delay":
            await asyncio.sleep(fault.seconds)
        response = await self._forward(method, path, pairs, body)
        data = response.body
        if fault is not None and fault.kind == "corrupt" and data:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
        head_out = response.status_line + b"\r\n"
        for name, value in response.headers:
            if name.lower() in ("content-length", "transfer-encoding", "connection"):
                continue
            head_out += f"{name}: {value}\r\n".encode("latin-1")
        declared = next((v for k, v in response.headers if k.lower() == "content-length"), None)
        length_out = declared if method == "HEAD" and declared is not None else str(len(data))
        head_out += f"Content-Length: {length_out}\r\n\r\n".encode()
        if method == "HEAD":
            data = b""
        if fault is not None and fault.kind == "truncate":
            writer.write(head_out + data[: len(data) // 2])
            await writer.drain()
            return False
        if fault is not None and fault.kind == "drip":
            writer.write(head_out)
            for index in range(len(data)):
                writer.write(data[index : index + 1])
                await writer.drain()
                await asyncio.sleep(fault.seconds)
            return True
        writer.write(head_out + data)
        await writer.drain()
        return True

    async def _forward(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> _Response:
        reader, writer = await asyncio.open_connection(*self._upstream)
        try:
            out = f"{method} {path} HTTP/1.1\r\n".encode()
            for name, value in headers:
                if name.lower() in ("connection", "keep-alive"):
                    continue
                out += f"{name}: {value}\r\n".encode("latin-1")
            out += b"Connection: close\r\n\r\n" + body
            writer.write(out)
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        pairs = [(k.strip(), v.strip()) for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)]
        if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in pairs):
            rest = _dechunk(rest)
        return _Response(lines[0].encode("latin-1"), pairs, b"" if method == "HEAD" else rest)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)
