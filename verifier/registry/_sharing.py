"""What registry reads share: identical requests in flight made once, and verified content kept.

Both are keyed by registry and repository besides what is asked (a tag, a digest), so that nothing is
shared between repositories: the same digest in another repository is another question (that repository
may not hold it, and its signature tags are its own), and an answer for one must not stand in for the other.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from verifier.base import Deadline, EvidenceUnavailable, SingleFlight
from verifier.registry._oci import Manifest

__all__ = ["ContentStore", "SharedFlights"]

T = TypeVar("T")


class ContentStore:
    """Verified manifests and blobs by (registry, repository, digest), least recently used out first.

    Content-addressed, so an entry can never go stale; only content whose bytes hashed to the key's digest
    is put here.
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._used = 0
        self._items: OrderedDict[tuple[str, str, str], bytes | Manifest] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple[str, str, str]) -> bytes | Manifest | None:
        """The item kept under (registry, repository, digest), or None."""
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
            self.hits += 1
        return item

    def put(self, key: tuple[str, str, str], item: bytes | Manifest) -> None:
        """Keep ``item`` unless it is above an eighth of the budget or already kept."""
        size = len(item.data) if isinstance(item, Manifest) else len(item)
        if size > self._budget // 8 or key in self._items:
            return
        self._items[key] = item
        self._used += size
        while self._used > self._budget:
            _, old = self._items.popitem(last=False)
            self._used -= len(old.data) if isinstance(old, Manifest) else len(old)


class _SharedDeadline(Deadline):
    """The deadline of a request several callers wait for: the latest of theirs, moved on as callers join.

    Every other :class:`Deadline` is fixed; only :class:`SharedFlights` moves this one.
    """

    __slots__ = ()

    def extend_to(self, other: Deadline) -> None:
        """Move the deadline to ``other``'s when that is later."""
        if other.expires_at > self.expires_at:
            object.__setattr__(self, "expires_at", other.expires_at)  # frozen for everyone else


class SharedFlights:
    """Identical concurrent requests made once, under the latest deadline of the callers waiting for them."""

    def __init__(self) -> None:
        self._flights: SingleFlight[tuple[str, ...], Any] = SingleFlight()
        self._deadlines: dict[tuple[str, ...], _SharedDeadline] = {}

    @property
    def coalesced(self) -> int:
        """How many callers joined a request already in flight."""
        return self._flights.coalesced

    async def run(
        self,
        key: tuple[str, ...],
        deadline: Deadline,
        what: str,
        host: str,
        compute: Callable[[Deadline], Awaitable[T]],
    ) -> T:
        """Run ``compute`` once for identical concurrent callers; each waits no longer than its deadline.

        ``key`` must name the registry and the repository. The shared computation runs under the latest
        deadline of the callers that joined it (moved on as they join), not the first caller's: a caller
        with little time left must not cut short the answer that callers with more time are waiting for.
        """
        shared = self._deadlines.get(key)
        if shared is None:
            shared = _SharedDeadline(deadline.expires_at)
            # Kept exactly as long as the flight runs: no await between here and the flight's start, and the
            # entry goes in the flight's own last step.
            self._deadlines[key] = shared
        else:
            shared.extend_to(deadline)

        async def run_shared() -> T:
            try:
                return await compute(shared)
            finally:
                self._deadlines.pop(key, None)

        started, left = time.monotonic(), deadline.remaining()
        try:
            # asyncio.timeout takes None for "no limit" (a deadline of Deadline.never()).
            async with asyncio.timeout(None if math.isinf(left) else left):
                result: T = await self._flights.run(key, run_shared)
                return result
        except TimeoutError:
            raise EvidenceUnavailable(
                f"{what}: {host} gave no complete answer within the "
                f"{time.monotonic() - started:.1f} s left of the deadline",
                transient=True,
                location=f"registry {host}",
                hint="the registry is slow or unreachable; the policy's onError decides what happens",
            ) from None
