"""Front doors regenerated from their use (``scripts/relocate.py``, step 4).

A front door is a package's ``__init__.py`` that other rooms import names from. A *lazy* one (the pattern of
``verifier/signatures/__init__.py``) keeps a ``TYPE_CHECKING`` block, a ``_HOMES`` table (name → the module
that has it), ``__all__`` and a module ``__getattr__`` that imports a name's module on first use. After a
move, each lazy front door named by the mapping is regenerated to export exactly the names that modules
import from it, each from the module that defines it; a new front door (or a docstring-only one) is written
whole. A front door that is not lazy is not rewritten: a name imported from it that it does not bind is
reported.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scripts.layout_facts import HOMES, dunder_all, homes_table
from scripts.relocate_mapping import module_path

#: What every lazy front door ends with.
LAZY_TAIL = """

def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
"""


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


def _top_names(tree: ast.Module, *, imports: bool) -> set[str]:
    """Names a module binds at its top level: what it defines, and with ``imports`` what it imports too
    (the ``TYPE_CHECKING`` and other conditional bindings included)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
        elif imports and isinstance(node, ast.Import | ast.ImportFrom):
            found.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif imports and isinstance(node, ast.If):
            found.update(_top_names(ast.Module(body=node.body + node.orelse, type_ignores=[]), imports=True))
    return found


def bound_names(text: str) -> set[str] | None:
    """What a front door that is not lazy binds at its top level; None when it is regenerated (lazy, blank,
    or not Python)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    if _is_blank(tree) or any(_target(node) == HOMES for node in tree.body):
        return None
    return _top_names(tree, imports=True)


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
        if tree is None or depth > 8 or name in _top_names(tree, imports=False) or name in dunder_all(tree):
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

    def regenerate(self, front: str, doc: str | None) -> str | None:
        """The front door's new text (None when unchanged or not lazy; notes say what to do by hand)."""
        path = module_path(front, package=True)
        text = self.texts.get(path)
        tree = self.trees.get(path)
        own = _top_names(tree, imports=False) if tree is not None else set()
        used = sorted(
            {
                name
                for importer, name in self.index.names.get(front, [])
                if name != "*" and not self.is_module(f"{front}.{name}") and importer != path
            }
        )
        existing = homes_table(tree) if tree is not None else {}
        lazy = tree is not None and any(_target(node) == HOMES for node in tree.body)
        if tree is not None and not lazy and not _is_blank(tree):
            bound = _top_names(tree, imports=True)
            for name in used:
                if name not in bound:
                    self.notes.append(
                        f"{path}: does not bind {name}, which is imported from it: add it by hand"
                    )
            return None
        homes: dict[str, str] = {}
        for name in used:
            if name in own:
                continue
            home = self.recorded.get((front, name)) or existing.get(name)
            if home is None:
                self.notes.append(
                    f"{path}: no module is known to hold {name}, which is imported from {front}"
                )
                continue
            homes[name] = self.defining(home, name)
        if front in self.index.objects:  # imported as a module: any name may be used, keep them all
            homes = {**existing, **homes}
        if dropped := sorted(set(existing) - set(homes)):
            self.notes.append(
                f"{path}: no longer exports {', '.join(dropped)} (nothing imports them; a string that names"
                " them, importlib or deferred(), would now fail)"
            )
        exported = sorted(
            {*homes, *(n for n in dunder_all(tree) if n in own)} if tree else homes, key=isort_order
        )
        if tree is None or _is_blank(tree):
            docstring = doc or (ast.get_docstring(tree) if tree is not None else None)
            if not docstring:
                self.notes.append(
                    f"{path}: a new front door needs a docstring ([[front]] doc in the mapping)"
                )
                docstring = front
            new = _whole(docstring, homes, exported)
        else:
            new = self._sections(text or "", tree, homes, exported)
        return None if new == text else new

    def _sections(self, text: str, tree: ast.Module, homes: dict[str, str], exported: list[str]) -> str:
        spans: list[tuple[int, int, str]] = []
        lines = text.splitlines(keepends=True)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line))

        def span(node: ast.stmt) -> tuple[int, int]:
            end = node.end_lineno or node.lineno
            return starts[node.lineno - 1], starts[end]

        checking = next(
            (
                n
                for n in tree.body
                if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
            ),
            None,
        )
        table = next(n for n in tree.body if HOMES in {_target(n)})
        names = next((n for n in tree.body if _target(n) == "__all__"), None)
        block = _type_checking(homes)
        if checking is not None and not block:
            self.notes.append("a front door exports nothing now: delete its TYPE_CHECKING import by hand")
        if checking is not None:
            spans.append((*span(checking), block))
        elif block:
            spans.append((span(table)[0], span(table)[0], block + "\n"))
        spans.append((*span(table), _homes(homes)))
        if names is not None:
            spans.append((*span(names), _all(exported)))
        for start, end, new in sorted(spans, reverse=True):
            text = text[:start] + new + text[end:]
        if block and "TYPE_CHECKING" not in {
            a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names
        }:
            text = re.sub(
                r"^(from __future__ import annotations\n)",
                r"\1\nfrom typing import TYPE_CHECKING\n",
                text,
                count=1,
                flags=re.M,
            )
        return text


def _target(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _by_home(homes: dict[str, str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, home in sorted(homes.items(), key=lambda item: (item[1], isort_order(item[0]))):
        grouped.setdefault(home, []).append(name)
    return grouped


def _type_checking(homes: dict[str, str]) -> str:
    if not homes:
        return ""
    lines = ["if TYPE_CHECKING:\n"]
    lines.extend(
        f"    from {home} import {', '.join(sorted(names))}\n" for home, names in _by_home(homes).items()
    )
    return "".join(lines)


def _homes(homes: dict[str, str]) -> str:
    lines = ["_HOMES: dict[str, str] = {\n"]
    for home, names in _by_home(homes).items():
        if len(names) == 1:
            lines.append(f'    "{names[0]}": "{home}",\n')
        else:
            quoted = ", ".join(f'"{name}"' for name in names)
            lines.append(f'    **dict.fromkeys(({quoted}), "{home}"),\n')
    lines.append("}\n")
    return "".join(lines) if homes else "_HOMES: dict[str, str] = {}\n"


def _all(exported: list[str]) -> str:
    if not exported:
        return "__all__: list[str] = []\n"
    return "__all__ = [\n" + "".join(f'    "{name}",\n' for name in exported) + "]\n"


def _docstring(doc: str) -> str:
    """A docstring of ``doc``'s paragraphs, each wrapped at 110 characters."""
    paragraphs = [" ".join(p.split()) for p in doc.replace('"' * 3, "'" * 3).strip().split("\n\n")]
    lines = textwrap.wrap('"' * 3 + paragraphs[0], width=110)
    for paragraph in paragraphs[1:]:
        lines += ["", *textwrap.wrap(paragraph, width=110)]
    if len(lines) == 1 and len(lines[0]) <= 107:
        return lines[0] + '"' * 3
    return "\n".join([*lines, '"' * 3])


def _whole(doc: str, homes: dict[str, str], exported: list[str]) -> str:
    typing = "from typing import TYPE_CHECKING, Any" if homes else "from typing import Any"
    docstring = _docstring(doc)
    parts = [docstring, "", "from __future__ import annotations", "", "import importlib", typing, ""]
    if homes:
        parts.append(_type_checking(homes))
    parts.extend(["#: Where each public name lives.", _homes(homes), _all(exported).rstrip("\n")])
    return "\n".join(parts) + "\n" + LAZY_TAIL
