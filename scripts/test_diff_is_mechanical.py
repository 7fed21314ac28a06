"""Every change to the tests since BASE that is not mechanical (issue 26, plan §0 rule 1).

Usage, from the repository root::

    .venv/bin/python scripts/test_diff_is_mechanical.py BASE [--moves docs/moves/S1.toml ...] [--show-renames]

Mechanical is: an import line; a dotted name or path of a moved module (in code, strings and docstrings),
as the mapping files say (default: every ``docs/moves/*.toml`` added or changed since BASE); a name renamed
by a mapping's ``[[rename]]``; a test file or function moved verbatim. Everything else is printed: each test
module is cut into its top-level statements (imports left out, formatting and comments ignored: the AST is
compared), the statements of BASE are rewritten by the mappings, and every statement of today's tests that
none of them matches is shown beside the statement of the same name it replaces. Also printed: any change
under ``tests/data`` (no fixture may change), any other changed test file, and entries added to the ratchet
lists of ``tests/contracts_known.py`` (entries may only go; a cycle may shrink).

Exit status: 0 when everything is mechanical, 1 when something is printed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from scripts.relocate_mapping import Mapping, MappingError, Move, NameMap, Rename, module_path

TESTS = "tests/"
DATA = "tests/data/"
KNOWN_FILE = "tests/contracts_known.py"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


@dataclass(frozen=True)
class Unit:
    """One top-level statement of a test module, without its imports, as source text."""

    path: str
    name: str
    text: str


class _DropImports(ast.NodeTransformer):
    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and all(isinstance(s, ast.stmt) for s in body):
                kept = [s for s in body if not isinstance(s, ast.Import | ast.ImportFrom)]
                setattr(node, name, kept or ([ast.Pass()] if name == "body" else []))
        return node


def _name(node: ast.stmt, index: int) -> str:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return ", ".join(ast.unparse(t) for t in targets)
    if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return "(module docstring)"
    return f"(statement {index + 1})"


def units(path: str, text: str) -> list[Unit]:
    """The top-level statements of a test module, imports removed, unparsed (formatting-free)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [Unit(path, "(not valid Python)", text)]
    tree = _DropImports().visit(tree)
    return [
        Unit(path, _name(node, i), ast.unparse(node))
        for i, node in enumerate(tree.body)
        if not isinstance(node, ast.Import | ast.ImportFrom | ast.Pass)
    ]


def _renamed(text: str, renames: Iterable[Rename]) -> str:
    for rename in renames:
        text = re.sub(rf"\b{re.escape(rename.old)}\b", rename.new, text)
    return text


@dataclass
class Finding:
    """One piece of the diff that is not mechanical."""

    title: str
    detail: str = ""


class Comparison:
    """Today's tests against BASE's, through the mappings."""

    def __init__(self, root: Path, base: str, mappings: list[Mapping]) -> None:
        self.root = root
        self.base = base
        listed = _git(root, "ls-tree", "-r", "--name-only", base).splitlines()
        self.base_files = set(listed)
        current = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
        self.files = {f for f in current if f and (root / f).is_file()}
        moves: list[Move] = []
        for mapping in mappings:
            moves.extend(mapping.all_moves(self._was_package))
        self.renames = [r for m in mappings for r in m.renames]
        packages = [m.old for m in moves if module_path(m.old, package=True) in self.base_files]
        self.names = NameMap(moves, self._exists, packages)

    def _was_package(self, name: str) -> bool:
        return module_path(name, package=True) in self.base_files

    def _exists(self, name: str) -> bool:
        return module_path(name, package=False) in self.files or module_path(name, package=True) in self.files

    def base_texts(self, paths: Iterable[str]) -> dict[str, bytes]:
        """The files at BASE, read in one ``git cat-file --batch``."""
        paths = list(paths)
        request = "".join(f"{self.base}:{path}\n" for path in paths).encode()
        out = subprocess.run(
            ["git", "cat-file", "--batch"], cwd=self.root, input=request, capture_output=True, check=True
        ).stdout
        found, at = {}, 0
        for path in paths:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            found[path] = out[header_end + 1 : header_end + 1 + size]
            at = header_end + 1 + size + 1
        return found

    def findings(self, *, show_renames: bool = False) -> Iterator[Finding]:
        """Every non-mechanical change, and (with ``show_renames``) every change by a declared rename."""
        yield from self._data()
        yield from self._other_files()
        yield from self._known()
        yield from self._python(show_renames=show_renames)

    def _data(self) -> Iterator[Finding]:
        changed = _git(self.root, "diff", "--name-status", "--no-renames", self.base, "--", DATA).splitlines()
        untracked = _git(self.root, "ls-files", "--others", "--exclude-standard", "--", DATA).splitlines()
        for line in [*changed, *(f"A\t{path}" for path in untracked)]:
            yield Finding(f"fixture changed: {line.replace(chr(9), ' ')}")

    def _other_files(self) -> Iterator[Finding]:
        """Test files that are neither Python nor fixtures: unchanged, at their old or mapped place."""
        old = {
            f
            for f in self.base_files
            if f.startswith(TESTS) and not f.startswith(DATA) and not f.endswith(".py")
        }
        new = {
            f for f in self.files if f.startswith(TESTS) and not f.startswith(DATA) and not f.endswith(".py")
        }
        before = self.base_texts(sorted(old))
        for path in sorted(old):
            target = self._mapped_path(path)
            if target not in new:
                yield Finding(f"test file gone: {path}")
                continue
            new.discard(target)
            if (self.root / target).read_bytes() != before[path]:
                yield Finding(f"test file changed: {target}")
        yield from (Finding(f"test file added: {path}") for path in sorted(new))

    def _mapped_path(self, path: str) -> str:
        folder, _, name = path.rpartition("/")
        parts = folder.split("/")
        if all(p.isidentifier() for p in parts) and (new := self.names.map(".".join(parts))) is not None:
            return f"{new.replace('.', '/')}/{name}"
        return path

    def _known(self) -> Iterator[Finding]:
        if KNOWN_FILE not in self.files or KNOWN_FILE not in self.base_files:
            return
        old = _known(self.base_texts([KNOWN_FILE])[KNOWN_FILE].decode())
        new = _known((self.root / KNOWN_FILE).read_text())
        for key in sorted(new):
            before = {self.names.rewrite(entry)[0] for entry in old.get(key, set())}
            gone = before - new[key]
            for entry in sorted(new[key] - before):
                members = set(entry.split(" <-> "))
                if " <-> " in entry and any(members <= set(g.split(" <-> ")) for g in gone):
                    continue  # a cycle that shrank
                yield Finding(f"{KNOWN_FILE}: entry added to {key!r}: {entry}")

    def _python(self, *, show_renames: bool) -> Iterator[Finding]:
        before = self.base_texts(sorted(filter(_test_module, self.base_files)))
        old = [self._old(unit) for path, text in before.items() for unit in units(path, text.decode())]
        new = [
            u
            for path in sorted(filter(_test_module, self.files))
            for u in units(path, (self.root / path).read_text())
        ]
        # Matched in order: in the same file, then anywhere (moved verbatim); as mapped, then as renamed.
        unmatched = list(new)
        for same_file, renamed in ((True, False), (True, True), (False, False), (False, True)):
            pool = Counter(old_unit.key(same_file=same_file, renamed=renamed) for old_unit in old)
            found = set()
            for unit in unmatched:
                key = (unit.path if same_file else "", unit.text)
                if pool[key] > 0:
                    pool[key] -= 1
                    found.add(id(unit))
                    if renamed and show_renames:
                        yield Finding(f"renamed (declared): {unit.path}: {unit.name}")
            taken = Counter((u.path if same_file else "", u.text) for u in unmatched if id(u) in found)
            kept = []
            for old_unit in old:
                key = old_unit.key(same_file=same_file, renamed=renamed)
                if taken[key] > 0:
                    taken[key] -= 1
                else:
                    kept.append(old_unit)
            old = kept
            unmatched = [u for u in unmatched if id(u) not in found]
        yield from self._unmatched(old, unmatched)

    def _old(self, unit: Unit) -> _Old:
        plain = self.names.rewrite(unit.text)[0]
        return _Old(unit, self.names.rewrite(unit.path)[0], plain, _renamed(plain, self.renames))

    @staticmethod
    def _unmatched(old: list[_Old], new: list[Unit]) -> Iterator[Finding]:
        """What is left, each statement beside the one it replaces: same file and name, else same name."""
        left = list(old)
        for unit in new:
            before = next((o for o in left if (o.path, o.unit.name) == (unit.path, unit.name)), None)
            if before is None and not unit.name.startswith("("):  # a def or class, perhaps moved and changed
                before = next((o for o in left if o.unit.name == unit.name), None)
            if before is None:
                yield Finding(f"added: {unit.path}: {unit.name}", unit.text)
                continue
            left.remove(before)
            diff = difflib.unified_diff(
                before.renamed.splitlines(),
                unit.text.splitlines(),
                before.unit.path,
                unit.path,
                lineterm="",
                n=2,
            )
            yield Finding(f"changed: {unit.path}: {unit.name}", "\n".join(diff))
        for o in left:
            yield Finding(f"removed: {o.unit.path}: {o.unit.name}", o.plain)


@dataclass(frozen=True)
class _Old:
    """A statement of BASE: where it is after the moves, as the mappings rewrite it, and with the renames."""

    unit: Unit
    path: str
    plain: str
    renamed: str

    def key(self, *, same_file: bool, renamed: bool) -> tuple[str, str]:
        return (self.path if same_file else "", self.renamed if renamed else self.plain)


def _test_module(path: str) -> bool:
    return (
        path.startswith(TESTS) and path.endswith(".py") and not path.startswith(DATA) and path != KNOWN_FILE
    )


def _known(text: str) -> dict[str, set[str]]:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            value = ast.literal_eval(node.value)
            return {str(k): {str(e) for e in v} for k, v in value.items()}
    return {}


def _default_moves(root: Path, base: str) -> list[Path]:
    changed = _git(root, "diff", "--name-only", base, "--", "docs/moves").splitlines()
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "--", "docs/moves").splitlines()
    return [root / p for p in sorted({*changed, *untracked}) if p.endswith(".toml") and (root / p).is_file()]


def main(argv: list[str] | None = None) -> int:
    """Print what is not mechanical in the tests since BASE (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("base", help="the revision the stage began from")
    parser.add_argument(
        "--moves", type=Path, nargs="*", help="mapping files (default: those changed since BASE)"
    )
    parser.add_argument("--show-renames", action="store_true", help="also list what declared renames changed")
    parser.add_argument("--root", type=Path, default=None, help="the repository (default: the current one)")
    args = parser.parse_args(argv)
    root = (args.root or Path(_git(Path.cwd(), "rev-parse", "--show-toplevel").strip())).resolve()
    try:
        _git(root, "rev-parse", "--verify", f"{args.base}^{{commit}}")
        mappings = [
            Mapping.load(p)
            for p in (args.moves if args.moves is not None else _default_moves(root, args.base))
        ]
    except (MappingError, subprocess.CalledProcessError) as error:
        print(f"test_diff_is_mechanical: {error}", file=sys.stderr)
        return 2
    found = list(Comparison(root, args.base, mappings).findings(show_renames=args.show_renames))
    for finding in found:
        print(finding.title)
        if finding.detail:
            print("\n".join(f"    {line}" for line in finding.detail.splitlines()))
    problems = [f for f in found if not f.title.startswith("renamed (declared)")]
    print(f"{len(problems)} non-mechanical change(s) in the tests since {args.base}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
