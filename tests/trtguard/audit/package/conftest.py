"""Fixtures of the evidence-package tests: the world (built once for the package) and a segment package."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.trtguard.audit.package.world import World, export_package, make_world
from trtguard.audit.package import Selection


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """A decision log judged by the webhook, its material, and the exporter's key."""
    return make_world(tmp_path_factory.mktemp("evidence"))


@pytest.fixture(scope="package")
def resnet_package(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default (segment) package of every decision about prod/resnet."""
    output = tmp_path_factory.mktemp("packages") / "resnet.tar.gz"
    asyncio.run(export_package(world, Selection.workload("prod/resnet"), output))
    return output
