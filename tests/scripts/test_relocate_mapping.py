"""scripts/relocate_mapping.py: the mapping file, mirrored tests, and old names found in text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scripts.relocate_mapping import Mapping, MappingError, Move, NameMap, mirrored_test

MOVES = [
    Move("pkg.errors", "pkg.base._errors", "pkg.base"),
    Move("pkg.log", "log"),
    Move("pkg.log.sqlite", "log._sqlite", "log"),
    Move("tests.pkg.test_errors", "tests.pkg.base.test_errors"),
]


def names(existing: set[str] = frozenset()) -> NameMap:  # type: ignore[assignment]
    return NameMap(MOVES, existing.__contains__, ["pkg.log"])


def test_the_longest_moved_prefix_decides() -> None:
    table = names()
    assert table.map("pkg.errors") == "pkg.base._errors"
    assert table.map("pkg.errors.PkgError.args") == "pkg.base._errors.PkgError.args"
    assert table.map("pkg.log.sqlite.Store") == "log._sqlite.Store"
    assert table.map("pkg.log.chain") == "log.chain"
    assert table.map("pkg.errorsx") is None
    assert table.map("pkg") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("from `pkg.errors` import", "from `pkg.base._errors` import"),
        (':mod:`~pkg.log.sqlite`, "pkg.errors:explain"', ':mod:`~log._sqlite`, "pkg.base._errors:explain"'),
        (
            "tests.pkg.errors and xpkg.errors and pkg.errors_old",
            "tests.pkg.errors and xpkg.errors and pkg.errors_old",
        ),
        ("pkg/errors.py, pkg/log/, pkg/log/sqlite.py", "pkg/base/_errors.py, log/, log/_sqlite.py"),
        ("[x](../pkg/errors.py) ./pkg/log", "[x](../pkg/base/_errors.py) ./log"),
        ("in pkg/log. And /abs/pkg/errors.py", "in log. And /abs/pkg/errors.py"),
        (
            "tests/pkg/test_errors.py tests.pkg.test_errors",
            "tests/pkg/base/test_errors.py tests.pkg.base.test_errors",
        ),
        ("src/pkg/errors.py pkg/errors.pyc", "src/pkg/errors.py pkg/errors.pyc"),
    ],
)
def test_old_names_and_paths_in_text(text: str, expected: str) -> None:
    assert names().rewrite(text)[0] == expected
    assert list(names().finds(expected)) == []


def test_a_module_that_became_a_package_of_its_name_keeps_what_resolves() -> None:
    table = NameMap(
        [Move("v.evidence", "v.evidence._material")], {"v.evidence", "v.evidence._material"}.__contains__
    )
    assert table.map("v.evidence") is None  # the package now
    assert table.map("v.evidence._material.LocalEvidence") is None  # already new
    assert table.map("v.evidence.LocalEvidence") == "v.evidence._material.LocalEvidence"
    assert table.rewrite("v.evidence._material")[0] == "v.evidence._material"


WORDS = ["pkg.errors", "pkg.base._errors", "pkg.log.sqlite", "log._sqlite", "pkg/errors.py", "tests.pkg", "x"]


@given(
    st.lists(st.sampled_from(WORDS), max_size=12),
    st.lists(st.sampled_from([" ", ".", "/", "`", ":"]), max_size=12),
)
def test_rewriting_twice_is_rewriting_once(words: list[str], separators: list[str]) -> None:
    text = "".join(w + s for w, s in zip(words, separators + [" "] * len(words), strict=False))
    table = names({"pkg.base._errors", "log._sqlite", "log"})
    once, _ = table.rewrite(text)
    assert table.rewrite(once) == (once, 0)


def test_mirrored_tests_drop_underscores() -> None:
    assert mirrored_test("pkg.base._errors", package=False) == "tests.pkg.base.test_errors"
    assert mirrored_test("shop.ledger", package=True) == "tests.shop.ledger"
    assert (
        mirrored_test("verifier.engine._private.child", package=False)
        == "tests.verifier.engine.private.test_child"
    )


def test_the_mapping_adds_the_moves_of_mirrored_tests(tmp_path: Path) -> None:
    mapping_file = tmp_path / "m.toml"
    mapping_file.write_text(
        '[[move]]\nold = "shop.ledger"\nnew = "ledger"\nfront = "ledger"\n'
        '[[move]]\nold = "shop.cache"\nnew = "shop.base._cache"\n'
        '[[move]]\nold = "tests.shop.test_cache"\nnew = "tests.shop.test_result_cache"\n'
        '[[rename]]\nmodule = "ledger"\nold = "SQLiteStore"\nnew = "SqliteStore"\n'
    )
    mapping = Mapping.load(mapping_file)
    moves = mapping.all_moves(lambda name: name == "shop.ledger")
    assert [(m.old, m.new) for m in moves[len(mapping.moves) :]] == [
        ("tests.shop.ledger", "tests.ledger"),
        ("tests.shop.test_ledger", "tests.test_ledger"),
    ]  # the cache's test is moved by the mapping itself
    assert mapping.front_doors == ["ledger"]
    assert mapping.renames[0].new == "SqliteStore"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[move]]\nold = 1\nnew = 'a'\n", "every value is a string"),
        ("[[move]]\nold = 'a'\nnew = 'b'\n[[move]]\nold = 'a'\nnew = 'c'\n", "a is moved twice"),
        ("[[rename]]\nmodule = 'a'\nold = 'x y'\nnew = 'z'\n", "is not between two names"),
        ("[[front]]\nmodule = 'a'\n", "lacks ['doc']"),
        ("move = 1\n[[move]]", "m.toml"),
    ],
)
def test_a_bad_mapping_is_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "m.toml").write_text(text)
    with pytest.raises(MappingError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Mapping.load(tmp_path / "m.toml")
