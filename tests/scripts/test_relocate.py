"""scripts/relocate.py: a real move in a temporary git repository, which then passes its tests and ruff.

The small project has what the real one has: a module imported at the top and inside functions (with
``# noqa``), by plain import with attribute chains and as a module object, a lazy front door, a package
whose modules move with it, strings naming modules (``mock.patch`` targets, ``module:function``), a path
spelled from the root, Markdown with relative links, tests that mirror the modules.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scripts.relocate import main

REPO = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"

FILES = {
    "pkg/__init__.py": '"""A small package."""\n',
    "pkg/errors.py": '''\
        """Errors of the small package."""

        from __future__ import annotations


        class PkgError(Exception):
            """Something went wrong."""


        def explain(error: PkgError) -> str:
            """What went wrong, in words."""
            return f"pkg.errors says: {error}"
        ''',
    "pkg/core.py": '''\
        """The core: raises :class:`pkg.errors.PkgError`."""

        from __future__ import annotations

        from pathlib import Path

        from pkg.errors import PkgError, explain

        #: A path spelled from the root.
        ERRORS_FILE = Path(__file__).resolve().parent.parent / "pkg" / "errors.py"


        def run(fail: bool) -> str:
            """Fail, or say so."""
            if fail:
                raise PkgError("boom")
            return explain(PkgError("fine"))


        def late() -> type[Exception]:
            """The error class, imported when asked for."""
            from pkg.errors import PkgError as Late  # noqa: PLC0415 - on purpose

            return Late
        ''',
    "pkg/lazy/__init__.py": '''\
        """A lazy front door."""

        from __future__ import annotations

        import importlib
        from typing import TYPE_CHECKING, Any

        if TYPE_CHECKING:
            from pkg.lazy.impl import helper

        #: Where each public name lives.
        _HOMES: dict[str, str] = {"helper": "pkg.lazy.impl"}

        __all__ = ["helper"]


        def __getattr__(name: str) -> Any:
            home = _HOMES.get(name)
            if home is None:
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(home), name)
            globals()[name] = value
            return value
        ''',
    "pkg/lazy/impl.py": '''\
        """The work behind the lazy front door."""

        from __future__ import annotations

        from pkg import errors


        def helper() -> str:
            """Explain an error of the package."""
            return errors.explain(errors.PkgError("help"))
        ''',
    "pkg/lazy/NOTES.md": "The work is in [impl](impl.py); errors in [errors](../errors.py).\n",
    "app/__init__.py": "",
    "app/main.py": '''\
        """The app, which uses the package."""

        from __future__ import annotations

        import pkg.errors
        from pkg.errors import PkgError
        from pkg.lazy import helper

        #: Handlers, by module and function name.
        HANDLERS = {"explain": "pkg.errors:explain"}


        def handle() -> str:
            """Handle one error."""
            try:
                raise PkgError("x")
            except pkg.errors.PkgError as error:
                return pkg.errors.explain(error) + " / " + helper()
        ''',
    "tests/__init__.py": "",
    "tests/pkg/__init__.py": "",
    "tests/pkg/test_errors.py": '''\
        """pkg/errors.py: the error and its words."""

        from __future__ import annotations

        from unittest import mock

        from app.main import handle
        from pkg.errors import PkgError, explain


        def test_explain() -> None:
            assert explain(PkgError("x")) == "pkg.errors says: x"


        def test_patched() -> None:
            with mock.patch("pkg.errors.explain", return_value="patched"):
                assert handle().startswith("patched / ")
        ''',
    "tests/test_app.py": '''\
        """app/main.py and pkg/core.py."""

        from __future__ import annotations

        import pytest

        from app.main import HANDLERS, handle
        from pkg.core import ERRORS_FILE, late, run
        from pkg.errors import PkgError


        def test_app() -> None:
            assert handle() == "pkg.errors says: x / pkg.errors says: help"
            assert HANDLERS == {"explain": "pkg.errors:explain"}
            assert ERRORS_FILE.is_file()
            assert late() is PkgError
            with pytest.raises(PkgError):
                run(True)
        ''',
    "docs/guide.md": (
        "See [the errors](../pkg/errors.py), `pkg.errors.explain` and tests/pkg/test_errors.py.\n"
    ),
}

MAPPING = """\
[[front]]
module = "pkg.base"
doc = "The base of the small package: its errors."

[[move]]
old = "pkg.errors"
new = "pkg.base._errors"
front = "pkg.base"

[[move]]
old = "pkg.lazy"
new = "pkg._lazy"

[[move]]
old = "pkg.lazy.impl"
new = "pkg._lazy._impl"
front = "pkg._lazy"

[[rename]]
module = "pkg.base._errors"
old = "PkgError"
new = "BaseError"
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, env=env
    ).stdout


def run(repo: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, check=False, env=env)


def relocate(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main([str(repo / "moves.toml"), "--root", str(repo), *args])
    return status, capsys.readouterr().out


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for path, text in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    (tmp_path / "moves.toml").write_text(MAPPING)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "before")
    return tmp_path


def check_project(repo: Path) -> None:
    """The project's tests pass, and ruff finds nothing."""
    tests = run(repo, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    lint = run(repo, str(RUFF), "check", ".")
    assert lint.returncode == 0, lint.stdout
    formatted = run(repo, str(RUFF), "format", "--check", ".")
    assert formatted.returncode == 0, formatted.stdout


def test_the_small_project_is_clean_before(repo: Path) -> None:
    check_project(repo)


def test_a_move_rewrites_every_reference(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = relocate(repo, capsys)
    assert status == 0, out
    assert "moves 5 files (1 of tests), creates 4" in out
    assert "tests/pkg/base/test_errors.py:8: from pkg.base._errors import PkgError, explain  →" in out
    check_project(repo)
    status_lines = git(repo, "status", "--porcelain").splitlines()
    assert "RM pkg/errors.py -> pkg/base/_errors.py" in status_lines  # renamed, then rewritten
    assert "RM tests/pkg/test_errors.py -> tests/pkg/base/test_errors.py" in status_lines
    assert not (repo / "pkg" / "lazy").exists()

    main_py = (repo / "app" / "main.py").read_text()
    assert (
        "import pkg.base._errors\nfrom pkg._lazy import helper\nfrom pkg.base import BaseError\n" in main_py
    )
    assert "except pkg.base._errors.BaseError as error:" in main_py
    assert '"pkg.base._errors:explain"' in main_py
    core = (repo / "pkg" / "core.py").read_text()
    assert 'parent.parent / "pkg" / "base" / "_errors.py"' in core
    assert "from pkg.base import BaseError as Late  # noqa: PLC0415 - on purpose" in core
    impl = (repo / "pkg" / "_lazy" / "_impl.py").read_text()
    assert "from pkg.base import _errors as errors" in impl and "errors.BaseError" in impl
    test = (repo / "tests" / "pkg" / "base" / "test_errors.py").read_text()
    assert 'mock.patch("pkg.base._errors.explain"' in test
    assert (repo / "pkg" / "_lazy" / "NOTES.md").read_text() == (
        "The work is in [impl](_impl.py); errors in [errors](../base/_errors.py).\n"
    )
    assert (repo / "docs" / "guide.md").read_text() == (
        "See [the errors](../pkg/base/_errors.py), `pkg.base._errors.explain` and "
        "tests/pkg/base/test_errors.py.\n"
    )
    front = (repo / "pkg" / "base" / "__init__.py").read_text()
    assert front == (
        '"""The base of the small package: its errors."""\n\nimport lazy_loader\n\n'
        "__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)\n"
    )
    stub = (repo / "pkg" / "base" / "__init__.pyi").read_text()  # what app/ and pkg/core.py import
    assert stub == "from ._errors import BaseError as BaseError, explain as explain\n"
    lazy = (repo / "pkg" / "_lazy" / "__init__.py").read_text()  # the old form becomes a stub door
    assert lazy.startswith('"""A lazy front door."""\n\nimport lazy_loader\n') and "_HOMES" not in lazy
    assert (repo / "pkg" / "_lazy" / "__init__.pyi").read_text() == "from ._impl import helper as helper\n"
    probe = "import sys, pkg.base; assert 'pkg.base._errors' not in sys.modules; print(pkg.base.BaseError)"
    assert run(repo, sys.executable, "-c", probe).stdout == "<class 'pkg.base._errors.BaseError'>\n"


def test_a_second_run_changes_nothing_and_the_check_finds_nothing(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert relocate(repo, capsys)[0] == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "after")
    status, out = relocate(repo, capsys)
    assert status == 0, out
    assert "moves 0 files (0 of tests), creates 0\nrewrites 0 references in 0 files" in out
    assert git(repo, "status", "--porcelain") == ""
    assert relocate(repo, capsys, "--check") == (0, "")


def test_after_a_merge_what_is_new_moves_and_is_rewritten(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert relocate(repo, capsys)[0] == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "after")
    # what a branch begun before the move brings: a new importer of the old names, a module in the old folder
    (repo / "app" / "late.py").write_text(
        '"""Added on a branch."""\n\nfrom pkg.errors import PkgError\nfrom pkg.lazy.extra import EXTRA\n\n'
        "ERRORS = (PkgError, EXTRA)\n"
    )
    (repo / "pkg" / "lazy").mkdir()
    (repo / "pkg" / "lazy" / "extra.py").write_text('"""Added on a branch."""\n\nEXTRA = 1\n')
    status, out = relocate(repo, capsys)
    assert status == 0, out
    assert (repo / "app" / "late.py").read_text() == (
        '"""Added on a branch."""\n\nfrom pkg._lazy.extra import EXTRA\nfrom pkg.base import BaseError\n\n'
        "ERRORS = (BaseError, EXTRA)\n"
    )
    assert (repo / "pkg" / "_lazy" / "extra.py").is_file() and not (repo / "pkg" / "lazy").exists()
    check_project(repo)


def test_a_dry_run_writes_nothing_and_the_check_lists_old_names(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = relocate(repo, capsys, "--dry-run")
    assert status == 0
    assert "  pkg/errors.py → pkg/base/_errors.py" in out
    assert git(repo, "status", "--porcelain") == ""
    status, out = relocate(repo, capsys, "--check")
    assert status == 1
    assert "  app/main.py:5: pkg.errors" in out
    assert "  docs/guide.md:1: ../pkg/errors" not in out  # a link is judged by where it points
    assert "  docs/guide.md:1: pkg.errors" in out


def test_what_it_cannot_rewrite_is_listed_and_the_status_says_so(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "pkg" / "near.py").write_text(
        '"""A path built from a folder."""\n\nfrom pathlib import Path\n\n'
        'NEAR = Path(__file__).parent / "errors.py"\n'
    )
    (repo / "docs" / "names.md").write_text("`PkgError` is raised.\n")
    status, out = relocate(repo, capsys)
    assert status == 1
    assert (
        "pkg/near.py:5: a path built from 'errors.py' may name pkg/errors.py (now pkg/base/_errors.py)" in out
    )
    assert "docs/names.md: names PkgError (renamed to BaseError in code): check it" in out


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ('[[move]]\nold = "pkg.errors"\nnew = "pkg.core"\n', "destinations already taken"),
        (
            '[[move]]\nold = "pkg.errors"\nnew = "pkg.base._errors"\nfront = "pkg.other"\n',
            "is not pkg.base._errors",
        ),
        (
            '[[move]]\nold = "pkg.errors"\nnew = "pkg.base._errors"\nfront = "pkg.base"\n',
            "give it a docstring",
        ),
        ('[[move]]\nold = "pkg.errors"\nnew = "pkg.errors"\n', "moves to itself"),
        ('[[move]]\nold = "pkg.errors"\nnew = "pkg-2.x"\n', "not a dotted module name"),
        ('[[moves]]\nold = "pkg.errors"\n', "unknown tables"),
        ('[[move]]\nold = "pkg.errors"\n', "lacks ['new']"),
    ],
)
def test_a_mapping_that_cannot_be_applied_changes_nothing(
    repo: Path, capsys: pytest.CaptureFixture[str], mapping: str, message: str
) -> None:
    (repo / "moves.toml").write_text(mapping)
    git(repo, "commit", "-qam", "mapping")
    assert main([str(repo / "moves.toml"), "--root", str(repo)]) == 2
    assert message in capsys.readouterr().err
    assert git(repo, "status", "--porcelain") == ""


def test_a_folder_of_data_named_as_a_moved_module_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pkg/templates.py`` moves; ``pkg/templates/`` (YAML, no package) is another thing and stays."""
    files = {
        "pkg/__init__.py": '"""A small package."""\n',
        "pkg/templates.py": '"""Reading templates."""\n',
        "pkg/templates/example.yaml": "kind: Example\n",
        "moves.toml": '[[move]]\nold = "pkg.templates"\nnew = "pkg.reading._templates"\n',
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    status, out = relocate(tmp_path, capsys, "--dry-run")
    assert status == 0, out
    assert "pkg/templates.py → pkg/reading/_templates.py" in out
    assert "example.yaml" not in out


def test_a_file_moved_to_another_depth_that_builds_paths_from_its_place_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A test moved one folder deeper: ``parents[1] / "data"`` names another folder now."""
    files = {
        "pkg/__init__.py": '"""A small package."""\n',
        "pkg/keys.py": '"""Keys."""\n',
        "tests/__init__.py": "",
        "tests/pkg/__init__.py": "",
        "tests/pkg/test_keys.py": (
            '"""pkg.keys."""\n\nfrom pathlib import Path\n\n'
            'DATA = Path(__file__).resolve().parents[1] / "data"\n'
        ),
        "moves.toml": '[[move]]\nold = "pkg.keys"\nnew = "pkg.crypto._keys"\n',
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    status, out = relocate(
        tmp_path, capsys, "--dry-run"
    )  # a dry run lists it too (status 0: it writes nothing)
    assert status == 0, out
    assert (
        "tests/pkg/crypto/test_keys.py: moved to another depth: check the paths it builds from __file__"
        in out
    )


def test_the_script_runs_as_a_file() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "relocate.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "docs/moves/<stage>.toml" in result.stdout
