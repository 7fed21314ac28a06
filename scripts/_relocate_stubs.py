"""Front doors of the stub form, for ``scripts/relocate.py`` and ``scripts/relocate_fronts.py``.

A stub door is its docstring and ``lazy_loader.attach_stub``; the stub beside it (``__init__.pyi``) names each
public name once, ``from .m import A as A``, one line per module of its own package (contract 7 of
``tests/support/contracts.py``). A name of another room comes through a ``_from_<room>_<module>.py`` of the
door's package that imports it from that room's door. Here a stub is read as a table (name → the module that
holds it, absolute) and written back from one in contract 7's order, so that a move rewrites a stub's lines,
a name that leaves the package leaves its stub, and an import through a door that lost a name follows it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field

from scripts.layout_facts import dunder_all, stub_table
from scripts.relocate_mapping import NameMap
from scripts.relocate_python import in_room

#: The one statement of a stub door (after its docstring and ``import lazy_loader``).
ATTACH_STUB = "__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)"
STUB = "/__init__.pyi"


def package_of_stub(path: str) -> str | None:
    """The dotted package whose stub ``path`` is (``a/b/__init__.pyi`` → ``a.b``), None for another file."""
    return path[: -len(STUB)].replace("/", ".") if path.endswith(STUB) else None


def stub_of(package: str) -> str:
    """The path of a package's stub."""
    return package.replace(".", "/") + STUB


def read_stub(text: str, package: str) -> dict[str, str] | None:
    """A stub's names → the modules that hold them (absolute); None when it is not Python."""
    try:
        return stub_table(package, ast.parse(text))
    except SyntaxError:
        return None


def member_order(name: str) -> tuple[int, str]:
    """ruff's order of imported names (order-by-type), as contract 7 checks it."""
    return (0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2), name


def render_stub(package: str, table: Mapping[str, str]) -> str:
    """A stub naming ``table`` (every module inside ``package``): modules in order, names in ruff's order."""
    grouped: dict[str, list[str]] = {}
    for name, home in table.items():
        grouped.setdefault(home[len(package) + 1 :], []).append(name)
    lines = []
    for module in sorted(grouped):
        names = [f"{n} as {n}" for n in sorted(grouped[module], key=member_order)]
        line = f"from .{module} import {', '.join(names)}"
        if len(line) > 110:
            line = f"from .{module} import (\n" + "".join(f"    {n},\n" for n in names) + ")"
        lines.append(line + "\n")
    return "".join(lines)


def stub_door(doc: str) -> str:
    """The ``__init__.py`` of a stub door with this docstring (already quoted)."""
    return f"{doc}\n\nimport lazy_loader\n\n{ATTACH_STUB}\n"


@dataclass
class MovedStub:
    """A stub after the moves: its text, the names that left its package (→ their modules now), and the
    names the mapping gives another front door (front → {name: module})."""

    text: str
    left: dict[str, str] = field(default_factory=dict)
    gained: dict[str, dict[str, str]] = field(default_factory=dict)


def relocated_stub(
    text: str, old_package: str, new_package: str, names: NameMap, after: Container[str]
) -> MovedStub:
    """``text``, a stub of ``old_package`` now ``new_package``'s, with its lines naming the modules after the
    moves; a name now outside the package leaves it, for the door its move names (if a stub door) to gain."""
    table = read_stub(text, old_package)
    if table is None:
        return MovedStub(text)
    kept, moved = {}, MovedStub(text)
    for name, home in table.items():
        new = names.map(home) or home
        if new.startswith(new_package + "."):
            kept[name] = new
            continue
        moved.left[name] = new
        move = names.lookup(home)
        if move is not None and move.front is not None and stub_of(move.front) in after:
            moved.gained.setdefault(move.front, {})[name] = new
    if kept != table:
        moved.text = render_stub(new_package, kept)
    return moved


def imports_from(tree: ast.Module, homes: set[str], name: str) -> bool:
    """Whether a module imports ``name`` from one of ``homes``, or one of ``homes`` as a module object."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if (node.module in homes and alias.name == name) or f"{node.module}.{alias.name}" in homes:
                    return True
        elif isinstance(node, ast.Import) and any(alias.name in homes for alias in node.names):
            return True
    return False


def redirect_lost(
    texts: Mapping[str, str],
    lost: Mapping[str, Mapping[str, str]],
    gained: Mapping[str, Mapping[str, str]],
    module_of: Callable[[str], str | None],
) -> tuple[dict[str, str], list[tuple[str, str, str]], list[str]]:
    """Each import of a name through a stub door it left (``lost``: door → {name: module}) redirected to the
    door that gained it (outside that door's room), else to its module: the changed texts, (door, name,
    module) for each name now imported from a door, and a note per door that lost names."""
    changed: dict[str, str] = {}
    exports: list[tuple[str, str, str]] = []
    notes = [
        f"{stub_of(door)}: no longer exports {', '.join(sorted(left))} (moved out of its package; a string"
        " that names them, importlib or deferred(), would now fail)"
        for door, left in lost.items()
    ]
    for door, left in lost.items():
        fronts = {name: front for front, names in gained.items() for name in names}
        for path in sorted(texts):
            module, text = module_of(path), changed.get(path, texts[path])
            if module is None or not re.search(rf"\bfrom {re.escape(door)} import\b", text):
                continue
            targets = {
                name: front if (front := fronts.get(name)) and not in_room(module, front) else home
                for name, home in left.items()
            }
            if (new := redirect_imports(text, door, targets)) != text:
                changed[path] = new
                exports.extend((f, n, left[n]) for n, f in targets.items() if f != left[n])
    return changed, exports, notes


def top_names(tree: ast.Module, *, imports: bool) -> set[str]:
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
            found.update(top_names(ast.Module(body=node.body + node.orelse, type_ignores=[]), imports=True))
    return found


def from_module(front: str, home: str) -> str:
    """The ``_from_<room>_<module>`` of ``front``'s package that brings it the names of ``home``."""
    parts = [part.strip("_") for part in home.split(".")[1:]]
    return f"{front}._from_{'_'.join(parts)}"


def from_text(source: str, home: str, names: Iterable[str]) -> str:
    """A ``_from_*`` module: the names of ``home``, imported from ``source`` (its room's door, or itself)."""
    ordered = sorted(set(names), key=member_order)
    leaf = home.rpartition(".")[2]
    return (
        f'"""Names of ``{source}`` (its ``{leaf}``) for this room\'s stub (docs/ARCHITECTURE.md)."""\n\n'
        f"from {source} import {', '.join(ordered)}\n\n"
        "__all__ = [\n" + "".join(f'    "{n}",\n' for n in ordered) + "]\n"
    )


def redirect_imports(text: str, door: str, targets: Mapping[str, str]) -> str:
    """``text`` with each ``from door import name`` of a name in ``targets`` importing it from its target.

    The other names of the statement stay with the door; a trailing comment stays on the statement.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == door):
            continue
        if not any(alias.name in targets for alias in node.names):
            continue
        grouped: dict[str, list[str]] = {}
        for alias in node.names:
            spelled = f"{alias.name} as {alias.asname}" if alias.asname else alias.name
            grouped.setdefault(targets.get(alias.name, door), []).append(spelled)
        indent = re.match(r"\s*", lines[node.lineno - 1])
        joiner = "\n" + (indent.group(0) if indent else "")
        statements = joiner.join(f"from {m} import {', '.join(names)}" for m, names in grouped.items())
        start = starts[node.lineno - 1] + node.col_offset
        end = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
        edits.append((start, end, statements))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def stub_homes(candidates: Mapping[str, ast.Module], homes: set[str], name: str) -> set[str]:
    """``homes`` (the modules that give ``name``) with every stub door and ``_from_*`` module that re-exports
    it from one of them, transitively (``candidates``: path → tree of the files that name it)."""
    found = set(homes)
    while True:
        more = set()
        for path, tree in candidates.items():
            package = package_of_stub(path)
            if package is not None:
                if stub_table(package, tree).get(name) in found:
                    more.add(package)
            elif path.endswith(".py") and name in dunder_all(tree) and _imports(tree, found, name):
                more.add(path[:-3].replace("/", "."))
        if more <= found:
            return found
        found |= more


def _imports(tree: ast.Module, homes: set[str], name: str) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and node.level == 0
        and node.module in homes
        and any(a.name == name for a in node.names)
        for node in tree.body
    )


def stale_stub_entries(texts: Mapping[str, str], exists: Callable[[str], bool]) -> list[str]:
    """``path:line: what`` for each stub line naming a module that is gone, or a name its module lacks."""
    found = []
    for path, text in sorted(texts.items()):
        package = package_of_stub(path)
        if package is None:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            found.append(f"{path}:1: not Python")
            continue
        for node in tree.body:
            if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
                continue
            home = f"{package}.{node.module}"
            source = texts.get(home.replace(".", "/") + ".py") or texts.get(
                home.replace(".", "/") + "/__init__.py"
            )
            if not exists(home):
                found.append(f"{path}:{node.lineno}: .{node.module} (no module {home})")
                continue
            bound = _bound(source, texts.get(stub_of(home)), home)
            found.extend(
                f"{path}:{node.lineno}: {alias.name} (not in {home})"
                for alias in node.names
                if bound is not None and alias.name not in bound
            )
    return found


def _bound(source: str | None, stub: str | None, home: str) -> set[str] | None:
    """What a module binds (a stub door: its stub's names); None when it cannot be read."""
    if stub is not None:
        table = read_stub(stub, home)
        return None if table is None else set(table)
    try:
        return top_names(ast.parse(source), imports=True) if source is not None else None
    except SyntaxError:
        return None
