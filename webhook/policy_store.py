"""The policy set in force, reloaded when its files change, swapped atomically.

A reload reads and compiles the new files in a thread and replaces the :class:`LoadedPolicies` reference in
one assignment, so a review sees either the old set or the new one, never a mix. Files that do not load keep
the previous set in force; the failure is logged, kept for ``/readyz`` and counted in a metric.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from policies.evaluator import AdmissionHistory, PolicyEngine
from policies.loader import PolicySet, load_policy_set
from verifier.errors import TrtguardError
from verifier.evidence import EvidenceSource

_log = logging.getLogger(__name__)

ReloadCallback = Callable[["PolicyStore", bool], None]
"""Called as ``callback(store, succeeded)`` after each attempt to load changed files."""


@dataclass(frozen=True, slots=True)
class LoadedPolicies:
    """A policy set and the engine that evaluates it."""

    policy_set: PolicySet
    engine: PolicyEngine
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

    ``history`` (the decision log, for change control) is handed to every engine built from the files.
    """

    def __init__(
        self,
        path: Path,
        evidence: EvidenceSource,
        *,
        history: AdmissionHistory | None = None,
        on_reload: ReloadCallback | None = None,
    ) -> None:
        self.path = path
        self.evidence = evidence
        self.history = history
        self._on_reload = on_reload
        self._current: LoadedPolicies | None = None
        self._fingerprint: str | None = None
        self.last_failure: ReloadFailure | None = None

    @property
    def current(self) -> LoadedPolicies | None:
        """The set in force (``None`` before the first successful load)."""
        return self._current

    def load(self) -> LoadedPolicies:
        """Load the files now (blocking); raises the loader's error and changes nothing when they are bad."""
        fingerprint = self._read_fingerprint()
        loaded = self._compile()
        self._swap(loaded, fingerprint)
        return loaded

    async def reload_if_changed(self) -> bool | None:
        """Load changed files in a thread: True when a new set went live, False when it was refused.

        ``None`` when nothing changed since the last attempt.
        """
        fingerprint = await asyncio.to_thread(self._read_fingerprint)
        if fingerprint == self._fingerprint:
            return None
        try:
            loaded = await asyncio.to_thread(self._compile)
        except TrtguardError as error:
            # Remember the refused content: the same broken files are reported once, not on every poll.
            self._fingerprint = fingerprint
            self.last_failure = ReloadFailure(error.diagnostics(), datetime.now(UTC))
            _log.error(
                "policy reload failed; the previous policies stay in force",
                extra={"fields": {"error": error.diagnostics(), "revision": self._revision()}},
            )
            if self._on_reload is not None:
                self._on_reload(self, False)
            return False
        self._swap(loaded, fingerprint)
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

    def _compile(self) -> LoadedPolicies:
        policy_set = load_policy_set(self.path)
        return LoadedPolicies(policy_set, PolicyEngine(policy_set, self.evidence, history=self.history))

    def _swap(self, loaded: LoadedPolicies, fingerprint: str) -> None:
        previous = self._revision()
        self._current = loaded
        self._fingerprint = fingerprint
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

        That covers the files ``policies.loader.policy_files`` picks (dot-files included) and key files kept
        under the policy folder. Directories whose name starts with a dot are not entered, like the loader
        does: Kubernetes keeps ConfigMap versions in ``..2024_…`` folders and deletes old ones at any time. A
        key file that a ``TrustedKeys`` ``file:`` entry names outside the folder (or beside a single policy
        file) is not covered, because the loaded :class:`PolicySet` does not say which files those are: a
        change to it takes effect with the next change of a policy file, or a restart.
        """
        if not self.path.exists():
            return "missing"
        digest = hashlib.sha256()
        for name, candidate in self._watched_files():
            try:
                content = candidate.read_bytes()
            except OSError:
                content = b"\0unreadable"
            # fsencode: a file name need not be valid UTF-8.
            digest.update(os.fsencode(name) + f"\0{len(content)}\0".encode())
            digest.update(content)
        return digest.hexdigest()

    def _watched_files(self) -> list[tuple[str, Path]]:
        if self.path.is_file():
            return [(self.path.name, self.path)]
        found: list[tuple[str, Path]] = []
        # os.walk skips a folder that vanished while it walks (it reports it to onerror, which is unset).
        for folder, subfolders, files in os.walk(self.path):
            subfolders[:] = [name for name in subfolders if not name.startswith(".")]
            base = Path(folder)
            for name in files:
                candidate = base / name
                found.append((str(candidate.relative_to(self.path)), candidate))
        return sorted(found)
