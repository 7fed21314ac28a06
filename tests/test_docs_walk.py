"""docs/change-control.md runs as written: its ``sh`` blocks, in order, in one shell, in an empty folder.

The page's commands are copied from it, not retyped here: each fenced ``sh`` block is read from the page and
the blocks run one after another in ``bash -e``, against the registry the page starts (Debian's
``docker-registry`` with the page's own config) and the webhook it starts. Only what the page says the
reader chooses is replaced: the registry's address (``127.0.0.1:5000``) and the webhook's port (``8443``),
by free ones. What the page left running is stopped with its process group. A line that ends in
``# exit N`` must exit with N (the page's denial and refusal); every other command must succeed. Each line of
the page's ``text`` blocks must then be a line of what the commands printed, ``…`` standing for what differs
from run to run (digests, times).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from policies.loader import load_policy_set
from tests.conftest import REPO
from verifier.crypto._keys import generate_private_key

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


def test_the_change_control_page_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("docker-registry") is None:
        pytest.skip("the Debian docker-registry binary is not installed (apt-get install docker-registry)")
    page = PAGE.read_text()
    registry, port = f"127.0.0.1:{_free_port()}", str(_free_port())
    script = _script(page).replace("127.0.0.1:5000", registry).replace("8443", port)
    for step in ("docker-registry serve config.yml", "trtguard serve", "trtguard approve", "audit history"):
        assert step in script, step
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRTGUARD_")} | {"REPO": str(REPO)}
    walk = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the registry and the webhook are in it
    )
    try:
        stdout, _ = walk.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(walk.pid, signal.SIGTERM)  # what a failed step left running
        walk.wait(timeout=30)
    logs = "".join(
        f"\n--- {name} ---\n{(tmp_path / name).read_text()[-3000:]}"
        for name in ("serve.log", "registry.log")
        if (tmp_path / name).exists()
    )
    assert walk.returncode == 0, f"{stdout[-6000:]}{logs}"
    assert (tmp_path / "registry").is_dir()  # the page's config stored the pushes where it says
    printed = stdout.replace(registry, "127.0.0.1:5000").replace(port, "8443").splitlines()
    for expected in _expected_lines(page):
        pattern = re.compile(".*?".join(map(re.escape, expected.split("…"))))
        assert any(pattern.fullmatch(line) for line in printed), f"not printed: {expected}\n{stdout}"


def test_the_registry_config_is_the_three_lines_the_page_describes() -> None:
    """Attack 28 finding 5: the page said `docker-registry serve config.yml` without the config; Debian's
    default asks for htpasswd logins and listens on every interface."""
    script = _script(PAGE.read_text())
    config = script.split("cat > config.yml <<EOF", 1)[1].split("\nEOF\n", 1)[0].splitlines()[1:]
    assert config == [
        "version: 0.1",
        "storage: {filesystem: {rootdirectory: $PWD/registry}}",
        "http: {addr: 127.0.0.1:5000}",
    ]
    assert "/etc/docker/registry/config.yml" not in script


_LIBRARY_COPY = re.compile(r'`(cp "\$REPO"/policies/library/\*\.yaml policies/)`')


def test_the_template_loads_beside_the_starter_library_as_the_page_says(tmp_path: Path) -> None:
    """Attack 28 finding 10j: the page's webhook loads the change-control template alone; the page's warning
    says how to load the starter library beside it (its command, and image-signer among the platform keys)."""
    page = PAGE.read_text()
    found = _LIBRARY_COPY.search(page)
    assert found is not None and "enforces change control and nothing else" in page
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(REPO / "policies" / "templates" / "change-control.yaml", policies)
    pem = {name: generate_private_key().public_key().to_pem().decode() for name in ("b", "i", "a", "o", "c")}
    documents = [
        ("platform", {"build-signer": pem["b"], "image-signer": pem["i"]}),
        ("release-committee", {"alice": pem["a"], "bob": pem["o"], "chen": pem["c"]}),
    ]
    (policies / "keys.yaml").write_text(
        yaml.safe_dump_all(
            {
                "apiVersion": "trtguard.dev/v1alpha1",
                "kind": "TrustedKeys",
                "metadata": {"name": name},
                "spec": {"keys": [{"name": key, "publicKey": text} for key, text in keys.items()]},
            }
            for name, keys in documents
        )
    )
    subprocess.run(["bash", "-ec", found[1]], cwd=tmp_path, env={**os.environ, "REPO": str(REPO)}, check=True)
    names = {policy.name for policy in load_policy_set(policies).policies}
    assert {"change-control", "signed-inference-images", "trusted-tensorrt-images"} <= names, names
