"""The policy set in force, reloaded when its files change, swapped atomically.

A reload reads and compiles the new files in a thread and replaces the :class:`LoadedPolicies` reference in
one assignment, so a review sees either the old set or the new one, never a mix. Files that do not load keep
the previous set in force; the failure is logged, kept for ``/readyz`` and counted in a metric.

A reload never acts on files that are still being written: changed files must read the same (names, sizes,
modification times and contents) twice, ``settle`` seconds apart, and again after they were compiled, or the
attempt is dropped and the next poll looks again. So the set in force only ever changes to one that was read
whole from files that stood still. (A writer that pauses longer than ``settle`` half-way through a file cannot
be told from one that finished: write policy files to a temporary name and rename them into place, as
Kubernetes does for ConfigMaps.)
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from policies.evaluator import AdmissionHistory, PolicyEvaluator
from policies.loader import PolicySet, load_policy_set
from verifier.base import InputError, TrtguardError
from verifier.evidence import EvidenceSource

_log = logging.getLogger(__name__)

ReloadCallback = Callable[["PolicyStore", bool], None]
"""Called as ``callback(store, succeeded)`` after each attempt to load changed files."""

#: Seconds changed policy files must stand still before a reload reads them.
DEFAULT_SETTLE: Final = 1.0
#: Attempts of :meth:`PolicyStore.load` while the files keep changing under it.
_STARTUP_ATTEMPTS: Final = 5


@dataclass(frozen=True, slots=True)
class LoadedPolicies:
    """A policy set and the evaluator that judges by it."""

    policy_set: PolicySet
    evaluator: PolicyEvaluator
    loaded_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def revision(self) -> str:
        """``sha256:…`` of the policy files."""
        return self.policy_set.revision


@dataclass(frozen=True, slots=True)
class ReloadFailure:
    """Why the newest policy files are not in force."""

    message: str
    at: datetime


class PolicyStore:
    """Holds the policies in force; :meth:`watch` reloads them when the files under ``path`` change.

    ``history`` (the decision log, for change control) is handed to every evaluator built from the files;
    ``settle`` is how long changed files must stand still before they are read (see the module docstring).
    """

    def __init__(
        self,
        path: Path,
        evidence: EvidenceSource,
        *,
        history: AdmissionHistory | None = None,
        on_reload: ReloadCallback | None = None,
        settle: float = DEFAULT_SETTLE,
    ) -> None:
        self.path = path
        self.evidence = evidence
        self.history = history
        self.settle = settle
        self._on_reload = on_reload
        self._current: LoadedPolicies | None = None
        self._fingerprint: str | None = None
        self.last_failure: ReloadFailure | None = None

    @property
    def current(self) -> LoadedPolicies | None:
        """The set in force (``None`` before the first successful load)."""
        return self._current

    def load(self) -> LoadedPolicies:
        """Load the files now (blocking); raises the loader's error and changes nothing when they are bad.

        Files that change while they are read are read again (a few times, ``settle`` seconds apart).
        """
        for _ in range(_STARTUP_ATTEMPTS):
            fingerprint = self._read_fingerprint()
            result = self._load_unless_changed(fingerprint)
            if isinstance(result, TrtguardError):
                raise result
            if result is not None:
                self._swap(result, fingerprint)
                return result
            time.sleep(self.settle)
        raise InputError(
            f"the policy files kept changing while they were read ({_STARTUP_ATTEMPTS} attempts)",
            location=str(self.path),
            hint="write policy files to a temporary name and rename them into place",
        )

    async def reload_if_changed(self) -> bool | None:
        """Load changed files in a thread: True when a new set went live, False when it was refused.

        ``None`` when nothing changed since the last attempt, or when the files are still changing (they are
        looked at again at the next poll).
        """
        fingerprint = await asyncio.to_thread(self._read_fingerprint)
        if fingerprint == self._fingerprint:
            return None
        # A writer may be half-way through a file: act only on files that stood still for `settle` seconds.
        await asyncio.sleep(self.settle)
        if await asyncio.to_thread(self._read_fingerprint) != fingerprint:
            _log.debug("policy files are still changing; waiting for them to settle")
            return None
        result = await asyncio.to_thread(self._load_unless_changed, fingerprint)
        if result is None:
            _log.debug("policy files changed while they were loaded; loading them again at the next poll")
            return None
        if isinstance(result, TrtguardError):
            # Remember the refused content: the same broken files are reported once, not on every poll.
            self._fingerprint = fingerprint
            self.last_failure = ReloadFailure(result.diagnostics(), datetime.now(UTC))
            _log.error(
                "policy reload failed; the previous policies stay in force",
                extra={"fields": {"error": result.diagnostics(), "revision": self._revision()}},
            )
            if self._on_reload is not None:
                self._on_reload(self, False)
            return False
        self._swap(result, fingerprint)
        return True

    async def watch(self, interval: float) -> None:
        """Poll every ``interval`` seconds until cancelled.

        Polling (rather than inotify) also sees Kubernetes ConfigMap updates, which swap a symlink. An attempt
        that fails in an unexpected way (a folder removed while it is read, a file name the loader cannot
        handle) is logged and counted as a failed reload, and retried at the next poll: the watch goes on.
        """
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reload_if_changed()
            except Exception as error:  # the watch must outlive any one attempt; the old set stays in force
                self._attempt_failed(error)

    def _attempt_failed(self, error: Exception) -> None:
        message = f"policy reload failed unexpectedly: {type(error).__name__}: {error}"
        # Forget the fingerprint: the next poll loads whatever is there then (the cause may have been passing,
        # or the files put back). The same failure is logged once, not on every poll.
        self._fingerprint = None
        if self.last_failure is None or self.last_failure.message != message:
            _log.error(
                "policy reload failed; the previous policies stay in force",
                exc_info=error,
                extra={"fields": {"error": message, "revision": self._revision()}},
            )
        self.last_failure = ReloadFailure(message, datetime.now(UTC))
        if self._on_reload is not None:
            self._on_reload(self, False)

    def _load_unless_changed(self, fingerprint: str) -> LoadedPolicies | TrtguardError | None:
        """Compiled files or the loader's error (blocking), ``None`` once they differ from ``fingerprint``.

        The loader reads the files once more after ``fingerprint`` was taken: only when they are unchanged
        afterwards is the outcome known to come from those files and no mix of old and new ones. The
        other files a new set reads (allow-lists, keys) are checked against the bytes it read, and the
        fingerprint that :meth:`_swap` keeps covers them from then on.
        """
        try:
            policy_set = load_policy_set(self.path)
            result: LoadedPolicies | TrtguardError = LoadedPolicies(
                policy_set, PolicyEvaluator(policy_set, self.evidence, history=self.history)
            )
        except TrtguardError as error:
            result = error
        if self._read_fingerprint() != fingerprint:
            return None
        if isinstance(result, LoadedPolicies):
            for path, digest in result.policy_set.read_files:
                if _file_digest(path) != digest:
                    return None  # an allow-list or key file changed after the loader read it
        return result

    def _swap(self, loaded: LoadedPolicies, fingerprint: str) -> None:
        previous = self._revision()
        before = self._current.policy_set.read_files if self._current is not None else ()
        self._current = loaded
        # The fingerprint was read with the files the set before read; when the new set reads others, read
        # it again with them (their bytes were checked against the loaded ones just now).
        self._fingerprint = (
            fingerprint if loaded.policy_set.read_files == before else self._read_fingerprint()
        )
        self.last_failure = None
        _log.info(
            "policies loaded",
            extra={
                "fields": {
                    "revision": loaded.revision,
                    "previous_revision": previous,
                    "policies": [p.name for p in loaded.policy_set.policies],
                    "files": len(loaded.policy_set.sources),
                }
            },
        )
        if self._on_reload is not None:
            self._on_reload(self, True)

    def _revision(self) -> str | None:
        return self._current.revision if self._current is not None else None

    def _read_fingerprint(self) -> str:
        """Digest of the files the loader may read, by relative name: every file under ``path`` (or ``path``).

        Each file counts with its size and modification time as well as its content, so that a file rewritten
        with the same content (or changed and changed back) between two readings is seen to have changed.

        That covers the files ``policies.loader.policy_files`` picks (dot-files included) and key files kept
        under the policy folder. Directories whose name starts with a dot are not entered, like the loader
        does: Kubernetes keeps ConfigMap versions in ``..2024_…`` folders and deletes old ones at any time.
        The other files the set in force read are covered as well (:attr:`PolicySet.read_files`: ``allowFrom``
        lists and the key, certificate and Notation files of its signers, read beside the walk, which misses
        one beside a single policy file, outside the folder or in a dot-folder), so that an edited allow-list
        or key goes live, or is refused, like an edited policy.
        """
        if not self.path.exists():
            return "missing"
        digest = hashlib.sha256()
        for name, candidate in self._watched_files():
            try:
                stat = candidate.stat()
                content = candidate.read_bytes()
            except OSError:
                stat, content = None, b"\0unreadable"
            written = f"{stat.st_size}:{stat.st_mtime_ns}" if stat is not None else "-"
            # fsencode: a file name need not be valid UTF-8.
            digest.update(os.fsencode(name) + f"\0{written}\0{len(content)}\0".encode())
            digest.update(content)
        return digest.hexdigest()

    def _watched_files(self) -> list[tuple[str, Path]]:
        read = self._current.policy_set.read_files if self._current is not None else ()
        extra = [(f"\0read\0{path}", path) for path, _ in read]
        if self.path.is_file():
            return [(self.path.name, self.path), *extra]
        found: list[tuple[str, Path]] = extra
        # os.walk skips a folder that vanished while it walks (it reports it to onerror, which is unset).
        for folder, subfolders, files in os.walk(self.path):
            subfolders[:] = [name for name in subfolders if not name.startswith(".")]
            base = Path(folder)
            for name in files:
                candidate = base / name
                found.append((str(candidate.relative_to(self.path)), candidate))
        return sorted(found)


def _file_digest(path: Path) -> str | None:
    """SHA-256 of the file's bytes (None when it cannot be read)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
