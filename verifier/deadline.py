"""A monotonic deadline passed explicitly down every call that may wait on the network."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from verifier.errors import EvidenceUnavailable


@dataclass(frozen=True, slots=True)
class Deadline:
    """The instant (``time.monotonic()`` clock) by which an operation must have finished."""

    expires_at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """A deadline ``seconds`` from now."""
        return cls(time.monotonic() + seconds)

    @classmethod
    def never(cls) -> Deadline:
        """No deadline, for offline command-line use."""
        return cls(math.inf)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.expires_at - time.monotonic())

    @property
    def expired(self) -> bool:
        """True once the deadline has passed."""
        return time.monotonic() >= self.expires_at

    def timeout(self, cap: float) -> float:
        """A per-call timeout: ``cap`` seconds, or less when the deadline is nearer.

        Raises :class:`EvidenceUnavailable` (transient) when no time is left, so that callers never start a
        network call they cannot finish.
        """
        left = self.remaining()
        if left <= 0:
            raise EvidenceUnavailable("ran out of time before the call could start", transient=True)
        return min(cap, left)
