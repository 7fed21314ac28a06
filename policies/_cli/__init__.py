"""Sub-commands of the ``policies`` package (check, policy test, schema)."""

from __future__ import annotations

import argparse

from policies._cli import check, policy, schema

_MODULES = (check, policy, schema)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add every policies sub-command to ``subparsers``."""
    for module in _MODULES:
        module.register(subparsers)
