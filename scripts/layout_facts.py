"""The layout's figures: public and private modules, import cycles at any depth, what is used outside.

Usage, from the repository root: ``python3 scripts/layout_facts.py [--root DIR]`` (plain Python, no
project imports, so it runs on any checkout). It prints

* the modules of each package and of each folder directly below one, public and private (a module is
  private when a part of its dotted name starts with ``_``, not ``__``);
* the import cycles (strongly connected components of the module graph) of three graphs: every import
  (top level and inside functions), import time only, and every import with the ``TYPE_CHECKING`` ones;
* the folder-level tangles (each folder's own modules as one node);
* per package, the public modules that no shipped module outside the package imports.

An import is read from the AST: ``import a.b`` names ``a.b``; ``from a import b`` names ``a`` and, when
``a.b`` is a module, ``a.b``; relative imports are resolved. :class:`Project` is also the import graph
that ``tests/test_contracts.py`` checks its contracts over (with the lazy re-exports of front doors as
edges: the modules a door's stub ``__init__.pyi`` names for lazy_loader, or those of a ``_HOMES`` table).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

#: The shipped packages, in layer order (each may import only those after it); absent ones are skipped.
PACKAGES = ("trtguard", "webhook", "decisionlog", "policies", "verifier")
#: The name of a table of lazily loaded names in a front door of the old form (``scripts/relocate_fronts.py``
#: writes it; a front door now names its names in a stub beside it, ``__init__.pyi``, read by lazy_loader).
HOMES = "_HOMES"


@dataclass(frozen=True)
class Module:
    """One shipped module: its dotted name, its file, and whether it is a package's ``__init__``."""

    name: str
    path: Path
    is_package: bool

    @property
    def package(self) -> str:
        """The top-level package the module belongs to."""
        return self.name.split(".", maxsplit=1)[0]

    @property
    def folder(self) -> str:
        """The package (folder) holding the module; a package's ``__init__`` is its own folder."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Edge:
    """One import of a project module by another, and where it happens."""

    source: str
    target: str
    line: int
    in_function: bool
    type_checking: bool
    #: A name of the source's ``_HOMES`` table (loaded on first use, never at import time).
    lazy: bool = False

    def counts_in(self, *, type_checking: bool, top_only: bool, homes: bool) -> bool:
        """Whether the edge belongs to a graph built with these options."""
        if self.lazy:
            return homes and not top_only
        if self.type_checking and not type_checking:
            return False
        return not (top_only and self.in_function)


def is_private(name: str) -> bool:
    """Whether a part of the dotted name starts with ``_`` (and not ``__``)."""
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _assigned(node: ast.stmt, name: str) -> ast.expr | None:
    """The value a top-level statement assigns to ``name`` (``x = …`` or ``x: T = …``), if it does."""
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
        return node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
        return node.value
    return None


def homes_table(tree: ast.Module) -> dict[str, str]:
    """The ``_HOMES`` table of a front door (name → module), as literal entries or ``**dict.fromkeys``."""
    table: dict[str, str] = {}
    for node in tree.body:
        value = _assigned(node, HOMES)
        if not isinstance(value, ast.Dict):
            continue
        for key, item in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(item, ast.Constant):
                table[str(key.value)] = str(item.value)
            elif key is None and isinstance(item, ast.Call) and len(item.args) == 2:
                names, home = item.args
                if isinstance(names, ast.Tuple | ast.List) and isinstance(home, ast.Constant):
                    keys = [str(n.value) for n in names.elts if isinstance(n, ast.Constant)]
                    table.update(dict.fromkeys(keys, str(home.value)))
    return table


def stub_table(package: str, stub: ast.Module) -> dict[str, str]:
    """A front door's stub (``from .m import A as A``, read by lazy_loader): name → the module holding it."""
    table: dict[str, str] = {}
    for node in stub.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            table.update(dict.fromkeys((alias.name for alias in node.names), f"{package}.{node.module}"))
    return table


def dunder_all(tree: ast.Module) -> list[str]:
    """The names of a module's literal ``__all__`` (empty when it has none)."""
    for node in tree.body:
        value = _assigned(node, "__all__")
        if isinstance(value, ast.List | ast.Tuple):
            return [str(e.value) for e in value.elts if isinstance(e, ast.Constant)]
    return []


class Project:
    """The shipped modules of a checkout and their imports, read from the AST (nothing is imported)."""

    def __init__(self, root: Path, packages: Iterable[str] = PACKAGES) -> None:
        self.root = root
        self.packages = tuple(p for p in packages if (root / p / "__init__.py").is_file())
        self.modules: dict[str, Module] = {}
        for package in self.packages:
            for path in sorted((root / package).rglob("*.py")):
                parts = list(path.relative_to(root).with_suffix("").parts)
                is_package = parts[-1] == "__init__"
                if is_package:
                    parts.pop()
                if all(part.isidentifier() for part in parts):
                    self.modules[".".join(parts)] = Module(".".join(parts), path, is_package)

    def tree(self, name: str) -> ast.Module:
        """The parsed source of a module."""
        return self._trees[name]

    def stub(self, name: str) -> ast.Module | None:
        """The parsed stub (``__init__.pyi``) of a package's front door, if it has one."""
        path = self.modules[name].path.with_suffix(".pyi")
        if not (self.modules[name].is_package and path.is_file()):
            return None
        return ast.parse(path.read_text(), str(path))

    def homes(self, name: str) -> dict[str, str]:
        """A front door's lazily loaded names → their modules (its stub's, else its ``_HOMES`` table's)."""
        stub = self.stub(name)
        return stub_table(name, stub) if stub is not None else homes_table(self.tree(name))

    @cached_property
    def _trees(self) -> dict[str, ast.Module]:
        return {name: ast.parse(m.path.read_text(), str(m.path)) for name, m in self.modules.items()}

    @cached_property
    def edges(self) -> list[Edge]:
        """Every import between project modules (self-imports left out), in module order."""
        return [edge for name in self.modules for edge in self._edges_of(name)]

    def _edges_of(self, name: str) -> Iterator[Edge]:
        module = self.modules[name]
        package = name if module.is_package else name.rpartition(".")[0]

        def resolve(node: ast.ImportFrom) -> str | None:
            if node.level == 0:
                return node.module
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            return ".".join([*base, node.module] if node.module else base) or None

        def edge(target: str, node: ast.stmt, in_function: bool, type_checking: bool) -> Iterator[Edge]:
            if target in self.modules and target != name:
                yield Edge(name, target, node.lineno, in_function, type_checking)

        def visit(nodes: Iterable[ast.AST], in_function: bool, type_checking: bool) -> Iterator[Edge]:
            for node in nodes:
                if isinstance(node, ast.If) and _is_type_checking(node.test):
                    yield from visit(node.body, in_function, True)
                    yield from visit(node.orelse, in_function, type_checking)
                elif isinstance(node, ast.ImportFrom):
                    if (source := resolve(node)) is not None:
                        members = [f"{source}.{alias.name}" for alias in node.names]
                        # `from package import submodule` runs only the submodule: the package itself is
                        # loaded first by any import below it, so an edge to it would be a cycle in name only.
                        names = members if all(t in self.modules for t in members) else [source, *members]
                        for target in names:
                            yield from edge(target, node, in_function, type_checking)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        yield from edge(alias.name, node, in_function, type_checking)
                else:
                    inner = in_function or isinstance(
                        node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                    )
                    yield from visit(ast.iter_child_nodes(node), inner, type_checking)

        seen: set[tuple[str, bool, bool]] = set()
        for found in visit(self.tree(name).body, False, False):
            key = (found.target, found.in_function, found.type_checking)
            if key not in seen:
                seen.add(key)
                yield found
        if module.is_package:
            homes = sorted(set(self.homes(name).values()))
            if self.stub(name) is not None:  # what mypy reads: the TYPE_CHECKING imports of the old form
                yield from (Edge(name, home, 0, False, True) for home in homes if home in self.modules)
            for home in homes:
                if home in self.modules and home != name:
                    yield Edge(name, home, 0, in_function=False, type_checking=False, lazy=True)

    def graph(
        self, *, type_checking: bool = False, top_only: bool = False, homes: bool = False
    ) -> dict[str, set[str]]:
        """Module → the modules it imports, counting the edges these options select."""
        graph: dict[str, set[str]] = {name: set() for name in self.modules}
        for edge in self.edges:
            if edge.counts_in(type_checking=type_checking, top_only=top_only, homes=homes):
                graph[edge.source].add(edge.target)
        return graph

    def folder_graph(self) -> dict[str, set[str]]:
        """Folder → the folders its modules import (every import, TYPE_CHECKING excluded)."""
        graph: dict[str, set[str]] = {m.folder: set() for m in self.modules.values()}
        for source, targets in self.graph().items():
            for target in targets:
                if (a := self.modules[source].folder) != (b := self.modules[target].folder):
                    graph[a].add(b)
        return graph


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The cycles of a graph: its strongly connected components of more than one node, each sorted.

    Tarjan's algorithm, iterative (no recursion limit), over the nodes in sorted order.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def module_counts(project: Project) -> dict[str, tuple[int, int]]:
    """(public, private) per top-level package and per package folder directly below one."""
    counts: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name in project.modules:
        parts = name.split(".")
        groups = [parts[0]]
        second = ".".join(parts[:2])
        if len(parts) > 1 and (m := project.modules.get(second)) is not None and m.is_package:
            groups.append(second)
        for group in groups:
            counts[group][is_private(name)] += 1
    return {group: (public, private) for group, (public, private) in sorted(counts.items())}


def unused_outside(project: Project) -> dict[str, tuple[int, int]]:
    """Per package: (public modules, those that no shipped module outside the package imports)."""
    graph = project.graph()
    figures = {}
    for package in project.packages:
        public = [m for m in project.modules if m.split(".")[0] == package and not is_private(m)]
        used = {t for source, targets in graph.items() if source.split(".")[0] != package for t in targets}
        figures[package] = (len(public), sum(1 for m in public if m not in used))
    return figures


#: The three graphs of the cycle figures: (label, options of :meth:`Project.graph`).
GRAPHS: tuple[tuple[str, dict[str, bool]], ...] = (
    ("every import", {}),
    ("import time only", {"top_only": True}),
    ("with TYPE_CHECKING", {"type_checking": True}),
)


def report(project: Project) -> Iterator[str]:
    """The printed figures, line by line."""
    counts = module_counts(project)
    public = sum(counts[p][0] for p in project.packages)
    private = sum(counts[p][1] for p in project.packages)
    total = public + private
    share = 100 * private / max(total, 1)
    yield f"modules {total}: public {public}, private {private} ({share:.0f} % private)"
    for group, (pub, priv) in counts.items():
        yield f"  {group:30} public {pub:3}  private {priv:3}  ({100 * priv / (pub + priv):.0f} %)"
    for label, options in GRAPHS:
        cycles = strongly_connected(project.graph(**options))
        yield f"cycles ({label}): {len(cycles)}"
        yield from (f"    {' <-> '.join(cycle)}" for cycle in cycles)
    tangles = strongly_connected(project.folder_graph())
    yield f"folder tangles: {len(tangles)}"
    yield from (f"    {' <-> '.join(tangle)}" for tangle in tangles)
    for package, (pub, unused) in unused_outside(project).items():
        yield f"{package}: {pub} public modules, {unused} used by no shipped module outside {package}"


def main(argv: list[str] | None = None) -> int:
    """Print the figures of the checkout at ``--root`` (default: the current folder)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository root")
    args = parser.parse_args(argv)
    project = Project(args.root)
    if not project.packages:
        print(f"no package of {', '.join(PACKAGES)} under {args.root}", file=sys.stderr)
        return 2
    for line in report(project):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
