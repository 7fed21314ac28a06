"""``trtguard fetch-attestations``: copy a workload's signatures and attestations from registries into a
folder for offline checks (docs/attestation-folder.md)."""

from __future__ import annotations

from pathlib import Path

from trtguard.cli._commands import Subparsers, add_command
from trtguard.cli._fetch import fetch, registry_arguments


def register(subparsers: Subparsers) -> None:
    """Add ``fetch-attestations``; what it does is in :mod:`trtguard.cli._fetch`."""
    parser = add_command(
        subparsers,
        "fetch-attestations",
        description="Copy the signatures, attestations and engine artifact manifests of every image and "
        "engine of the workloads in FILE|DIR|- from their registries into DIR, a folder that `trtguard check "
        "--attestations DIR` reads where no registry can be reached (docs/attestation-folder.md). Nothing is "
        "verified here; check does that, as it would against the registries. Name images by digest: a folder "
        "cannot resolve tags.",
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE|DIR|-", help="YAML/JSON manifests; - reads stdin")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="the folder to fill")
    parser.add_argument("--force", action="store_true", help="empty DIR first when it holds files")
    registry_arguments(parser, timeout=120.0)
    parser.set_defaults(handler=fetch)
