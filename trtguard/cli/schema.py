"""``trtguard schema manifest|policy``: print the JSON Schemas of the documents trtguard reads."""

from __future__ import annotations

import argparse
import json
import sys

from policies.schema import policy_json_schema
from trtguard.cli._commands import Subparsers, add_command
from verifier.manifest import manifest_json_schema


def register(subparsers: Subparsers) -> None:
    """Add ``schema``."""
    parser = add_command(
        subparsers,
        "schema",
    )
    parser.add_argument("which", choices=("manifest", "policy"), help="which document's schema")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    schema = manifest_json_schema() if args.which == "manifest" else policy_json_schema()
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return 0
