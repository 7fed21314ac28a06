"""scripts/relocate_python.py and relocate_fronts.py: one file's references, and front doors, case by case."""

from __future__ import annotations

import ast
import textwrap

import pytest

from scripts.relocate_fronts import FrontDoors, isort_order
from scripts.relocate_mapping import Move, NameMap
from scripts.relocate_python import PythonFile, Rewritten, rewrite_python

MOVES = [Move("pkg.errors", "pkg.base._errors", "pkg.base"), Move("pkg.old", "pkg._new")]
AFTER = {"pkg", "pkg.base", "pkg.base._errors", "pkg._new", "pkg._new.sub", "app", "app.main"}


def rewrite(
    text: str, module: str = "app.main", *, old_module: str | None = None, shipped: bool = True
) -> Rewritten:
    file = PythonFile(
        path=module.replace(".", "/") + ".py",
        module=module,
        old_module=old_module or module,
        is_package=False,
        shipped=shipped,
    )
    names = NameMap(MOVES, AFTER.__contains__, ["pkg.old"])
    return rewrite_python(textwrap.dedent(text), file, names, AFTER.__contains__)


def test_a_shipped_importer_outside_the_room_uses_the_front_door() -> None:
    result = rewrite("from pkg.errors import PkgError, explain as words\n")
    assert result.text == "from pkg.base import PkgError, explain as words\n"
    assert result.exports == [
        ("pkg.base", "PkgError", "pkg.base._errors"),
        ("pkg.base", "explain", "pkg.base._errors"),
    ]


@pytest.mark.parametrize(("module", "shipped"), [("pkg.base._other", True), ("tests.test_main", False)])
def test_the_room_itself_and_the_tests_import_the_module(module: str, shipped: bool) -> None:
    result = rewrite("from pkg.errors import PkgError\n", module, shipped=shipped)
    assert result.text == "from pkg.base._errors import PkgError\n"
    assert result.exports == []


def test_a_module_imported_by_name_keeps_its_name_and_the_others_stay() -> None:
    result = rewrite(
        """\
        def f():
            from pkg import errors, other  # noqa: PLC0415 - late
            return errors
        """
    )
    assert result.text == textwrap.dedent(
        """\
        def f():
            from pkg.base import _errors as errors  # noqa: PLC0415 - late
            from pkg import other  # noqa: PLC0415 - late
            return errors
        """
    )


def test_a_package_move_covers_its_modules_and_a_plain_import_its_chains() -> None:
    result = rewrite(
        """\
        import pkg.errors
        import pkg.old.sub as sub
        from pkg.old.sub import thing

        value = pkg.errors.PkgError, pkg.errors, sub.x
        """
    )
    assert result.text == textwrap.dedent(
        """\
        import pkg.base._errors
        import pkg._new.sub as sub
        from pkg._new.sub import thing

        value = pkg.base._errors.PkgError, pkg.base._errors, sub.x
        """
    )


def test_strings_comments_and_spelled_paths() -> None:
    result = rewrite(
        '''\
        """See :class:`pkg.errors.PkgError` (pkg/errors.py)."""
        TARGET = "pkg.errors.explain"  # patched as pkg.errors.explain
        FILE = ROOT / "pkg" / "errors.py"
        NEAR = HERE / "errors.py"
        OTHER = ROOT / "pkg" / "errors_old.py"
        '''
    )
    assert result.text == textwrap.dedent(
        '''\
        """See :class:`pkg.base._errors.PkgError` (pkg/base/_errors.py)."""
        TARGET = "pkg.base._errors.explain"  # patched as pkg.base._errors.explain
        FILE = ROOT / "pkg" / "base" / "_errors.py"
        NEAR = HERE / "errors.py"
        OTHER = ROOT / "pkg" / "errors_old.py"
        '''
    )
    (note,) = result.notes
    assert note == (
        "app/main.py:4: a path built from 'errors.py' may name pkg/errors.py (now pkg/base/_errors.py): "
        "check it"
    )


def test_a_relative_import_of_a_moved_file_is_written_absolute() -> None:
    result = rewrite(
        "from . import errors\nfrom .old import sub\n", "pkg.base._other", old_module="pkg.other"
    )
    assert result.text == "from pkg.base import _errors as errors\nfrom pkg._new import sub\n"


def test_a_file_that_is_not_python_has_only_its_strings_rewritten() -> None:
    result = rewrite('x = "pkg.errors"\nif:\n')
    assert result.text == 'x = "pkg.base._errors"\nif:\n'
    assert result.notes and "not valid Python" in result.notes[0]


def test_the_order_of_all_is_ruffs() -> None:
    names = ["sha256_bytes", "Deadline", "MAX_BYTES", "v10", "v2", "InputError", "A2B"]
    assert sorted(names, key=isort_order) == [
        "A2B",
        "MAX_BYTES",
        "Deadline",
        "InputError",
        "sha256_bytes",
        "v2",
        "v10",
    ]


def test_a_front_door_that_is_not_lazy_is_only_checked() -> None:
    texts = {
        "pkg/base/__init__.py": "from pkg.base._errors import PkgError\n\n__all__ = ['PkgError']\n",
        "app/main.py": "from pkg.base import PkgError, explain\n",
    }
    trees = {path: ast.parse(text) for path, text in texts.items()}
    doors = FrontDoors(texts, trees, AFTER.__contains__, [("pkg.base", "explain", "pkg.base._errors")])
    assert doors.regenerate("pkg.base", None) == {}
    assert doors.notes == [
        "pkg/base/__init__.py: does not bind explain, which is imported from it: add it by hand"
    ]


def test_an_import_whose_module_changes_keeps_its_comments() -> None:
    text = "from pkg.errors import (  # noqa: F401 - re-exported\n    PkgError,  # the one error\n)\n"
    assert rewrite(text).text == text.replace("from pkg.errors", "from pkg.base")
    assert rewrite("import pkg.errors  # plain\n").text == "import pkg.base._errors  # plain\n"


def test_a_front_door_that_does_not_give_a_name_is_not_used_for_it() -> None:
    file = PythonFile(
        path="app/main.py", module="app.main", old_module="app.main", is_package=False, shipped=True
    )
    names = NameMap(MOVES, AFTER.__contains__)
    result = rewrite_python(
        "from pkg.errors import PkgError, explain\n",
        file,
        names,
        AFTER.__contains__,
        lambda front, name: name == "PkgError",
    )
    assert result.text == "from pkg.base import PkgError\nfrom pkg.base._errors import explain\n"


def test_a_package_that_becomes_top_level_is_imported_plainly() -> None:
    file = PythonFile(
        path="app/main.py", module="app.main", old_module="app.main", is_package=False, shipped=True
    )
    names = NameMap([Move("shop.ledger", "ledger")], {"ledger"}.__contains__, ["shop.ledger"])
    source = "from shop import ledger\nfrom shop import ledger as log, wire\n"
    result = rewrite_python(source, file, names, {"ledger"}.__contains__)
    assert result.text == "import ledger\nimport ledger as log\nfrom shop import wire\n"
