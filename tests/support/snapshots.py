"""Snapshots: outputs that must not change unnoticed, held against a file in ``tests/data``.

A snapshot test is one line of a table: the command line and its file (``tests/data/9NN-*.json|txt``, listed
in ``tests/data/README.md``), e.g. ``(["audit", "--help"], "911-help-audit.txt")``. When an output changes on
purpose, rewrite the files and review their diff::

    TRTGUARD_UPDATE_SNAPSHOTS=1 .venv/bin/pytest -q tests/trtguard/cli/test_schema.py
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

from tests.conftest import DATA

#: Set (to anything but "" or "0") to rewrite the snapshot files instead of comparing with them.
UPDATE = "TRTGUARD_UPDATE_SNAPSHOTS"
#: The terminal width help text is wrapped at, whatever the terminal running the tests.
COLUMNS = "100"


def cli_output(argv: Sequence[str]) -> str:
    """What ``trtguard ARGV`` prints on standard output (``--help`` included); it must succeed."""
    from trtguard.cli import main  # noqa: PLC0415 - the command line loads only for the tests that use it

    out = io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": COLUMNS}), contextlib.redirect_stdout(out):
        try:
            status = main(list(argv))
        except SystemExit as done:  # argparse ends --help with SystemExit(0)
            status = done.code if isinstance(done.code, int) else 1
    assert status == 0, f"trtguard {' '.join(argv)} exited {status}"
    return out.getvalue()


def assert_snapshot(actual: str, name: str, folder: Path = DATA) -> None:
    """``actual`` is the content of ``tests/data/NAME`` (rewritten instead when UPDATE is set)."""
    path = folder / name
    if os.environ.get(UPDATE, "") not in ("", "0"):
        path.write_text(actual)
        return
    assert path.is_file(), f"no snapshot {path}: write it with {UPDATE}=1"
    expected = path.read_text()
    if actual != expected:
        diff = difflib.unified_diff(expected.splitlines(), actual.splitlines(), str(path), "now", lineterm="")
        shown = "\n".join(list(diff)[:60])
        raise AssertionError(f"{name} changed (if on purpose: {UPDATE}=1, then review the diff):\n{shown}")
