"""An async cache of verification results, with single-flight coalescing of identical computations.

The admission path verifies the same digest over and over (one Deployment update fans out into many
AdmissionReviews), so results are cached under a key the caller chooses (the evaluator uses digest, policy
revision and key set). The rules:

* a returned value is kept for ``ttl`` seconds, and never past the moment it stops being true: a caller that
  judges at an evaluation clock (``now``, e.g. ``--now``) passes it with each call, and a value's
  ``valid_until`` (a certificate's notAfter, a signature's expiry) ends its entry on that clock; an entry
  answers only for evaluation times from the one it was computed at up to ``ttl`` (``negative_ttl``) after;
* a *definitive* failure (a :class:`~verifier.base.VerificationError`, an
  :class:`~verifier.base.EvidenceUnavailable` with ``transient=False``, or a value the caller's
  ``is_failure`` predicate marks) is kept for the much shorter ``negative_ttl``;
* a transient failure is never kept, so the next request asks the registry again;
* concurrent identical computations run once (:class:`SingleFlight`): the other callers wait for the first
  one's result instead of each asking the registry. That result is what the first caller's ``compute``
  produces, under whatever deadline it closed over; callers bound their own wait (``asyncio.timeout``).

A failure is raised to each caller as an exception object of its own (equal in type and content), never one
object shared between tasks, whose traceback and context every ``raise`` would rewrite.

Only the outcome of a computation is cached; callers still run every non-network check on a hit.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, cast

from verifier.base._errors import EvidenceUnavailable, VerificationError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """Runs at most one computation per key at a time; concurrent callers of the same key share it.

    The computation is the ``compute`` of the caller that started it, with whatever that closed over: when
    callers' deadlines differ, give it one that outlasts the first caller's (the registry client moves it to
    the latest deadline of the callers that join), or a caller with little time left cuts short the answer
    the others wait for. It runs in its own task, so a caller that gives up (cancelled, or out of time) does
    not cancel it for the others. ``run`` itself waits as long as the computation takes: each caller bounds
    its own wait (``asyncio.timeout``). It returns what the computation returned, or raises a copy of what
    it raised.
    """

    def __init__(self) -> None:
        self._flights: dict[K, asyncio.Future[V]] = {}
        #: How many callers joined a computation that was already running (for metrics and tests).
        self.coalesced = 0

    def in_flight(self) -> int:
        """Number of computations running now."""
        return len(self._flights)

    async def run(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        """Return ``await compute()``, sharing one running computation among concurrent callers of ``key``."""
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._drive(key, compute))
            self._flights[key] = flight
            # Retrieve the exception even when every waiter has gone: none is reported "never retrieved".
            flight.add_done_callback(_consume)
        else:
            self.coalesced += 1
        try:
            # shield: a waiter that is cancelled leaves; the computation goes on for the others.
            return await asyncio.shield(flight)
        except Exception as error:  # the computation's failure (a waiter's own cancellation is not caught)
            raise _fresh(error) from error.__cause__

    async def _drive(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        try:
            return await compute()
        finally:
            self._flights.pop(key, None)


def _fresh(error: Exception) -> Exception:
    """A new exception object equal to ``error`` (class, arguments, attributes), without its traceback.

    Built without calling ``__init__``, whose signature differs between error classes.
    """
    clone: Exception = type(error).__new__(type(error), *error.args)
    clone.__dict__.update(vars(error))
    return clone


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def is_definitive(error: BaseException) -> bool:
    """True for failures that say something about the artifact and may be cached for ``negative_ttl``.

    A failed verification (wrong key, no signature, claim not met) is definitive; evidence that could not be
    fetched is definitive only when the source said so (``transient=False``). Anything else — a bug, a
    cancellation, a timeout — is not.
    """
    if isinstance(error, EvidenceUnavailable):
        return not error.transient
    return isinstance(error, VerificationError)


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters since the cache was made."""

    hits: int
    negative_hits: int
    misses: int
    coalesced: int
    entries: int


@dataclass(slots=True)
class _Entry(Generic[V]):
    expires_at: float
    value: V | None
    error: Exception | None
    #: The evaluation times the entry answers for, [since, until) (None: no evaluation clock was given).
    since: datetime | None = None
    until: datetime | None = None

    def answers_at(self, now: datetime | None) -> bool:
        if now is None or self.since is None:
            return True
        return self.since <= now and (self.until is None or now < self.until)


class ResultCache(Generic[K, V]):
    """A TTL cache of computed results with negative caching of definitive failures and single-flight.

    ``ttl`` and ``negative_ttl`` are seconds (``negative_ttl=0`` turns negative caching off); ``max_entries``
    bounds memory (least recently used entries go first); ``is_failure`` marks returned values that are
    definitive failures (for callers that return a verdict instead of raising); ``valid_until`` says when a
    returned value stops being true (None: only the TTL ends it), on the evaluation clock that callers
    pass as ``now``; ``clock`` (monotonic seconds) is injectable for tests.
    """

    def __init__(
        self,
        *,
        ttl: float,
        negative_ttl: float,
        max_entries: int = 10_000,
        is_failure: Callable[[V], bool] | None = None,
        valid_until: Callable[[V], datetime | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl < 0 or negative_ttl < 0 or max_entries < 1:
            raise ValueError("ttl and negative_ttl must be >= 0 and max_entries >= 1")
        self._ttl = ttl
        self._negative_ttl = negative_ttl
        self._max_entries = max_entries
        self._is_failure = is_failure
        self._valid_until = valid_until
        self._clock = clock
        self._entries: OrderedDict[K, _Entry[V]] = OrderedDict()
        self._flight: SingleFlight[K, V] = SingleFlight()
        self._hits = 0
        self._negative_hits = 0
        self._misses = 0

    @property
    def stats(self) -> CacheStats:
        """Hit, miss and coalescing counters."""
        return CacheStats(
            hits=self._hits,
            negative_hits=self._negative_hits,
            misses=self._misses,
            coalesced=self._flight.coalesced,
            entries=len(self._entries),
        )

    async def get_or_compute(
        self, key: K, compute: Callable[[], Awaitable[V]], *, now: datetime | None = None
    ) -> V:
        """Return the cached outcome for ``key`` or compute it (once, however many callers ask at once).

        ``now`` is the evaluation time the answer is for: an entry computed for another time answers only
        while it holds (see the class docstring). A cached definitive failure is raised again (a copy of
        it); a cached value is returned as is.
        """
        entry = self._lookup(key, now)
        if entry is not None:
            if entry.error is not None:
                self._negative_hits += 1
                raise _fresh(entry.error) from entry.error.__cause__
            self._hits += 1
            return cast(V, entry.value)  # a positive entry always holds a value
        self._misses += 1
        # Concurrent callers share one computation, made for the first one's time (they ask at once).
        return await self._flight.run(key, lambda: self._compute_and_store(key, compute, now))

    def invalidate(self, key: K) -> None:
        """Forget ``key``."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget everything (for example when the trust material changes)."""
        self._entries.clear()

    def _lookup(self, key: K, now: datetime | None) -> _Entry[V] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._clock() >= entry.expires_at or not entry.answers_at(now):
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry

    async def _compute_and_store(
        self, key: K, compute: Callable[[], Awaitable[V]], now: datetime | None
    ) -> V:
        # A caller that waited for the flight of an identical key may find the result already stored.
        entry = self._lookup(key, now)
        if entry is not None:
            if entry.error is not None:
                raise _fresh(entry.error) from entry.error.__cause__
            return cast(V, entry.value)
        try:
            value = await compute()
        except Exception as error:
            if is_definitive(error) and self._negative_ttl > 0:
                self._store(key, self._entry(self._negative_ttl, None, error, now, None))
            raise
        failed = self._is_failure is not None and self._is_failure(value)
        ttl = self._negative_ttl if failed else self._ttl
        if ttl > 0:
            until = self._valid_until(value) if self._valid_until is not None and not failed else None
            self._store(key, self._entry(ttl, value, None, now, until))
        return value

    def _entry(
        self,
        ttl: float,
        value: V | None,
        error: Exception | None,
        now: datetime | None,
        until: datetime | None,
    ) -> _Entry[V]:
        """An entry kept ``ttl`` seconds that answers for ``[now, min(now + ttl, until))`` on the clock."""
        if now is not None:
            end = now + timedelta(seconds=ttl)
            until = end if until is None else min(until, end)
        return _Entry(self._clock() + ttl, value, error, now, until)

    def _store(self, key: K, entry: _Entry[V]) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
