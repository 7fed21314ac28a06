"""The mapping file of a move (``docs/moves/<stage>.toml``, format in ``docs/moves/README.md``), and what it
says about every dotted name and path: the rewriting rules that ``scripts/relocate.py`` applies and that
``scripts/test_diff_is_mechanical.py`` accepts.

A ``[[move]]`` moves a module, or a package with everything under it; the tests that mirror it (the layout
with underscores dropped: ``verifier/base/_errors.py`` ↔ ``tests/verifier/base/test_errors.py``, a package
↔ its test folder) move with it unless a ``[[move]]`` names them. A name is mapped by its longest moved
prefix, so a package move and moves of modules inside it combine.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: The folder of the tests, which mirror the layout.
TESTS = "tests"
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class MappingError(ValueError):
    """A mapping file that cannot be applied; the message names the entry."""


@dataclass(frozen=True)
class Move:
    """One module or package, from ``old`` to ``new``; importers outside ``front``'s room use ``front``."""

    old: str
    new: str
    front: str | None = None


@dataclass(frozen=True)
class Rename:
    """A top-level name of ``module`` (its name after the moves) that changes from ``old`` to ``new``."""

    module: str
    old: str
    new: str


@dataclass(frozen=True)
class Front:
    """A front door: the docstring it gets when the codemod creates it."""

    module: str
    doc: str


def module_path(name: str, *, package: bool) -> str:
    """The file of a dotted module name, relative to the root (``a/b.py`` or ``a/b/__init__.py``)."""
    base = name.replace(".", "/")
    return f"{base}/__init__.py" if package else f"{base}.py"


def mirrored_test(name: str, *, package: bool) -> str:
    """The test module (``package=False``) or test folder (``package=True``) mirroring a module.

    Leading underscores are dropped from every part: ``verifier.base._errors`` ↔
    ``tests.verifier.base.test_errors``, ``decisionlog`` ↔ ``tests.decisionlog``.
    """
    parts = [part.lstrip("_") for part in name.split(".")]
    if package:
        return ".".join([TESTS, *parts])
    return ".".join([TESTS, *parts[:-1], f"test_{parts[-1]}"])


@dataclass
class Mapping:
    """A loaded mapping file, with the derived moves of mirrored tests."""

    moves: list[Move]
    renames: list[Rename] = field(default_factory=list)
    fronts: dict[str, Front] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Mapping:
        """Read and check a mapping file."""
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise MappingError(f"{path}: {error}") from error
        unknown = set(data) - {"move", "rename", "front"}
        if unknown:
            raise MappingError(f"{path}: unknown tables {sorted(unknown)} (move, rename, front)")
        moves = [Move(**_entry(path, "move", e, {"old", "new"}, {"front"})) for e in data.get("move", [])]
        renames = [
            Rename(**_entry(path, "rename", e, {"module", "old", "new"})) for e in data.get("rename", [])
        ]
        fronts = [Front(**_entry(path, "front", e, {"module", "doc"})) for e in data.get("front", [])]
        mapping = cls(moves, renames, {f.module: f for f in fronts})
        mapping.check(str(path))
        return mapping

    def check(self, where: str) -> None:
        """Refuse what cannot be applied: bad names, a name moved twice, a front door outside the move."""
        seen: set[str] = set()
        for move in self.moves:
            for name in (move.old, move.new, move.front or move.new):
                if not _DOTTED.fullmatch(name):
                    raise MappingError(f"{where}: {name!r} is not a dotted module name")
            if move.old in seen:
                raise MappingError(f"{where}: {move.old} is moved twice")
            seen.add(move.old)
            if move.old == move.new:
                raise MappingError(f"{where}: {move.old} moves to itself")
            if move.front and not (move.new == move.front or move.new.startswith(move.front + ".")):
                raise MappingError(
                    f"{where}: front {move.front} of {move.old} is not {move.new} or a package above it"
                )
        for rename in self.renames:
            if not (rename.old.isidentifier() and rename.new.isidentifier()):
                raise MappingError(
                    f"{where}: rename {rename.old!r} → {rename.new!r} is not between two names"
                )

    @property
    def front_doors(self) -> list[str]:
        """Every front door the moves name, sorted."""
        return sorted({m.front for m in self.moves if m.front} | set(self.fronts))

    def all_moves(self, is_package: Callable[[str], bool]) -> list[Move]:
        """The moves, and those of the mirrored tests that no move names (``is_package`` of an old name)."""
        explicit = {m.old for m in self.moves}
        found = list(self.moves)
        for move in self.moves:
            if move.old.split(".")[0] == TESTS:
                continue  # a test module moved by name: it mirrors nothing
            package = is_package(move.old)
            old, new = mirrored_test(move.old, package=package), mirrored_test(move.new, package=package)
            if old != new and old not in explicit:
                found.append(Move(old, new))
            if package:  # a package's own test module, beside its test folder
                old, new = mirrored_test(move.old, package=False), mirrored_test(move.new, package=False)
                if old != new and old not in explicit:
                    found.append(Move(old, new))
        return found


def _entry(
    where: Path, table: str, entry: object, required: set[str], optional: Iterable[str] = ()
) -> dict[str, str]:
    if not isinstance(entry, dict):
        raise MappingError(f"{where}: [[{table}]] must be a table")
    keys = set(entry)
    if missing := required - keys:
        raise MappingError(f"{where}: [[{table}]] {entry} lacks {sorted(missing)}")
    if extra := keys - required - set(optional):
        raise MappingError(f"{where}: [[{table}]] {entry} has unknown keys {sorted(extra)}")
    if not all(isinstance(value, str) for value in entry.values()):
        raise MappingError(f"{where}: [[{table}]] {entry}: every value is a string")
    return {str(k): str(v) for k, v in entry.items()}


class NameMap:
    """Old dotted names and paths → new ones, by longest moved prefix; one regular expression finds them.

    ``exists`` tells whether a dotted module name exists after the move: a reference whose old prefix still
    exists (a module that became a package of the same name) is left alone when the rest of it resolves in
    the new tree.
    """

    def __init__(
        self, moves: Iterable[Move], exists: Callable[[str], bool], packages: Iterable[str] = ()
    ) -> None:
        self.moves = {m.old: m for m in moves}
        self.exists = exists
        #: The old names that were packages (their path is a folder, a module's ends in ``.py``).
        self.packages = set(packages)
        self.paths: dict[str, str] = {}  # old path prefix (no suffix) → new one
        for move in self.moves.values():
            self.paths[move.old.replace(".", "/")] = move.new.replace(".", "/")
        dotted = "|".join(re.escape(n) for n in sorted(self.moves, key=len, reverse=True)) or "(?!)"
        slashed = "|".join(re.escape(p) for p in sorted(self.paths, key=len, reverse=True)) or "(?!)"
        # A dotted name not inside a longer one; a path at the start of a path (or after ./ and ../), ending
        # in .py, a slash, or the end of the path.
        self._pattern = re.compile(
            rf"(?<![\w.])(?P<dotted>{dotted})(?![\w])"
            rf"|(?:(?<=\./)|(?<![\w./-]))(?P<path>{slashed})(?=\.py\b|/|\.(?!\w)|(?![\w.-]))"
        )

    def lookup(self, name: str) -> Move | None:
        """The move covering a dotted name (its longest moved prefix), if any."""
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if (move := self.moves.get(".".join(parts[:end]))) is not None:
                return move
        return None

    def map(self, name: str) -> str | None:
        """The new dotted name, or None when no move covers the name or it already means a new module."""
        move = self.lookup(name)
        if move is None:
            return None
        rest = name[len(move.old) :]  # "" or ".x.y"
        # The old name may be a module again after the move (a module became a package of the same name).
        reused = self.exists(move.old)
        if reused and (not rest or self.exists(f"{move.old}.{rest[1:].split('.')[0]}")):
            return None
        return move.new + rest

    def rewrite(self, text: str) -> tuple[str, int]:
        """``text`` with every old dotted name and path replaced; and how many were."""
        count = 0

        def replace(match: re.Match[str]) -> str:
            nonlocal count
            if (dotted := match.group("dotted")) is not None:
                new = self.map(dotted)
            else:
                new = self._map_path(match.group("path"))
            if new is None:
                return match.group(0)
            count += 1
            return new

        return self._pattern.sub(replace, text), count

    def _map_path(self, path: str) -> str | None:
        new = self.map(path.replace("/", "."))
        return None if new is None else new.replace(".", "/")

    def files(self) -> Iterable[tuple[str, str]]:
        """(old path, new path) of every move: a module's ``.py`` file, or a package's folder."""
        for move in self.moves.values():
            suffix = "" if move.old in self.packages else ".py"
            yield move.old.replace(".", "/") + suffix, move.new.replace(".", "/") + suffix

    def finds(self, text: str) -> Iterable[str]:
        """The old names and paths that :meth:`rewrite` would replace in ``text``."""
        for match in self._pattern.finditer(text):
            dotted, path = match.group("dotted"), match.group("path")
            if (self.map(dotted) if dotted is not None else self._map_path(path)) is not None:
                yield match.group(0)
