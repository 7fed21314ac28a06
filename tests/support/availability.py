"""What a test does when something it needs is not on this machine: skip, or fail under `.ci/run`.

`.ci/run` sets ``TRTGUARD_CI=1``: there every service, tool and data folder the tests use is installed or
present, so a missing one is a broken setup, not a reason to skip a security test.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skip the test with ``reason``; fail it instead under `.ci/run` (``TRTGUARD_CI``)."""
    if os.environ.get("TRTGUARD_CI"):
        pytest.fail(f"{reason} (required under .ci/run)")
    pytest.skip(reason)
