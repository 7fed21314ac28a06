"""scripts/test_diff_is_mechanical.py: after a codemod move nothing is printed; every other test edit is."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from scripts import relocate
from scripts.test_diff_is_mechanical import main
from tests.scripts.test_relocate import FILES, MAPPING, git

KNOWN = '''\
"""Known violations."""

KNOWN: dict[str, tuple[str, ...]] = {
    "no-cycles": (
        "pkg.core <-> pkg.errors <-> pkg.lazy",
    ),
    "one-public-module": (
        "pkg.core",
        "pkg.errors",
    ),
}
'''


@pytest.fixture
def moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A repository whose stage moved pkg.errors (and renamed PkgError) with the codemod."""
    for path, text in {**FILES, "tests/data/001-x.json": "{}\n", "tests/contracts_known.py": KNOWN}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    (tmp_path / "pyproject.toml").write_text(
        (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    )
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    git(tmp_path, "tag", "base")
    (tmp_path / "docs" / "moves").mkdir(parents=True)
    (tmp_path / "docs" / "moves" / "S9.toml").write_text(MAPPING)
    assert relocate.main([str(tmp_path / "docs" / "moves" / "S9.toml"), "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    return tmp_path


def check(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["base", "--root", str(repo), *args])
    return status, capsys.readouterr().out


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_codemod_move_is_mechanical(moved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(moved, capsys) == (0, "")
    status, out = check(moved, capsys, "--show-renames")
    assert status == 0
    assert "renamed (declared): tests/test_app.py: test_app" in out.splitlines()


def test_a_changed_assertion_is_printed_with_its_diff(
    moved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(moved / "tests" / "pkg" / "base" / "test_errors.py", '== "pkg.base._errors says: x"', '!= ""')
    status, out = check(moved, capsys)
    assert status == 1
    assert "changed: tests/pkg/base/test_errors.py: test_explain\n" in out
    assert "    -    assert explain(BaseError('x')) == 'pkg.base._errors says: x'\n" in out
    assert "    +    assert explain(BaseError('x')) != ''\n" in out


def test_an_undeclared_rename_is_printed(moved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(moved / "tests" / "test_app.py", "def test_app()", "def test_the_app()")
    status, out = check(moved, capsys, "--moves")  # no mapping: the move itself is not mechanical either
    assert status == 1
    assert "removed: tests/test_app.py: test_app" in out
    assert "added: tests/test_app.py: test_the_app" in out


def test_a_function_moved_verbatim_and_reformatted_is_mechanical(
    moved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = moved / "tests" / "test_app.py"
    text = app.read_text()
    start = text.index("def test_app()")
    (moved / "tests" / "test_app_moved.py").write_text(
        '"""moved"""\n\nimport pytest\n\nfrom app.main import HANDLERS, handle\n'
        "from pkg.base import BaseError\nfrom pkg.core import ERRORS_FILE, late, run\n\n\n"
        + text[start:].replace("    ", "  ")
    )
    app.write_text(text[:start])
    status, out = check(moved, capsys)
    assert status == 1
    assert (
        out == "added: tests/test_app_moved.py: (module docstring)\n    'moved'\n"
    )  # a new file's own words


def test_fixtures_and_known_lists(moved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (moved / "tests" / "data" / "001-x.json").write_text('{"changed": true}\n')
    (moved / "tests" / "data" / "002-new.json").write_text("{}\n")
    known = moved / "tests" / "contracts_known.py"
    edit(known, '        "pkg.core",\n', "")  # fixed: its line goes
    edit(known, "pkg.core <-> pkg.base._errors <-> pkg._lazy", "pkg._lazy <-> pkg.base._errors")  # shrank
    edit(known, '        "pkg.base._errors",\n', '        "pkg.base._errors",\n        "pkg.newly_public",\n')
    status, out = check(moved, capsys)
    assert status == 1
    assert out.splitlines() == [
        "fixture changed: M tests/data/001-x.json",
        "fixture changed: A tests/data/002-new.json",
        "tests/contracts_known.py: entry added to 'one-public-module': pkg.newly_public",
    ]


def test_a_base_that_is_not_a_revision_is_a_usage_error(
    moved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["no-such-revision", "--root", str(moved)]) == 2
    assert "no-such-revision" in capsys.readouterr().err
