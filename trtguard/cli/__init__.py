"""The ``trtguard`` command line.

Only the module of the command being run is imported (:mod:`trtguard.cli._commands` maps each command to
its module), so ``trtguard --help`` and small commands start without loading the evaluator, CEL, the
registry client or the server.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from trtguard.cli._commands import COMMANDS
from verifier.base import EvidenceUnavailable, TrtguardError

#: What to do when a registry a command needs did not answer (no policy is involved at that point).
COMMAND_UNAVAILABLE_HINT = (
    "the registry is down, slow, rate-limiting or not reachable from here: run the command again later, "
    "or check the address, the network and --registry-config"
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, complete for ``command``; the other commands are listed only (all of them when
    ``command`` is None, as for ``trtguard --help``). A command's module registers that command alone.
    """
    parser = argparse.ArgumentParser(
        prog="trtguard",
        description="Auditable, enforceable TensorRT inference on Kubernetes.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, entry in COMMANDS.items():
        if name == command:
            importlib.import_module(entry.module).register(subparsers)
        else:
            subparsers.add_parser(name, help=entry.help, add_help=False)
    return parser


class _VersionAction(argparse._VersionAction):
    """``--version``, the version looked up when it is asked for: reading the installed distributions (and
    importing :mod:`importlib.metadata`) cost every command some 20-50 ms of its start."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        self.version = f"trtguard {_version()}"
        super().__call__(parser, *args, **kwargs)


def _version() -> str:
    """The installed distribution's version (the checkout's, for an editable install)."""
    import importlib.metadata  # noqa: PLC0415 - only for --version

    try:
        return importlib.metadata.version("trtguard")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed: pip install -e .)"


def _command(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (the first word that is not an option), if it is one."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (without the program name) parsed by the parser of the command it names."""
    return build_parser(_command(argv)).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (0 ok, 1 denied or failed check, 2 usage or input error)."""
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        status: int = args.handler(args)
    except TrtguardError as error:
        if isinstance(error, EvidenceUnavailable) and error.transient:
            # The registry client's hint is for a policy rule that could not be checked ("the policy's
            # onError decides"); a command that stops here judges nothing.
            error.hint = COMMAND_UNAVAILABLE_HINT
        print(f"trtguard: error: {error.diagnostics()}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    return status
