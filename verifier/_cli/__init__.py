"""Sub-commands of the ``verifier`` package (keys, attestations, manifests, engines, registries)."""

from __future__ import annotations

import argparse

from verifier._cli import engine, governance, keys, manifest, registry

_MODULES = (keys, manifest, engine, registry, governance)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add every verifier sub-command to ``subparsers``."""
    for module in _MODULES:
        module.register(subparsers)
