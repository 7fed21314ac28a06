"""``trtguard schema manifest|policy|decision``: print the JSON Schemas of the documents trtguard reads and
writes (the decision record's is that of docs/decision-log.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trtguard.cli._commands import Subparsers, add_command


def register(subparsers: Subparsers) -> None:
    """Add ``schema``."""
    parser = add_command(
        subparsers,
        "schema",
    )
    parser.add_argument(
        "which",
        choices=("manifest", "policy", "decision"),
        help="which document's schema: the build manifest, a policy document, or a decision-log record",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # Each schema module is imported only when asked for: the decision log's package loads its stores.
    schema: dict[str, Any]
    if args.which == "manifest":
        from verifier.manifest import manifest_json_schema  # noqa: PLC0415

        schema = manifest_json_schema()
    elif args.which == "policy":
        from policies.schema import policy_json_schema  # noqa: PLC0415

        schema = policy_json_schema()
    else:
        from decisionlog import decision_json_schema  # noqa: PLC0415

        schema = decision_json_schema()
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return 0
