"""``trtguard policy test DIR``: run policy unit tests (PolicyTest documents)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policies.testing import junit, run_tests
from trtguard.cli._args import add_clock_argument
from trtguard.cli._commands import Subparsers, add_command_group, add_subcommand
from trtguard.cli._output import check_output, write_output


def register(subparsers: Subparsers) -> None:
    """Add ``policy test``."""
    commands = add_command_group(
        subparsers,
        "policy",
    )
    test = add_subcommand(
        commands,
        "test",
        help="run PolicyTest suites (exit 0 all pass, 1 a case failed, 2 a suite could not run)",
    )
    test.add_argument("path", type=Path, metavar="DIR", help="a PolicyTest file or a directory to search")
    test.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML here")
    add_clock_argument(test, judged="the suites that set no `now` of their own")
    test.set_defaults(handler=_test)


def _test(args: argparse.Namespace) -> int:
    if args.junit is not None:
        check_output(args.junit, "the JUnit report")  # before the suites run
    run = run_tests(args.path, now=args.now)
    for case in run.cases:
        mark = "PASS" if case.passed else "FAIL"
        print(f"{mark}  {case.suite}: {case.resource}: {case.detail}")
    for error in run.errors:
        print(f"ERROR {error.diagnostics()}", file=sys.stderr)
    passed = sum(c.passed for c in run.cases)
    print(
        f"{passed}/{len(run.cases)} cases passed"
        + (f", {len(run.errors)} suites failed to run" if run.errors else "")
    )
    if args.junit is not None:
        write_output(args.junit, junit(run).encode(), "the JUnit report")
    return run.exit_code
