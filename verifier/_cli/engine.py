"""PLACEHOLDER: replaced by the module's owner (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's sub-commands (none yet)."""
