"""Sub-commands of the ``verifier`` package (keys, attestations, manifests, engines, registries, verify)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add every verifier sub-command to ``subparsers``.

    The command modules are imported here rather than with the package, so that importing one of them alone
    (``from verifier._cli import engine``, as the GPU tests and benchmarks do) loads only what it needs.
    """
    from verifier._cli import engine, governance, keys, manifest, registry, verify  # noqa: PLC0415

    for module in (keys, manifest, engine, registry, governance, verify):
        module.register(subparsers)
