"""trtguard/cli/__init__.py: the top-level command line (issue 28 item 2: ``trtguard --version``)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

TRTGUARD = Path(sys.executable).with_name("trtguard")


def test_version_prints_the_installed_version() -> None:
    result = subprocess.run(
        [str(TRTGUARD), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"trtguard {importlib.metadata.version('trtguard')}\n"
