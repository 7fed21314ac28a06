"""The policy set in force, reloaded when its files change, swapped atomically.

A reload reads and compiles the new files in a thread and replaces the :class:`LoadedPolicies` reference in
one assignment, so a review sees either the old set or the new one, never a mix. Files that do not load keep
the previous set in force; the failure is logged, kept for ``/readyz`` and counted in a metric.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
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

        Polling (rather than inotify) also sees Kubernetes ConfigMap updates, which swap a symlink.
        """
        while True:
            await asyncio.sleep(interval)
            await self.reload_if_changed()

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
        """Digest of every file under ``path`` (policies and the key files they name), by relative name."""
        digest = hashlib.sha256()
        if self.path.is_file():
            candidates = [self.path]
        elif self.path.is_dir():
            # Skip dot-directories like the loader does: ConfigMap mounts keep old copies in "..2024_…".
            candidates = sorted(
                p
                for p in self.path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(self.path).parts)
            )
        else:
            return "missing"
        for candidate in candidates:
            try:
                content = candidate.read_bytes()
            except OSError:
                content = b"\0unreadable"
            name = candidate.name if candidate == self.path else str(candidate.relative_to(self.path))
            digest.update(f"{name}\0{len(content)}\0".encode())
            digest.update(content)
        return digest.hexdigest()
