"""trtguard/cli/__init__.py: the top-level command line (issue 28 item 2: ``trtguard --version``)."""

from __future__ import annotations

import importlib.metadata
import socket
import subprocess
import sys
from pathlib import Path

from trtguard.cli import COMMAND_UNAVAILABLE_HINT

TRTGUARD = Path(sys.executable).with_name("trtguard")


def test_version_prints_the_installed_version() -> None:
    result = subprocess.run(
        [str(TRTGUARD), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"trtguard {importlib.metadata.version('trtguard')}\n"


def test_the_parser_reads_the_version_only_for_version() -> None:
    """Reading the installed distributions (and importing importlib.metadata) cost every command's start
    (those whose models pydantic builds import it anyway, for its plugins)."""
    probe = (
        "import sys\nfrom trtguard.cli import build_parser\nbuild_parser(None)\n"
        "print('importlib.metadata' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout == "False\n"


def test_a_registry_that_does_not_answer_gets_a_hint_for_the_command(tmp_path: Path) -> None:
    """Attack 28 finding 6d: `trtguard digest` offline said "the policy's onError decides what happens",
    though no policy is involved in a command that stops there."""
    with socket.socket() as probe:  # bound, never listening: every connection is refused
        probe.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{probe.getsockname()[1]}"
        config = tmp_path / "registries.yaml"
        config.write_text(f'registries:\n  "{host}": {{plain_http: true, retry: {{attempts: 1}}}}\n')
        result = subprocess.run(
            [str(TRTGUARD), "digest", f"{host}/models/resnet:v1", "--registry-config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1, result.stderr
    assert "onError" not in result.stderr and "policy" not in result.stderr
    assert result.stderr.endswith(f"  hint: {COMMAND_UNAVAILABLE_HINT}\n"), result.stderr
