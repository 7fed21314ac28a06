"""Options that several commands share, declared once."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from verifier.base import InputError


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


def _rfc3339(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time (2025-06-01T12:00:00Z)") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (end it in Z or +HH:MM)")
    return moment


def add_clock_argument(parser: argparse._ActionsContainer, *, judged: str | None = None) -> None:
    """``--now RFC3339``: the time the command judges at, for audits and tests (read it with :func:`clock`).

    ``judged`` says what depends on the time in this command (certificate validity, expiry, ``maxAge``);
    None for a command whose verdict does not depend on it, which takes the option all the same, so that an
    audit can pass one ``--now`` to every command. The webhook always uses the real clock.
    """
    effect = (
        f"judge {judged} as at this time"
        if judged is not None
        else "accepted for uniformity: this command's verdict does not depend on the clock"
    )
    parser.add_argument(
        "--now",
        type=_rfc3339,
        metavar="RFC3339",
        help=f"{effect} (for audits and tests, to reproduce a verdict later; default: the real clock)",
    )


def clock(args: argparse.Namespace) -> Callable[[], datetime]:
    """The clock ``--now`` gives (a fixed time), else the real one."""
    now: datetime | None = getattr(args, "now", None)
    if now is not None:
        return lambda: now
    return lambda: datetime.now(UTC)


def add_requester_arguments(parser: argparse.ArgumentParser, user_help: str) -> None:
    """``--as USER`` and ``--as-group GROUP`` (repeatable), as kubectl's impersonation options: who sends the
    resources (``user_help`` says what the command makes of it). Read them with :func:`impersonation`."""
    parser.add_argument("--as", dest="as_user", metavar="USER", help=user_help)
    parser.add_argument(
        "--as-group",
        action="append",
        default=[],
        metavar="GROUP",
        help="a group of the --as user (repeatable); system:authenticated is added as the API server does",
    )


def impersonation(args: argparse.Namespace) -> tuple[str, tuple[str, ...]] | None:
    """The user and groups ``--as`` and ``--as-group`` name (for ``Requester.impersonated``); None without
    ``--as``. Raises :class:`InputError` for ``--as-group`` without ``--as``."""
    if args.as_group and not args.as_user:
        raise InputError("--as-group needs --as", hint="name the user: --as USER --as-group GROUP")
    return (args.as_user, tuple(args.as_group)) if args.as_user else None
