"""Shared pytest fixtures: where the public test data lives and where the project's own data files are."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.availability import unavailable

#: Fixtures every test folder may use: real registries, webhooks with their signed demo material, gpg.
pytest_plugins = ("tests.support.registries", "tests.support.webhooks", "tests.support.gpg")

REPO = Path(__file__).resolve().parent.parent


#: Public test data shared by every checkout (see ../shared/fixtures/SOURCES.md); never copied into the repo.
def _shared_fixtures() -> Path:
    """``$TRTGUARD_SHARED_FIXTURES``, else ``../shared/fixtures`` beside the checkout, else /work/shared."""
    configured = os.environ.get("TRTGUARD_SHARED_FIXTURES")
    if configured:
        return Path(configured)
    beside = REPO.parent / "shared" / "fixtures"
    return beside if beside.is_dir() else Path("/work/shared/fixtures")


SHARED_FIXTURES = _shared_fixtures()
#: The project's own numbered data files.
DATA = REPO / "tests" / "data"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """The ``shared/fixtures`` folder; tests that need it are skipped where it is absent (failed in CI)."""
    if not SHARED_FIXTURES.is_dir():
        unavailable(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``: the project's numbered test data files."""
    return DATA


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cycle collector off for the test (what it leaves for the collector shows in ``gc.collect()``)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
