"""trtguard/cli/_commands.py: the table of commands, and where each command lives (issue 26 step 5).

Every command is defined in the module named after it (``push-engine`` in ``trtguard/cli/push_engine.py``),
which registers that command and no other; helpers several commands share are ``_``-prefixed, so every
public module of the command line is a command's.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

import trtguard.cli
from trtguard.cli._commands import COMMANDS

CLI = Path(trtguard.cli.__file__).parent


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_lives_in_the_module_named_after_it(command: str) -> None:
    name = command.replace("-", "_")
    assert COMMANDS[command].module == f"trtguard.cli.{name}"
    assert (CLI / f"{name}.py").is_file() or (CLI / name / "__init__.py").is_file()
    subparsers = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(COMMANDS[command].module).register(subparsers)
    assert set(subparsers.choices) == {command}, f"{COMMANDS[command].module} registers more than {command}"


def test_every_public_module_of_the_command_line_is_a_command() -> None:
    modules = {path.stem for path in CLI.glob("*.py")}
    packages = {path.parent.name for path in CLI.glob("*/__init__.py")}
    public = {name for name in modules | packages if not name.startswith("_")}
    assert public == {command.replace("-", "_") for command in COMMANDS}
