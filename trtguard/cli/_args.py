"""Options that several commands share, declared once."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_evidence_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """``--attestations DIR``, ``--registry`` and ``--registry-config FILE``: where ``purpose`` comes from.

    A folder and the registries are alternatives; :func:`verifier.evidence_choice.evidence_source` refuses
    both together with the same message for every command.
    """
    group = parser.add_argument_group("evidence")
    group.add_argument(
        "--attestations",
        type=Path,
        metavar="DIR",
        help=f"{purpose} from this folder, offline (DSSE attestations, Sigstore bundles, classic cosign "
        "signatures and engine artifact manifests; `trtguard fetch-attestations` fills one: "
        "docs/attestation-folder.md)",
    )
    group.add_argument("--registry", action="store_true", help=f"{purpose} from the registries")
    group.add_argument(
        "--registry-config",
        type=Path,
        metavar="FILE",
        help="registry settings: CA bundles, loopback plain-HTTP hosts, credentials (implies --registry)",
    )


def wants_evidence(args: argparse.Namespace) -> bool:
    """True when the command line named an evidence source (a folder or the registries)."""
    return args.attestations is not None or args.registry or args.registry_config is not None


def add_registry_arguments(parser: argparse._ActionsContainer) -> None:
    """Add ``--registry-config`` and ``--timeout`` (used by every command that writes to a registry)."""
    parser.add_argument(
        "--registry-config",
        type=Path,
        metavar="FILE",
        help="registry settings (CA bundles, credentials, loopback plain HTTP); "
        "default: $TRTGUARD_REGISTRY_CONFIG",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="give up after this many seconds (default: 600)",
    )
