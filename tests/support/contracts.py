"""The layout contracts as data, and the ratchet that holds today's violations while the stages remove them.

A contract is a frozen dataclass with a number (its section in ``docs/ARCHITECTURE.md`` / plan §6), a title
and :meth:`Contract.violations`: the set of violations it finds in a :class:`~scripts.layout_facts.Project`,
each one a line of text that names modules by their dotted names (so that ``scripts/relocate.py``, which
rewrites dotted names everywhere, keeps the known lists in step with a move).

A *strict* contract allows none. A *ratchet* contract allows exactly the violations of its ``KNOWN`` list
(``tests/contracts_known.py``): :func:`ratchet` fails on a violation that is not on the list (a new one) and
on an entry that no longer occurs (the stage that fixed it deletes it), so the lists only ever shrink and
always say what is left. ``python -m tests.test_contracts --prune`` deletes the entries that no longer occur.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from scripts.layout_facts import (
    Edge,
    Project,
    dunder_all,
    homes_table,
    is_private,
    strongly_connected,
    stub_table,
)


def _within(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _every_import(project: Project) -> list[Edge]:
    """Every edge the contracts judge: top level, in functions, under TYPE_CHECKING, and ``_HOMES`` names."""
    return [e for e in project.edges if e.counts_in(type_checking=True, top_only=False, homes=True)]


@dataclass(frozen=True)
class Contract:
    """One rule of the layout; a subclass says what breaks it."""

    number: ClassVar[int]
    title: ClassVar[str]
    #: Whether today's violations are allowed (listed in ``KNOWN`` under the contract's key); else strict.
    ratchet: bool = False

    def violations(self, project: Project) -> set[str]:
        """Every violation in the project, one line each."""
        raise NotImplementedError

    def normalize(self, entry: str) -> str:
        """A listed entry as :meth:`violations` writes it (a move may have changed its sort order)."""
        return entry


@dataclass(frozen=True)
class PackageOrder(Contract):
    """1. Each top-level package imports only the packages after it in ``order`` (and itself)."""

    number = 1
    title = "package order"
    order: tuple[str, ...] = ()

    def violations(self, project: Project) -> set[str]:
        rank = {package: i for i, package in enumerate(self.order)}
        return {
            f"{e.source} -> {e.target}"
            for e in _every_import(project)
            if rank[project.modules[e.target].package] < rank[project.modules[e.source].package]
        }


@dataclass(frozen=True)
class Tiers(Contract):
    """2. Inside ``room``, a sub-room imports only sub-rooms of lower tiers (tiers listed lowest first)."""

    number = 2
    title = "tiers inside a package"
    room: str = ""
    tiers: tuple[tuple[str, ...], ...] = ()

    def violations(self, project: Project) -> set[str]:
        tier = {f"{self.room}.{r}": level for level, rooms in enumerate(self.tiers) for r in rooms}

        def tier_of(module: str) -> tuple[str, int] | None:
            for room, level in tier.items():
                if _within(module, [room]):
                    return room, level
            return None

        found = set()
        for e in _every_import(project):
            source, target = tier_of(e.source), tier_of(e.target)
            if source and target and source[0] != target[0] and target[1] >= source[1]:
                found.add(f"{e.source} -> {e.target}")
        return found


@dataclass(frozen=True)
class Wall(Contract):
    """3. A module in ``sources`` imports nothing in ``targets`` (``unless_…`` are the exceptions of each)."""

    number = 3
    title = "walls"
    sources: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    unless_sources: tuple[str, ...] = ()
    unless_targets: tuple[str, ...] = ()

    def violations(self, project: Project) -> set[str]:
        return {
            f"{e.source} -> {e.target}"
            for e in _every_import(project)
            if _within(e.source, self.sources)
            and not _within(e.source, self.unless_sources)
            and _within(e.target, self.targets)
            and not _within(e.target, self.unless_targets)
        }


@dataclass(frozen=True)
class FrontDoors(Contract):
    """4. An import across rooms (folders) names the other room's front door, never a module inside it."""

    number = 4
    title = "imports across rooms name a front door"

    def violations(self, project: Project) -> set[str]:
        found = set()
        for e in _every_import(project):
            source, target = project.modules[e.source], project.modules[e.target]
            if not target.is_package and source.folder != target.folder:
                found.add(f"{e.source} -> {e.target}")
        return found


@dataclass(frozen=True)
class OnePublicModule(Contract):
    """5. Every module but an ``__init__.py`` or ``__main__.py`` has a ``_`` part in its dotted name.

    ``commands`` are the command line's modules, one per command and named after it (contract 10): each is
    the front door of its command.
    """

    number = 5
    title = "only front doors are public"
    commands: tuple[str, ...] = ()

    def violations(self, project: Project) -> set[str]:
        return {
            name
            for name, module in project.modules.items()
            if not module.is_package
            and not name.endswith(".__main__")
            and not is_private(name)
            and name not in self.commands
        }


@dataclass(frozen=True)
class NoCycles(Contract):
    """6. No import cycle at any depth, and no module imports a front door of its own package."""

    number = 6
    title = "no import cycle"

    def violations(self, project: Project) -> set[str]:
        graph = project.graph(type_checking=True, homes=True)
        found = {" <-> ".join(cycle) for cycle in strongly_connected(graph)}
        for e in _every_import(project):
            if project.modules[e.target].is_package and e.source.startswith(e.target + "."):
                found.add(f"{e.source} -> {e.target} (its own package)")
        return found

    def normalize(self, entry: str) -> str:
        return " <-> ".join(sorted(entry.split(" <-> "))) if " <-> " in entry else entry


@dataclass(frozen=True)
class LazyFrontDoors(Contract):
    """7. A front door loads nothing at import; it names each name once, each resolving.

    A front door is lazy when importing it imports no project module but its own packages (ancestors). One
    with a stub (``__init__.pyi``) is only ``lazy_loader.attach_stub`` (so its names are the stub's) and its
    stub only ``from .m import A as A`` lines (what lazy_loader reads, mypy's explicit re-export), one per
    module, in order; one of the old form is complete when ``__all__`` and ``_HOMES`` name the same names
    (a docstring-only one names none). Every name of a lazy front door is resolved in one subprocess.
    """

    number = 7
    title = "front doors are lazy and complete"

    def violations(self, project: Project) -> set[str]:
        found = set()
        eager = defaultdict(set)
        for e in project.edges:
            if e.counts_in(type_checking=False, top_only=True, homes=False):
                eager[e.source].add(e.target)
        resolvable: dict[str, list[str]] = {}
        for name, module in project.modules.items():
            if not module.is_package:
                continue
            tree, stub = project.tree(name), project.stub(name)
            if any(not name.startswith(t + ".") for t in eager[name]):
                found.add(f"{name}: loads project modules at import")
            if stub is not None:
                found.update(f"{name}: {problem}" for problem in _stub_problems(stub))
                if not _only_attaches_stub(tree):
                    found.add(f"{name}: its __init__.py does more than lazy_loader.attach_stub")
                homes = stub_table(name, stub)
            else:
                homes = homes_table(tree)
                if set(dunder_all(tree)) != set(homes):
                    found.add(f"{name}: __all__ is not its _HOMES names")
                if "attach_stub" in ast.unparse(tree):
                    found.add(f"{name}: lazy_loader.attach_stub without a stub beside it")
            if homes:
                resolvable[name] = sorted(homes)
        found.update(_unresolved(project.root, resolvable))
        return found


#: The one statement of a front door with a stub (after its docstring and ``import lazy_loader``).
ATTACH_STUB = "__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)"


def _only_attaches_stub(tree: ast.Module) -> bool:
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    return [ast.unparse(node) for node in body] == ["import lazy_loader", ATTACH_STUB]


def _member_order(name: str) -> tuple[int, str]:
    """ruff's order of imported names (order-by-type): CONSTANTS, then Classes, then the rest."""
    return (0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2), name


def _stub_problems(stub: ast.Module) -> list[str]:
    """What in a stub lazy_loader or mypy would read otherwise than a list of names (ruff's I001 is off)."""
    problems, modules = [], []
    for node in stub.body:
        if not (
            isinstance(node, ast.ImportFrom)
            and node.level == 1
            and node.module
            and all(alias.asname == alias.name for alias in node.names)
        ):
            problems.append(f"stub line {node.lineno} is not `from .m import A as A, …`")
            continue
        modules.append(node.module)
        names = [alias.name for alias in node.names]
        if names != sorted(set(names), key=_member_order):
            problems.append(f"stub line {node.lineno}: the names are not in ruff's order, or repeat")
    if modules != sorted(set(modules)):
        problems.append("stub: the modules are not in order, or one repeats")
    return problems


def _unresolved(root: Path, names: Mapping[str, list[str]]) -> set[str]:
    """``"front.name does not resolve"`` for each name whose front door cannot give it (one subprocess).

    One that fails to import (lazy_loader refuses a stub it cannot read) is ``"front does not import"``.
    """
    if not names:
        return set()
    probe = (
        "import importlib, sys\n"
        f"for front, names in {dict(names)!r}.items():\n"
        "    try:\n"
        "        module = importlib.import_module(front)\n"
        "    except Exception:\n"
        "        print(f'{front} does not import')\n"
        "        continue\n"
        "    for name in names:\n"
        "        try:\n"
        "            getattr(module, name)\n"
        "        except Exception:\n"
        "            print(f'{front}.{name} does not resolve')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=root
    )
    return set(result.stdout.splitlines())


@dataclass(frozen=True)
class Sizes(Contract):
    """8. A module over ``max_lines`` lines says why near its top (``note`` in its first 40 lines)."""

    number = 8
    title = "module sizes"
    max_lines: int = 500
    note: str = "One module on purpose:"

    def violations(self, project: Project) -> set[str]:
        found = set()
        for name, module in project.modules.items():
            text = module.path.read_text()
            lines = text.count("\n")
            if lines > self.max_lines and self.note not in "\n".join(text.splitlines()[:40]):
                found.add(f"{name}: {lines} lines")
        return found


@dataclass(frozen=True)
class Names(Contract):
    """9. No module has a vague name (``forbidden``, ``_`` ignored); no two public classes share a name."""

    number = 9
    title = "names"
    forbidden: tuple[str, ...] = field(default=("verify", "wire", "utils", "helpers", "common", "misc"))

    def violations(self, project: Project) -> set[str]:
        found = {
            f"{name}: a module named {name.rpartition('.')[2].lstrip('_')!r}"
            for name, module in project.modules.items()
            if not module.is_package and name.rpartition(".")[2].lstrip("_") in self.forbidden
        }
        homes = defaultdict(list)
        for name in project.modules:
            for node in project.tree(name).body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    homes[node.name].append(name)
        found.update(f"class {cls} in {', '.join(sorted(m))}" for cls, m in homes.items() if len(m) > 1)
        return found

    def normalize(self, entry: str) -> str:
        head, found, modules = entry.partition(" in ")
        return (
            f"{head} in {', '.join(sorted(modules.split(', ')))}"
            if found and head.startswith("class ")
            else entry
        )


@dataclass(frozen=True)
class CommandTable(Contract):
    """10. Each command of the table lives in the module of ``room`` named after it, and every public module
    of ``room`` is a command's (what commands share is ``_``-prefixed)."""

    number = 10
    title = "the CLI table"
    room: str = ""
    #: Each command and the module the table says defines it.
    commands: Mapping[str, str] = field(default_factory=dict)

    def violations(self, project: Project) -> set[str]:
        found = set()
        for command, module in self.commands.items():
            home = f"{self.room}.{command.replace('-', '_')}"
            if module != home:
                found.add(f"{command}: in {module}, not {home}")
            elif home not in project.modules:
                found.add(f"{command}: no module {home}")
        for name in project.modules:
            parent, _, last = name.rpartition(".")
            if parent == self.room and not last.startswith("_") and name not in self.commands.values():
                found.add(f"{name}: public, and no command's module")
        return found


@dataclass(frozen=True)
class Verdict:
    """What a ratchet found: violations not on the list, and entries that no longer occur."""

    new: list[str]
    stale: list[str]


def ratchet(contract: Contract, violations: set[str], known: Iterable[str]) -> Verdict:
    """Compare a contract's violations with its known list (entries as the contract normalizes them)."""
    listed = {contract.normalize(entry): entry for entry in known}
    return Verdict(
        new=sorted(violations - set(listed)), stale=sorted(listed[e] for e in set(listed) - violations)
    )


#: The top of ``tests/contracts_known.py``.
KNOWN_HEADER = """\
\"\"\"Today's violations of the ratchet contracts of tests/test_contracts.py: generated, then only deleted.

A stage that fixes a violation deletes its line (``python -m tests.test_contracts --prune`` deletes every
line that no longer occurs). A new violation is never added here: fix it. The lists are empty when issue 26
is done (plan §6, S12).
\"\"\"

# ruff: noqa: E501 (one entry per line, however long: a stage deletes lines)
"""


def known_file(known: Mapping[str, Iterable[str]]) -> str:
    """The text of ``tests/contracts_known.py`` holding these lists (one entry per line, sorted)."""
    lines = [KNOWN_HEADER, "KNOWN: dict[str, tuple[str, ...]] = {"]
    for key in sorted(known):
        entries = sorted(set(known[key]))
        if not entries:
            lines.append(f"    {json.dumps(key)}: (),")
            continue
        lines.append(f"    {json.dumps(key)}: (")
        lines.extend(f"        {json.dumps(entry)}," for entry in entries)
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def prune(text: str, stale: set[str]) -> str:
    """The known file's text with the lines of ``stale`` entries deleted (nothing else changes)."""
    kept = [line for line in text.splitlines(keepends=True) if _entry(line) not in stale]
    return "".join(kept)


def _entry(line: str) -> str | None:
    stripped = line.strip()
    if not (stripped.endswith(",") and stripped[:1] in "'\""):
        return None
    try:
        value = ast.literal_eval(stripped[:-1])
    except (SyntaxError, ValueError):  # a key with an empty list: '"names": (),'
        return None
    return value if isinstance(value, str) else None
