"""The ``trtguard`` command line: one entry point in front of the three packages.

Each package contributes its own sub-commands through a ``register(subparsers)`` function, so that this
module only assembles them (and ``webhook`` stays the only package that knows all three).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from policies import _cli as policies_cli
from verifier import _cli as verifier_cli
from verifier.errors import TrtguardError
from webhook._cli import audit, evidence, serve

_WEBHOOK_COMMANDS = (serve, audit, evidence)


def build_parser() -> argparse.ArgumentParser:
    """The complete argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="trtguard",
        description="Auditable, enforceable TensorRT inference on Kubernetes.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    verifier_cli.register(subparsers)
    policies_cli.register(subparsers)
    for module in _WEBHOOK_COMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (0 ok, 1 denied or failed check, 2 usage or input error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except TrtguardError as error:
        print(f"trtguard: error: {error.diagnostics()}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
