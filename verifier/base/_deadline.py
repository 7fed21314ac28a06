"""A monotonic deadline passed explicitly down every call that may wait on the network."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


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
