"""docs/change-control.md runs as written: its ``sh`` blocks, in order, in one shell, in an empty folder.

The page's commands are copied from it, not retyped here: each fenced ``sh`` block is read from the page and
the blocks run one after another in ``bash -e`` against a real registry (Debian's ``docker-registry`` on
127.0.0.1) with the webhook the page starts. Only what the page says the reader chooses is replaced: the
registry's address (``127.0.0.1:5000``) and the webhook's port (``8443``), by free ones. A line that ends in
``# exit N`` must exit with N (the page's denial and refusal); every other command must succeed. Each line of
the page's ``text`` blocks must then be a line of what the commands printed, ``…`` standing for what differs
from run to run (digests, times).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

from tests.conftest import REPO
from tests.support.localregistry import LocalRegistry

PAGE = REPO / "docs" / "change-control.md"
_BLOCK = re.compile(r"^```(sh|text)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_EXPECTED_EXIT = re.compile(r"^(?P<command>.*\S)\s+# exit (?P<status>\d+)\b.*$")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _script(page: str) -> str:
    """The page's sh blocks as one bash script; ``# exit N`` lines checked for exactly that status."""
    lines = ["set -euo pipefail"]
    for kind, body in _BLOCK.findall(page):
        if kind != "sh":
            continue
        for line in body.splitlines():
            found = _EXPECTED_EXIT.match(line)
            if found is None:
                lines.append(line)
                continue
            status = found["status"]
            unexpected = f'echo "expected exit {status}, got $got"'
            lines.append(
                f"if {found['command']}; then got=0; {unexpected}; exit 99; "
                f"else got=$?; test $got -eq {status} || {{ {unexpected}; exit 98; }}; fi"
            )
    return "\n".join(lines) + "\n"


def _expected_lines(page: str) -> list[str]:
    return [
        line for kind, body in _BLOCK.findall(page) if kind == "text" for line in body.splitlines() if line
    ]


def test_the_change_control_page_runs_as_written(registry: LocalRegistry, tmp_path: Path) -> None:
    page = PAGE.read_text()
    port = str(_free_port())
    script = _script(page).replace("127.0.0.1:5000", registry.host).replace("8443", port)
    assert "trtguard serve" in script and "trtguard approve" in script and "audit history" in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRTGUARD_")} | {"REPO": str(REPO)}
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    log = (tmp_path / "serve.log").read_text() if (tmp_path / "serve.log").exists() else ""
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n--- serve.log ---\n{log[-3000:]}"
    printed = result.stdout.replace(registry.host, "127.0.0.1:5000").replace(port, "8443").splitlines()
    for expected in _expected_lines(page):
        pattern = re.compile(".*?".join(map(re.escape, expected.split("…"))))
        assert any(pattern.fullmatch(line) for line in printed), f"not printed: {expected}\n{result.stdout}"
