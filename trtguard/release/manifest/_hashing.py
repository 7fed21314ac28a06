"""Hashing the inputs and outputs of a build: files and directory trees, in parallel, with progress.

Directory tree hash ``trtguard-tree-v1`` (used for calibration datasets that are folders):

* every regular file below the directory is included, hidden files too (an ignore list would let data
  escape the hash); a symbolic link to a regular file counts as that file's content under the link's path;
  a link to a directory, a dangling link, a device, a socket or a FIFO is an error;
* each file's path is taken relative to the directory, with ``/`` between components, as the raw bytes
  of the file name (``os.fsencode``); files are sorted by those bytes;
* the digest is SHA-256 over ``b"trtguard-tree-v1\\n"`` followed, for each file in order, by
  ``<sha256 hex of the content> <size in decimal> <path bytes>\\0``;
* empty directories leave no trace; a tree without any file is an error.

A single file's digest is the SHA-256 of its bytes (method ``file``).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Final, Literal, TextIO

from verifier.base import FileDigest, InputError, hash_file

TREE_METHOD: Final = "trtguard-tree-v1"
_TREE_PREFIX = b"trtguard-tree-v1\n"
_SMALL_FILE = 1024 * 1024
_BATCH_BYTES = 16 * 1024 * 1024
_BATCH_FILES = 256

HashMethod = Literal["file", "trtguard-tree-v1"]


@dataclass(frozen=True, slots=True)
class PathDigest:
    """The digest of a file or a directory tree."""

    sha256: str
    size: int
    """Bytes hashed (the sum of the file sizes for a tree)."""
    method: HashMethod


@dataclass(frozen=True, slots=True)
class _File:
    path: str
    relative: bytes
    size: int


def _tree_files(root: Path) -> list[_File]:
    """Every file below ``root``, sorted by relative path bytes; raises :class:`InputError` on specials."""
    found: list[_File] = []
    pending = [(str(root), b"")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as error:
            raise InputError(
                f"cannot list the directory: {error.strerror}",
                location=folder,
                hint="check its permissions",
            ) from error
        for entry in entries:
            relative = prefix + os.fsencode(entry.name)
            try:
                if entry.is_symlink():
                    target = entry.stat(follow_symlinks=True)
                    if not stat.S_ISREG(target.st_mode):
                        raise InputError(
                            "a symbolic link to something other than a file is not part of a dataset tree",
                            location=entry.path,
                            hint="replace the link with the files themselves, or remove it",
                        )
                    found.append(_File(entry.path, relative, target.st_size))
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, relative + b"/"))
                elif entry.is_file(follow_symlinks=False):
                    found.append(_File(entry.path, relative, entry.stat(follow_symlinks=False).st_size))
                else:
                    raise InputError(
                        "not a regular file or directory (a device, socket or FIFO)",
                        location=entry.path,
                        hint="a dataset tree may hold only files and directories",
                    )
            except FileNotFoundError as error:
                raise InputError(
                    "dangling symbolic link (or the file vanished while the tree was read)",
                    location=entry.path,
                    hint="fix or remove the link",
                ) from error
    if not found:
        raise InputError(
            "the directory holds no files",
            location=str(root),
            hint="give the calibration dataset folder itself (or a single file)",
        )
    found.sort(key=lambda item: item.relative)
    return found


def tree_digest(entries: Sequence[tuple[bytes, str, int]]) -> str:
    """The ``trtguard-tree-v1`` digest of ``(relative path bytes, sha256 hex, size)`` entries, any order."""
    hasher = sha256(_TREE_PREFIX)
    for relative, digest, size in sorted(entries):
        hasher.update(b"%s %d %s\0" % (digest.encode(), size, relative))
    return hasher.hexdigest()


class Progress:
    """A thread-safe byte counter that prints a progress line now and then.

    On a terminal the line is redrawn in place; elsewhere (a Job's log) a new line is printed at most every
    ``interval`` seconds.
    """

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._total = total
        self._stream = stream
        self._interval = interval
        self._clock = clock
        self._done = 0
        self._started = clock()
        self._last = self._started
        self._lock = threading.Lock()
        self._tty = stream.isatty()

    def add(self, count: int) -> None:
        """Count ``count`` more bytes hashed; print when the interval has passed."""
        with self._lock:
            self._done += count
            now = self._clock()
            if now - self._last >= self._interval:
                self._last = now
                self._print(now, final=False)

    def finish(self) -> None:
        """Print the closing line with the throughput."""
        with self._lock:
            self._print(self._clock(), final=True)

    def _print(self, now: float, *, final: bool) -> None:
        elapsed = max(now - self._started, 1e-9)
        rate = self._done / elapsed
        share = self._done / self._total if self._total else 1.0
        text = (
            f"hashing: {_size(self._done)} of {_size(self._total)} ({share:.0%}), "
            f"{_size(int(rate))}/s, {elapsed:.1f} s"
        )
        if final:
            text = f"hashed {_size(self._done)} in {elapsed:.1f} s ({_size(int(rate))}/s)"
        if self._tty:
            self._stream.write(f"\r\033[K{text}" + ("\n" if final else ""))
        else:
            self._stream.write(text + "\n")
        self._stream.flush()


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{count} B"
        value /= 1024
    raise AssertionError("unreachable")


def hash_paths(
    paths: Mapping[str, Path],
    *,
    workers: int,
    progress_stream: TextIO | None,
    progress_threshold: int = 256 * 1024 * 1024,
    progress_interval: float = 5.0,
) -> dict[str, PathDigest]:
    """Hash each named file or directory tree; all files share one pool of ``workers`` threads.

    ``hashlib`` releases the GIL while it hashes large buffers, so threads scale with cores and disks.
    Largest files go first so that one big file does not start last. A progress line goes to
    ``progress_stream`` when the total is at least ``progress_threshold`` bytes. Raises
    :class:`InputError` for a path that does not exist or cannot be read.
    """
    plans: dict[str, tuple[bool, list[_File]]] = {}
    for label, path in paths.items():
        if path.is_dir():
            plans[label] = (True, _tree_files(path))
        elif path.is_file():
            plans[label] = (False, [_File(str(path), os.fsencode(path.name), path.stat().st_size)])
        else:
            raise InputError(
                "no such file or directory" if not path.exists() else "not a regular file or directory",
                location=str(path),
                hint=f"check the path given for the {label}",
            )
    jobs = [item for _, items in plans.values() for item in items]
    total = sum(item.size for item in jobs)
    progress = (
        Progress(total, progress_stream, interval=progress_interval)
        if progress_stream is not None and total >= progress_threshold
        else None
    )

    digests: list[FileDigest | None] = [None] * len(jobs)
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="trtguard-hash") as pool:
        futures = [pool.submit(_hash_batch, jobs, batch, progress) for batch in _batches(jobs)]
        try:
            for future in futures:
                for index, digest in future.result():
                    digests[index] = digest
        except BaseException:
            # One unreadable file decides the outcome; do not keep hashing gigabytes for nothing.
            for future in futures:
                future.cancel()
            raise
    if progress is not None:
        progress.finish()

    results: dict[str, PathDigest] = {}
    cursor = 0
    for label, (is_tree, items) in plans.items():
        mine = [digest for digest in digests[cursor : cursor + len(items)] if digest is not None]
        cursor += len(items)
        # Sizes come from the bytes actually hashed, not from the directory listing made before.
        size = sum(digest.size for digest in mine)
        if is_tree:
            entries = [
                (item.relative, digest.sha256, digest.size) for item, digest in zip(items, mine, strict=True)
            ]
            results[label] = PathDigest(tree_digest(entries), size, TREE_METHOD)
        else:
            results[label] = PathDigest(mine[0].sha256, size, "file")
    return results


def _batches(jobs: list[_File]) -> list[list[int]]:
    """Job indices grouped into tasks: each large file alone (largest first, so that one big file does not
    start last), small files in groups, so that thousands of small files do not cost a task each."""
    order = sorted(range(len(jobs)), key=lambda index: -jobs[index].size)
    batches: list[list[int]] = []
    current: list[int] = []
    current_bytes = 0
    for index in order:
        size = jobs[index].size
        if size >= _SMALL_FILE:
            batches.append([index])
            continue
        current.append(index)
        current_bytes += size
        if current_bytes >= _BATCH_BYTES or len(current) >= _BATCH_FILES:
            batches.append(current)
            current, current_bytes = [], 0
    if current:
        batches.append(current)
    return batches


def _hash_batch(
    jobs: list[_File], batch: list[int], progress: Progress | None
) -> list[tuple[int, FileDigest]]:
    return [(index, _hash_one(jobs[index], progress)) for index in batch]


def _hash_one(item: _File, progress: Progress | None) -> FileDigest:
    try:
        if item.size < _SMALL_FILE:
            # hash_file sets up a 4 MiB buffer per call; datasets of many small files are faster read whole.
            with open(item.path, "rb") as stream:  # noqa: PTH123 (str path from os.scandir)
                data = stream.read()
            if progress is not None:
                progress.add(len(data))
            return FileDigest(sha256(data).hexdigest(), len(data))
        callback = None
        if progress is not None:
            last = 0

            def callback(done: int, _total: int) -> None:
                nonlocal last
                progress.add(done - last)
                last = done

        return hash_file(Path(item.path), progress=callback)
    except OSError as error:
        raise InputError(
            f"cannot read the file: {error.strerror}", location=item.path, hint="check its permissions"
        ) from error
