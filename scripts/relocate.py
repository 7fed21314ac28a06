"""Move modules with their mirrored tests and rewrite every reference to them, from a mapping file (issue 26).

Usage, from the repository root::

    .venv/bin/python scripts/relocate.py docs/moves/<stage>.toml [--dry-run | --check]

The mapping format is ``docs/moves/README.md``. In order:

1. every file of a moved module or package (and of its mirrored tests) moves (``git mv`` when tracked),
   with an ``__init__.py`` in each new folder; a folder left empty goes;
2. every Python file: imports (to the front door for shipped importers outside its room), plain-import
   attribute chains, strings and comments, paths spelled in parts (``scripts/relocate_python.py``);
3. Markdown, TOML, YAML, text, shell, templates, ``Makefile``, ``Dockerfile``: old dotted names and paths;
   relative Markdown links are recomputed from where the page and its target are after the move;
4. every front door's stub follows the moves (``scripts/_relocate_stubs.py``); the front doors the mapping
   names are regenerated from their use, as stub doors (``scripts/relocate_fronts.py``);
5. each ``[[rename]]``: the name, word for word, in its module, the front doors that export it and every
   file that imports it; each changed test line is printed;
6. ``ruff check --select I,RUF022 --fix`` and ``ruff format`` on the changed Python files, then ``ruff
   check`` on them (what is left is printed), and a scan of the tree for old names still there.

Run again after merging ``main`` into a branch begun before the stage: what has moved stays, what is new
moves, references are rewritten once (a rewritten name is never rewritten again). ``--dry-run`` prints what
would change and writes nothing; ``--check`` only scans for old names. Never in ``tests/data`` (but its
``.md`` files) nor ``docs/moves``. Exit status: 0 done and clean; 1 done, with what is left for a hand edit
listed; 2 nothing done (the mapping or the tree refuses it).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import posixpath
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from scripts._relocate_stubs import (
    imports_from,
    package_of_stub,
    read_stub,
    redirect_lost,
    relocated_stub,
    render_stub,
    stale_stub_entries,
    stub_homes,
    stub_of,
)
from scripts.layout_facts import homes_table
from scripts.relocate_fronts import FrontDoors, bound_names
from scripts.relocate_mapping import Mapping, MappingError, NameMap, module_path
from scripts.relocate_python import PythonFile, in_room, rewrite_python

#: Files whose text is rewritten besides Python (by suffix, or by name).
TEXT_SUFFIXES = (
    ".md",
    ".rst",
    ".txt",
    ".toml",
    ".cfg",
    ".ini",
    ".yaml",
    ".yml",
    ".tpl",
    ".sh",
    ".j2",
    ".html",
)
TEXT_NAMES = ("Makefile", "Dockerfile", ".dockerignore", ".gitignore")
#: Never rewritten: the fixtures (but their README and SOURCES pages) and the mapping files themselves.
FROZEN = ("tests/data/", "docs/moves/")
#: A path built from the file's own place (``Path(__file__).parent``, ``.parents[1]``).
_FROM_FILE = re.compile(r"__file__\)(?:\.resolve\(\))?\.(?:parent\b|parents\[)")
_LINK = re.compile(r"(\]\()([^)\s]+)|^(\[[^\]\n]+\]:[ \t]*)(\S+)", re.M)


def dotted_of(path: str) -> str | None:
    """The dotted module name of a ``.py`` path (``a/b/__init__.py`` → ``a.b``), None if it has none."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def rewritable(path: str) -> bool:
    """Whether step 2 or 3 may change the file."""
    if path.startswith(FROZEN) and not (path.startswith("tests/data/") and path.endswith(".md")):
        return False
    name = posixpath.basename(path)
    return path.endswith((".py", *TEXT_SUFFIXES)) or name in TEXT_NAMES


@dataclass
class Plan:
    """What a run changes: file moves, created files, new texts, and what is left for a person."""

    moves: dict[str, str] = field(default_factory=dict)  # source path → destination path
    created: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # destination path → new text (changed only)
    references: int = 0
    notes: list[str] = field(default_factory=list)
    renamed_test_lines: list[str] = field(default_factory=list)


class Relocation:
    """One mapping applied to one checkout."""

    def __init__(self, root: Path, mapping: Mapping, mapping_file: Path | None = None) -> None:
        self.root = root
        self.mapping = mapping
        #: The mapping file itself names the old modules: it is never rewritten.
        inside = mapping_file is not None and mapping_file.resolve().is_relative_to(root)
        self.mapping_file = (
            mapping_file.resolve().relative_to(root).as_posix() if mapping_file and inside else None
        )
        listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
        self.files = {f for f in listed if f and (root / f).is_file()}
        self.tracked = set(_git(root, "ls-files", "-z").split("\0"))
        self.moves = mapping.all_moves(self._was_package)
        self.lookup = NameMap(self.moves, lambda _: False)  # moves without the after-the-move check
        self.after = set(self.files)
        #: (front door, name, module) for every import redirected to a front door.
        self.exports: list[tuple[str, str, str]] = []
        #: What each front door that is not lazy binds (None: lazy, blank or new, so regenerated).
        self.front_names: dict[str, set[str] | None] = {}
        #: door → {name: its module now} for each name that left a stub door's package.
        self.lost: dict[str, dict[str, str]] = {}
        #: door → {name: its module} for each name the mapping moved to a front door from another one.
        self.gained: dict[str, dict[str, str]] = {}

    def _was_package(self, name: str) -> bool:
        move = next((m for m in self.mapping.moves if m.old == name), None)
        packages = {module_path(name, package=True)}
        if move is not None:
            packages.add(module_path(move.new, package=True))
        return bool(packages & self.files)

    def destination(self, path: str) -> str:
        """Where a file is after the moves (itself when no move covers it)."""
        dotted = dotted_of(path)
        if dotted is not None:
            new = self.lookup.map(dotted)
            return module_path(new, package=path.endswith("__init__.py")) if new else path
        folder, _, name = path.rpartition("/")
        new_folder = self.destination_folder(folder) if folder else folder
        return f"{new_folder}/{name}" if new_folder else path

    def destination_folder(self, folder: str) -> str:
        """Where a folder's files go when a package move covers the folder."""
        parts = folder.split("/")
        if not all(p.isidentifier() for p in parts):
            return folder
        move = self.lookup.lookup(".".join(parts))
        if move is None or not self._was_package(move.old):
            return folder  # a folder of data beside a moved module of the same name stays
        new = self.lookup.map(".".join(parts))
        return new.replace(".", "/") if new else folder

    def plan_moves(self) -> Plan:
        """The file moves and the ``__init__.py`` files to create (and the tree after them)."""
        plan = Plan()
        for path in sorted(self.files):
            if (target := self.destination(path)) != path:
                plan.moves[path] = target
        after = (self.files - set(plan.moves)) | set(plan.moves.values())
        clashes = [t for t in plan.moves.values() if t in self.files and t not in plan.moves]
        if clashes or len(set(plan.moves.values())) != len(plan.moves):
            raise MappingError(f"destinations already taken: {sorted(clashes) or 'two files to one place'}")
        tops = {f.split("/")[0] for f in self.files if "/" in f}
        for source, target in plan.moves.items():
            top, *folders = target.split("/")[:-1]
            if not target.endswith(".py") or (top in tops and f"{top}/__init__.py" not in after):
                continue  # a folder of scripts (bench/, scripts/) gets no __init__.py
            # a folder of plain files (a test's fake programs) stays one where it goes
            plain = posixpath.join(posixpath.dirname(source), "__init__.py") not in self.files
            for depth in range(len(folders) + 1):
                init = "/".join([top, *folders[:depth], "__init__.py"])
                if plain and depth == len(folders):
                    continue
                if init not in after:
                    after.add(init)
                    plan.created.append(init)
        self.after = after
        return plan

    def plan(self) -> Plan:
        """Everything the run would do, computed in memory."""
        plan = self.plan_moves()
        after = self.after
        names = self.names()
        self._check_fronts(plan)
        sources = {target: source for source, target in plan.moves.items()}
        self.front_names = {front: self._bound(sources, front) for front in self.mapping.front_doors}
        originals: dict[str, str] = {}
        for path in sorted(after):
            source = sources.get(path, path)
            text = "" if path in plan.created else _read(self.root / source)
            if text is None:
                continue
            originals[path] = text
            if (package := package_of_stub(path)) is not None:
                new = self._stub(package, sources.get(path, path), text, names)
            elif not rewritable(path) or path == self.mapping_file:
                continue
            elif path.endswith(".py"):
                new = self._python(path, source, text, names, plan)
            else:
                new, count = self._text(path, source, text, names)
                plan.references += count
            if new != text:
                plan.texts[path] = new
        current = {**originals, **plan.texts}
        redirected, exports, notes = redirect_lost(current, self.lost, self.gained, dotted_of)
        current |= redirected
        plan.texts |= redirected
        self.exports += exports
        plan.notes += notes
        self._renames(current, plan)
        self._front_doors(current, plan)
        return plan

    def names(self) -> NameMap:
        """The moves as they judge references in the tree after the move."""
        return NameMap(self.moves, self.exists, (m.old for m in self.moves if self._was_package(m.old)))

    def exists(self, name: str) -> bool:
        """Whether a dotted module name is a module or package after the move."""
        return module_path(name, package=False) in self.after or module_path(name, package=True) in self.after

    def _bound(self, sources: dict[str, str], front: str) -> set[str] | None:
        """What a front door that is not lazy binds (None for one that is regenerated: lazy, blank or new)."""
        init = module_path(front, package=True)
        if stub_of(front) in self.after:
            return None  # a stub door: regenerated
        text = _read(self.root / sources.get(init, init)) if init in self.after else None
        return None if text is None else bound_names(text)

    def _provides(self, front: str, name: str) -> bool:
        bound = self.front_names.get(front)
        return bound is None or name in bound

    def _check_fronts(self, plan: Plan) -> None:
        for front in self.mapping.front_doors:
            init = module_path(front, package=True)
            created = init in plan.created or init not in self.after
            if created and front not in self.mapping.fronts:
                raise MappingError(f"front door {front} is new: give it a docstring ([[front]] module, doc)")
            if init not in self.after:
                raise MappingError(f"front door {front}: no module moves into {front.replace('.', '/')}/")

    def _stub(self, package: str, source: str, text: str, names: NameMap) -> str:
        """A stub's lines after the moves; the names that left its package are kept in ``lost``."""
        doors = self.after | {stub_of(front) for front in self.mapping.front_doors}  # those regenerated too
        moved = relocated_stub(text, package_of_stub(source) or package, package, names, doors)
        if moved.left:
            self.lost[package] = moved.left
            for front, gained in moved.gained.items():
                self.gained.setdefault(front, {}).update(gained)
        return moved.text

    def _python(self, path: str, source: str, text: str, names: NameMap, plan: Plan) -> str:
        top = path.split("/", maxsplit=1)[0]
        file = PythonFile(
            path=path,
            module=dotted_of(path) or path,
            old_module=dotted_of(source) or source,
            is_package=path.endswith("__init__.py"),
            shipped=top != "tests" and f"{top}/__init__.py" in self.after,
        )
        result = rewrite_python(text, file, names, self.exists, self._provides)
        plan.references += result.changes
        plan.notes.extend(result.notes)
        if path.count("/") != source.count("/") and _FROM_FILE.search(text):
            # Path(__file__).parents[1] / "data" names another folder once the file sits at another depth.
            plan.notes.append(f"{path}: moved to another depth: check the paths it builds from __file__")
        self.exports.extend(result.exports)
        return result.text

    def _text(self, path: str, source: str, text: str, names: NameMap) -> tuple[str, int]:
        if not path.endswith(".md"):
            return names.rewrite(text)
        out, count, last = [], 0, 0
        for match in _LINK.finditer(text):
            group = 2 if match.group(1) else 4
            target, start = match.group(group), match.start(group)
            segment, n = names.rewrite(text[last:start])
            link = self._link(target, source, path)
            out += [segment, link]
            count += n + (link != target)
            last = start + len(target)
        segment, n = names.rewrite(text[last:])
        return "".join([*out, segment]), count + n

    def _link(self, target: str, source: str, path: str) -> str:
        if re.match(r"[a-z][a-z0-9+.-]*:|#|/", target):
            return target
        link, hash_, anchor = target.partition("#")
        old = posixpath.normpath(posixpath.join(posixpath.dirname(source), link))
        if old in self.files:
            new = self.destination(old)
        elif any(f.startswith(old + "/") for f in self.files):
            new = self.destination_folder(old)
        else:
            return target
        relative = posixpath.relpath(new, posixpath.dirname(path) or ".")
        if link.endswith("/") and not relative.endswith("/"):
            relative += "/"
        return target if relative == link else relative + hash_ + anchor

    def _front_doors(self, current: dict[str, str], plan: Plan) -> None:
        trees = {}
        for path, text in current.items():
            if path.endswith(".py"):
                try:
                    trees[path] = ast.parse(text)
                except SyntaxError:
                    continue
        doors = FrontDoors(current, trees, self.exists, self.exports)
        for front in self.mapping.front_doors:
            doc = self.mapping.fronts[front].doc if front in self.mapping.fronts else None
            for path, text in doors.regenerate(front, doc, self.gained.get(front)).items():
                if path not in self.after:
                    self.after.add(path)
                    plan.created.append(path)
                plan.texts[path] = current[path] = text
        for path, text in list(plan.texts.items()):  # a renamed name takes its place in its stub's order
            package = package_of_stub(path)
            if package is not None and (table := read_stub(text, package)) is not None:
                plan.texts[path] = current[path] = render_stub(package, table)
        plan.notes.extend(doors.notes)

    def _renames(self, current: dict[str, str], plan: Plan) -> None:
        """Each ``[[rename]]`` in its module, the front doors over it and every file that imports it."""
        for rename in self.mapping.renames:
            word = re.compile(rf"\b{re.escape(rename.old)}\b")
            candidates = {}
            for path, text in sorted(current.items()):
                if path.endswith((".py", ".pyi")) and word.search(text):
                    with contextlib.suppress(SyntaxError):
                        candidates[path] = ast.parse(text)
            homes = {rename.module, *(f for f in self.mapping.front_doors if in_room(rename.module, f))}
            homes |= {
                dotted_of(path) or path
                for path, tree in candidates.items()
                if path.endswith("__init__.py") and homes_table(tree).get(rename.old) == rename.module
            }
            homes = stub_homes(candidates, homes, rename.old)
            for path, tree in candidates.items():
                module = package_of_stub(path) or dotted_of(path)
                if not (module in homes or imports_from(tree, homes, rename.old)):
                    continue
                text = current[path]
                new = word.sub(rename.new, text)
                if path.startswith("tests/"):
                    for number, (a, b) in enumerate(zip(text.splitlines(), new.splitlines(), strict=True), 1):
                        if a != b:
                            plan.renamed_test_lines.append(f"{path}:{number}: {a.strip()}  →  {b.strip()}")
                current[path] = plan.texts[path] = new
            self.exports = [
                (front, rename.new if (name, home) == (rename.old, rename.module) else name, home)
                for front, name, home in self.exports
            ]
            plan.notes.extend(
                f"{path}: names {rename.old} (renamed to {rename.new} in code): check it"
                for path, text in sorted(current.items())
                if path.endswith(".md") and word.search(text)
            )

    def apply(self, plan: Plan) -> None:
        """Move the files and write the new texts."""
        for source, target in plan.moves.items():
            (self.root / target).parent.mkdir(parents=True, exist_ok=True)
            if source in self.tracked:
                _git(self.root, "mv", source, target)
            else:
                (self.root / source).rename(self.root / target)
        for path in plan.created:
            if not (self.root / path).exists():
                (self.root / path).write_text("")
        for path, text in plan.texts.items():
            (self.root / path).write_text(text)
        for folder in sorted({posixpath.dirname(s) for s in plan.moves}, key=len, reverse=True):
            _remove_if_empty(self.root / folder, self.root)
        if plan.created:
            _git(self.root, "add", *plan.created)

    def leftovers(self) -> list[str]:
        """``path:line: old`` for every old name or path still in a rewritable file."""
        names = self.names()
        found: list[str] = []
        for path in sorted(self.after):
            if not rewritable(path) or path == self.mapping_file or (text := _read(self.root / path)) is None:
                continue
            for number, line in enumerate(text.splitlines(), 1):
                found.extend(f"{path}:{number}: {old}" for old in names.finds(line))
        stubs = {p for p in self.after if package_of_stub(p)}
        modules = {p for p in self.after if p.endswith(".py") and any(p.startswith(s[:-12]) for s in stubs)}
        texts = {p: t for p in stubs | modules if (t := _read(self.root / p)) is not None}
        return found + stale_stub_entries(texts, self.exists)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (UnicodeDecodeError, FileNotFoundError):
        return None


def _remove_if_empty(folder: Path, root: Path) -> None:
    while folder != root and folder.is_dir():
        contents = [p for p in folder.iterdir() if p.name != "__pycache__"]
        if contents:
            return
        shutil.rmtree(folder)
        folder = folder.parent


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def _ruff(root: Path, files: Iterable[str]) -> str:
    """Fix import order and format ``files``; what ruff still finds in them.

    Sorting may merge two function-level imports that each carried ``# noqa: PLC0415`` into one statement
    whose comments sit on its names: the directive goes back to the statement's first line.
    """
    python = sorted(f for f in files if f.endswith((".py", ".pyi")) and (root / f).is_file())
    if not python:
        return ""
    local = Path(sys.executable).parent / "ruff"
    ruff = str(local) if local.is_file() else shutil.which("ruff") or "ruff"
    for step in (
        ["check", "--select", "I,RUF022", "--fix"],
        ["check", "--select", "PLC0415", "--add-noqa"],
        ["check", "--fixable", "RUF100", "--fix"],  # every rule judged, so only unused directives go
        ["format"],
    ):
        subprocess.run([ruff, *step, "--quiet", *python], cwd=root, capture_output=True, check=False)
    result = subprocess.run(
        [ruff, "check", "--quiet", *python], cwd=root, capture_output=True, text=True, check=False
    )
    return result.stdout.strip()


def _section(title: str, lines: list[str]) -> None:
    if lines:
        print(f"{title} ({len(lines)}):")
        print("\n".join(f"  {line}" for line in lines))


def main(argv: list[str] | None = None) -> int:
    """Apply a mapping file to the checkout in the current folder (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("mapping", type=Path, help="docs/moves/<stage>.toml")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    mode.add_argument("--check", action="store_true", help="only list old names still in the tree")
    parser.add_argument("--root", type=Path, default=None, help="the repository (default: the current one)")
    args = parser.parse_args(argv)
    root = args.root or Path(_git(Path.cwd(), "rev-parse", "--show-toplevel").strip())
    try:
        relocation = Relocation(root.resolve(), Mapping.load(args.mapping), args.mapping)
        plan = relocation.plan() if not args.check else relocation.plan_moves()
    except MappingError as error:
        print(f"relocate: {error}", file=sys.stderr)
        return 2
    if args.check:
        leftovers = relocation.leftovers()
        _section("old names still found", leftovers)
        return 1 if leftovers else 0
    tests = sum(1 for s in plan.moves if s.startswith("tests/"))
    print(f"moves {len(plan.moves)} files ({tests} of tests), creates {len(plan.created)}")
    print(f"rewrites {plan.references} references in {len(plan.texts)} files")
    _section("renamed in tests", plan.renamed_test_lines)
    if args.dry_run:
        _section("moves", [f"{s} → {t}" for s, t in plan.moves.items()])
        _section("changes", sorted(plan.texts))
        _section("for a hand edit", plan.notes)
        return 0
    relocation.apply(plan)
    left = _ruff(root, set(plan.texts) | set(plan.moves.values()) | set(plan.created))
    leftovers = relocation.leftovers()
    _section("for a hand edit", plan.notes)
    _section("ruff finds", left.splitlines())
    _section("old names still found", leftovers)
    return 1 if plan.notes or left or leftovers else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
