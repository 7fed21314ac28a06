"""The package's gzip stream as independent deflate segments, so that a large member compresses on a thread.

A package's tar stream is compressed as a sequence of segments, each by its own deflate compressor ended
with a sync flush (a byte-aligned empty stored block), the last one finished: concatenated, they are one
valid deflate stream that any gzip reader inflates (the way pigz writes). A segment is either a member's
data or the tar framing between two members (headers, padding, the archive's end), and a member's data
segment depends on its bytes alone. So the decision records of an export, gzip's bulk, are deflated by
:class:`DeflatingSpool` on a second thread while the log is still being verified (zlib and hashlib release
the GIL), and the archive is assembled afterwards from the deflated bytes: a spooled member and the same
bytes given whole compress to the same segment (both are fed in :data:`CHUNK` pieces), so the package is as
reproducible as before. The gzip trailer's CRC-32 of the whole stream is combined from the segments' own.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import zlib
from dataclasses import dataclass
from typing import IO, Final

#: Compression level of every segment (zlib's default trade of speed for size).
LEVEL: Final = 6
#: Bytes handed to the compressor at a time, by the spool and for a member given whole alike.
CHUNK: Final = 1 << 20
#: Chunks waiting for the spool's thread: the memory an export's records cost beyond one record.
_WAITING: Final = 4
_CRC32_POLYNOMIAL: Final = 0xEDB88320


@dataclass(frozen=True, slots=True)
class Deflated:
    """A member's data as one deflate segment in ``file`` (read from the start), with the SHA-256, CRC-32
    and size of the data it inflates to."""

    file: IO[bytes]
    sha256: str
    crc32: int
    size: int


class SegmentDeflater:
    """One deflate segment of the data fed to it: a fresh compressor, ended by a sync flush (or finished)."""

    def __init__(self) -> None:
        self._compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        self.crc32 = 0
        self.size = 0

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        """Deflated bytes for the next ``data`` (at most :data:`CHUNK` at a time, for reproducibility)."""
        self.crc32 = zlib.crc32(data, self.crc32)
        self.size += len(data)
        return self._compressor.compress(data)

    def end(self, *, last: bool = False) -> bytes:
        """The rest of the segment: sync-flushed, or with ``last`` the end of the deflate stream."""
        return self._compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def deflate(data: bytes, *, last: bool = False) -> tuple[bytes, int]:
    """``data`` as one segment (fed in :data:`CHUNK` pieces, as a spool feeds them) and its CRC-32."""
    segment = SegmentDeflater()
    view = memoryview(data)
    parts = [segment.feed(view[start : start + CHUNK]) for start in range(0, len(data), CHUNK)]
    parts.append(segment.end(last=last))
    return b"".join(parts), segment.crc32


class DeflatingSpool:
    """A write-only file whose bytes are hashed and deflated, as one segment, into ``file`` on a thread.

    Written a line at a time by the thread that verifies the log; every :data:`CHUNK` bytes go to a thread
    of their own through a queue of :data:`_WAITING` chunks (a writer faster than the compressor waits, so
    memory stays bounded). :meth:`member` waits for the rest; :meth:`close` stops the thread whatever
    happened (the spool is a context manager).
    """

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self._pending = bytearray()
        self._chunks: queue.Queue[bytes | None] = queue.Queue(_WAITING)
        self._sha256 = hashlib.sha256()
        self._segment = SegmentDeflater()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._deflate, name="export-deflate", daemon=True)
        self._thread.start()

    def __enter__(self) -> DeflatingSpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def write(self, data: bytes) -> None:
        """Add ``data`` to the member."""
        self._pending += data
        if len(self._pending) >= CHUNK:
            chunk = bytes(self._pending[:CHUNK])
            del self._pending[:CHUNK]
            self._hand_over(chunk)

    def member(self) -> Deflated:
        """The deflated member, once the thread has deflated everything written."""
        for start in range(0, len(self._pending), CHUNK):
            self._hand_over(bytes(self._pending[start : start + CHUNK]))
        self._pending.clear()
        self.close()
        if self._error is not None:
            raise self._error
        self._file.seek(0)
        return Deflated(self._file, self._sha256.hexdigest(), self._segment.crc32, self._segment.size)

    def close(self) -> None:
        """Stop the thread (what it had not deflated yet is dropped once it failed)."""
        if self._thread.is_alive():
            self._chunks.put(None)
            self._thread.join()

    def _hand_over(self, chunk: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._chunks.put(chunk)

    def _deflate(self) -> None:
        while (chunk := self._chunks.get()) is not None:
            if self._error is not None:
                continue  # drain: the writer learns of the error at its next chunk, or at member()
            try:
                self._sha256.update(chunk)
                self._file.write(self._segment.feed(chunk))
            except BaseException as error:  # handed to the writer's thread, raised there
                self._error = error
        if self._error is None:
            try:
                self._file.write(self._segment.end())
                self._file.flush()
            except BaseException as error:  # as above
                self._error = error


def crc32_combine(first: int, second: int, second_size: int) -> int:
    """The CRC-32 of two byte strings joined, from the CRC-32 of each and the size of the second (zlib's
    ``crc32_combine``, which Python's zlib module does not offer): the first CRC is advanced over
    ``second_size`` zero bytes by the operators for 2^k zero bytes (matrices in GF(2), each the square of
    the one before, made once), one per bit set in the size, then the second's is added."""
    bit = 0
    while second_size:
        if second_size & 1:
            first = _times(_zero_bytes(bit), first)
        second_size >>= 1
        bit += 1
    return first ^ second


def _zero_bytes(bit: int) -> list[int]:
    """The operator advancing a CRC-32 over 2^``bit`` zero bytes."""
    if bit >= len(_ZERO_BYTES):
        # Appended in order under the lock: two threads growing the table at once made it wrong for the
        # rest of the process (attack 38e F3); a reader that sees an entry sees the right one.
        with _ZERO_BYTES_LOCK:
            while len(_ZERO_BYTES) <= bit:
                if not _ZERO_BYTES:
                    one_bit = [_CRC32_POLYNOMIAL] + [1 << n for n in range(31)]  # one zero bit's operator
                    _ZERO_BYTES.append(_square(_square(_square(one_bit))))  # eight zero bits
                else:
                    _ZERO_BYTES.append(_square(_ZERO_BYTES[-1]))
    return _ZERO_BYTES[bit]


#: The operators for 2^k zero bytes, k = 0, 1, …: made as sizes need them, the same for every archive.
_ZERO_BYTES: list[list[int]] = []
_ZERO_BYTES_LOCK: Final = threading.Lock()


def _times(matrix: list[int], vector: int) -> int:
    total = 0
    row = 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def _square(matrix: list[int]) -> list[int]:
    return [_times(matrix, column) for column in matrix]
