"""Front doors regenerated from their use (``scripts/relocate.py``, step 4), in the stub form.

A front door is a package's ``__init__.py`` that other rooms import names from. One of the stub form is its
docstring and ``lazy_loader.attach_stub``, with a stub beside it (``__init__.pyi``) that names each name once
(``scripts/_relocate_stubs.py``); one of the old form kept a ``TYPE_CHECKING`` block, a ``_HOMES`` table and
``__all__``. After a move, each front door named by the mapping keeps its names and gains those that modules
now import from it (and those the mapping moved to it), each from the module that defines it; a name of
another room comes through a ``_from_<room>_<module>.py`` of its own. A new front door (or a docstring-only
one, or one of the old form) is written whole in the stub form. A front door that is neither is not
rewritten: a name imported from it that it does not bind is reported.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scripts._relocate_stubs import (
    from_module,
    from_text,
    read_stub,
    render_stub,
    stub_door,
    stub_of,
    top_names,
)
from scripts.layout_facts import HOMES, dunder_all, homes_table
from scripts.relocate_mapping import module_path

#: What an old-form lazy front door binds besides its names (all of it goes when it becomes a stub door).
LAZY_MACHINERY = frozenset(
    ("TYPE_CHECKING", "Any", "importlib", "annotations", HOMES, "__all__", "__getattr__", "__dir__")
)


def isort_order(name: str) -> tuple[int, list[object]]:
    """ruff's RUF022 order ("isort-style"): CONSTANTS, then Classes, then the rest; numbers by value."""
    kind = 0 if name.upper() == name else 1 if name[:1].isupper() else 2
    return kind, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@dataclass
class ImportIndex:
    """Every absolute ``from X import …`` of the tree, by X, and the modules imported as objects."""

    names: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # module → [(importer path, name)]
    objects: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, trees: Mapping[str, ast.Module]) -> ImportIndex:
        """Index the parsed files (path → tree)."""
        index = cls()
        for path, tree in trees.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    for alias in node.names:
                        index.names.setdefault(node.module, []).append((path, alias.name))
                        index.objects.add(f"{node.module}.{alias.name}")
                elif isinstance(node, ast.Import):
                    index.objects.update(alias.name for alias in node.names)
        return index


def bound_names(text: str) -> set[str] | None:
    """What a front door that is not lazy binds at its top level; None when it is regenerated (lazy, blank,
    or not Python)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    if _is_blank(tree) or any(_target(node) == HOMES for node in tree.body):
        return None
    return top_names(tree, imports=True)


def _is_blank(tree: ast.Module) -> bool:
    """A docstring and ``from __future__`` imports at most: a front door to write whole."""
    return all(
        (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        for node in tree.body
    )


class FrontDoors:
    """Regenerates the front doors of a mapping over the rewritten files (path → text)."""

    def __init__(
        self,
        texts: dict[str, str],
        trees: Mapping[str, ast.Module],
        is_module: Callable[[str], bool],
        exports: Iterable[tuple[str, str, str]],
    ) -> None:
        self.texts = texts
        self.trees = trees
        self.is_module = is_module
        self.index = ImportIndex.of(trees)
        self.recorded: dict[tuple[str, str], str] = {(f, n): home for f, n, home in exports}
        self.notes: list[str] = []

    def defining(self, home: str, name: str, depth: int = 0) -> str:
        """The module that defines ``name``, following re-exports from ``home`` (which has it)."""
        tree = self.trees.get(module_path(home, package=False)) or self.trees.get(
            module_path(home, package=True)
        )
        if tree is None or depth > 8 or name in top_names(tree, imports=False) or name in dunder_all(tree):
            return home
        for node in tree.body:
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and self.is_module(node.module)
                and any(a.name == name and a.asname in (None, name) for a in node.names)
            ):
                return self.defining(node.module, name, depth + 1)
        return home

    def regenerate(
        self, front: str, doc: str | None, gained: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The front door's new files, path → text (none when unchanged or when it is not a lazy door; notes
        say what to do by hand). ``gained``: names the mapping moved to it → their modules."""
        path = module_path(front, package=True)
        tree = self.trees.get(path)
        stub = self.texts.get(stub_of(front))
        used = sorted(
            {
                name
                for importer, name in self.index.names.get(front, [])
                if name != "*" and not self.is_module(f"{front}.{name}") and importer != path
            }
        )
        if stub is not None:
            table = read_stub(stub, front) or {}
        elif tree is None or _is_blank(tree) or _is_old_lazy(tree):
            table = homes_table(tree) if tree is not None else {}
        else:
            bound = top_names(tree, imports=True)
            for name in used:
                if name not in bound:
                    self.notes.append(
                        f"{path}: does not bind {name}, which is imported from it: add it by hand"
                    )
            return {}
        table = {**table, **(gained or {})}
        for name in used:
            if name in table:
                continue
            home = self.recorded.get((front, name))
            if home is None:
                self.notes.append(
                    f"{path}: no module is known to hold {name}, which is imported from {front}"
                )
                continue
            table[name] = self.defining(home, name)
        if not table and stub is None and tree is not None and _is_blank(tree):
            return {}  # a docstring-only door that names nothing stays one (contract 7 takes it)
        files = self._from_modules(front, table)
        new_stub = render_stub(front, table)
        if new_stub != stub:
            files[stub_of(front)] = new_stub
        if stub is None:
            docstring = doc or (ast.get_docstring(tree) if tree is not None else None)
            if not docstring:
                self.notes.append(
                    f"{path}: a new front door needs a docstring ([[front]] doc in the mapping)"
                )
                docstring = front
            files[path] = stub_door(_docstring(docstring))
        return {p: t for p, t in files.items() if self.texts.get(p) != t}

    def _from_modules(self, front: str, table: dict[str, str]) -> dict[str, str]:
        """Each name of ``table`` held outside ``front``'s package through a ``_from_*`` module of its own
        (``table`` then names that module); the texts of those modules."""
        outside: dict[str, list[str]] = {}
        for name, home in table.items():
            if not home.startswith(front + "."):
                outside.setdefault(home, []).append(name)
        files = {}
        for home, names in sorted(outside.items()):
            module = from_module(front, home)
            source = self._door_of(home, front, names)
            file = module_path(module, package=False)
            known = self.trees.get(file)
            earlier = dunder_all(known) if known is not None else []
            files[file] = from_text(source, home, [*earlier, *names])
            table.update(dict.fromkeys(names, module))
        return files

    def _door_of(self, home: str, front: str, names: list[str]) -> str:
        """The nearest door above ``home`` (not above ``front``) whose stub names ``names``; else ``home``."""
        parts = home.split(".")
        for end in range(len(parts) - 1, 0, -1):
            door = ".".join(parts[:end])
            if front == door or front.startswith(door + "."):
                break
            stub = self.texts.get(stub_of(door))
            table = read_stub(stub, door) if stub is not None else None
            if table is not None and all(n in table for n in names):
                return door
        return home


def _is_old_lazy(tree: ast.Module) -> bool:
    """An old-form lazy front door with nothing of its own (all of it is rewritten as a stub door)."""
    return any(_target(node) == HOMES for node in tree.body) and top_names(tree, imports=True) <= (
        LAZY_MACHINERY | set(homes_table(tree))
    )


def _target(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _docstring(doc: str) -> str:
    """A docstring of ``doc``'s paragraphs, each wrapped at 110 characters."""
    paragraphs = [" ".join(p.split()) for p in doc.replace('"' * 3, "'" * 3).strip().split("\n\n")]
    lines = textwrap.wrap('"' * 3 + paragraphs[0], width=110)
    for paragraph in paragraphs[1:]:
        lines += ["", *textwrap.wrap(paragraph, width=110)]
    if len(lines) == 1 and len(lines[0]) <= 107:
        return lines[0] + '"' * 3
    return "\n".join([*lines, '"' * 3])
