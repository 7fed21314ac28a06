"""Rewriting one Python file's references to moved modules (``scripts/relocate.py``, step 2).

What is rewritten, in place, keeping everything else of the file as it was:

* ``from OLD import a, b`` → ``from FRONT import a, b`` for a shipped importer outside the front door's room,
  else ``from NEW import a, b``; ``from pkg import moved_module`` → ``from new_pkg import new_leaf as
  moved_module``; relative imports are resolved first (and written absolute when they change);
* ``import OLD [as x]`` → ``import NEW [as x]``, and the ``OLD.attr`` chains of a plain ``import OLD``;
* every string and comment: old dotted names and paths (``_HOMES`` values, ``deferred("…")``,
  ``mock.patch("…")`` targets, ``python -m …``, docstrings);
* a path spelled from the root in parts (``REPO / "verifier" / "engine" / "_private" / "child.py"``).

A path built otherwise from the old folders' names (``Path(__file__).parent / "_private" / "child.py"``) is
reported for a hand edit, as is anything the file's syntax keeps from being read.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from scripts.relocate_mapping import NameMap

#: The module an import statement names: ``from MODULE import`` or ``import MODULE``.
_MODULE = re.compile(r"(?:from|import)\s+(\.*[\w.]*)")


@dataclass(frozen=True)
class PythonFile:
    """Where a Python file is: its path and dotted name after the move, its dotted name before it."""

    path: str
    module: str
    old_module: str
    is_package: bool
    #: Part of a shipped package (tests, bench and scripts may import private modules).
    shipped: bool


@dataclass
class Rewritten:
    """A file's new text, how many references changed, the names it now imports from front doors, notes."""

    text: str
    changes: int = 0
    #: (front door, name, the module that has the name) for each import redirected to a front door.
    exports: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str
    structural: bool = True


def in_room(module: str, front: str) -> bool:
    """Whether a module is inside a front door's room (the front door itself or below it)."""
    return module == front or module.startswith(front + ".")


class _Source:
    """The text with line offsets, to turn AST (UTF-8 byte) and token (character) positions into offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode()[:byte_col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def indent(self, node: ast.stmt) -> str:
        line = self.lines[node.lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def run_span(self, run: list[ast.Constant]) -> tuple[int, int]:
        return self.span(run[0])[0], self.span(run[-1])[1]

    def trailing_comment(self, node: ast.stmt) -> str:
        rest = self.text[self.span(node)[1] : self.starts[node.end_lineno or node.lineno]]
        found = re.search(r"#.*", rest)
        return found.group(0) if found else ""


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


class _Rewriter:
    def __init__(
        self,
        text: str,
        file: PythonFile,
        names: NameMap,
        is_module: Callable[[str], bool],
        provides: Callable[[str, str], bool],
    ) -> None:
        self.src = _Source(text)
        self.file = file
        self.names = names
        self.is_module = is_module
        self.provides = provides
        self.edits: list[_Edit] = []
        self.result = Rewritten(text)
        self.chained: set[str] = set()  # old names bound by a plain ``import OLD``

    def note(self, line: int, message: str) -> None:
        self.result.notes.append(f"{self.file.path}:{line}: {message}")

    # -- imports -------------------------------------------------------------------------------------------
    def resolve(self, node: ast.ImportFrom) -> str | None:
        if node.level == 0:
            return node.module
        base = (
            self.file.old_module.split(".") if self.file.is_package else self.file.old_module.split(".")[:-1]
        )
        base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, node.module] if node.module else base) or None

    def import_from(self, node: ast.ImportFrom) -> None:
        source = self.resolve(node)
        if source is None:
            self.note(node.lineno, "a relative import above the top package: left as it is")
            return
        source_move, new_source = self.names.lookup(source), self.names.map(source)
        targets: list[tuple[str, str, str | None]] = []  # (module, name, as)
        for alias in node.names:
            full = f"{source}.{alias.name}"
            full_move = self.names.lookup(full)
            moved_alone = alias.name != "*" and full_move is not None and full_move is not source_move
            if moved_alone and (new_full := self.names.map(full)) is not None:
                parent, _, leaf = new_full.rpartition(".")
                bound = alias.asname or (alias.name if leaf != alias.name else None)
                targets.append((parent, leaf, bound))
                continue
            if new_source is None or source_move is None:
                targets.append((source, alias.name, alias.asname))
                continue
            front = source_move.front
            if (
                front is not None
                and self.file.shipped
                and not in_room(self.file.module, front)
                and alias.name != "*"
                and not self.is_module(f"{new_source}.{alias.name}")
                and self.provides(front, alias.name)
            ):
                targets.append((front, alias.name, alias.asname))
                if new_source != front:
                    self.result.exports.append((front, alias.name, new_source))
            else:
                targets.append((new_source, alias.name, alias.asname))
        unchanged = node.level == 0 and all(
            module == source and name == alias.name and bound == alias.asname
            for (module, name, bound), alias in zip(targets, node.names, strict=True)
        )
        moved = node.level > 0 and self.file.old_module != self.file.module
        if unchanged or (node.level > 0 and not moved and [t[0] for t in targets] == [source] * len(targets)):
            return
        modules = {module for module, _, _ in targets}
        same_names = all(
            name == alias.name and bound == alias.asname
            for (_, name, bound), alias in zip(targets, node.names, strict=True)
        )
        if len(modules) == 1 and same_names and "" not in modules:
            self.replace_module(node, modules.pop())
        else:
            self.replace_statement(node, _from_statements(targets))

    def import_plain(self, node: ast.Import) -> None:
        parts = []
        changed = False
        for alias in node.names:
            new = self.names.map(alias.name)
            if new is not None and alias.asname is None:
                self.chained.add(alias.name)
            changed |= new is not None
            name = new or alias.name
            parts.append(f"{name} as {alias.asname}" if alias.asname else name)
        if changed and len(node.names) == 1:
            self.replace_module(node, parts[0].partition(" as ")[0])
        elif changed:
            self.replace_statement(node, [f"import {', '.join(parts)}"])

    def replace_module(self, node: ast.Import | ast.ImportFrom, module: str) -> None:
        """Only the module's name changes: everything else of the statement (comments too) stays."""
        start, end = self.src.span(node)
        found = _MODULE.match(self.src.text, start, end)
        if found is None:
            self.note(node.lineno, f"an import I cannot read: rewrite it by hand to name {module}")
            return
        self.edits.append(_Edit(found.start(1), found.end(1), module))
        self.result.changes += 1

    def replace_statement(self, node: ast.stmt, statements: list[str]) -> None:
        start, end = self.src.span(node)
        if "#" in self.src.text[start:end]:
            self.note(
                node.lineno, "an import split in two lost the comments inside it: put them back by hand"
            )
        comment = self.src.trailing_comment(node)
        joiner = (f"  {comment}" if comment else "") + "\n" + self.src.indent(node)
        self.edits.append(_Edit(start, end, joiner.join(statements)))
        self.result.changes += 1

    # -- attribute chains of plain imports -----------------------------------------------------------------
    def chains(self, tree: ast.Module, skip: set[int]) -> None:
        tops = {name.split(".")[0] for name in self.chained}
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or id(node) in inner or id(node) in skip:
                continue
            dotted = _dotted(node)
            if dotted is None or dotted.split(".")[0] not in tops:
                continue
            prefix: ast.expr = node
            while isinstance(prefix, ast.Attribute):
                name = _dotted(prefix)
                new = self.names.map(name) if name else None
                if new is not None and self.is_module(new):
                    if prefix.lineno != prefix.end_lineno:
                        self.note(prefix.lineno, f"{name} spans lines: rewrite it by hand to {new}")
                    else:
                        start, end = self.src.span(prefix)
                        self.edits.append(_Edit(start, end, new))
                        self.result.changes += 1
                    break
                prefix = prefix.value

    # -- paths spelled in parts ----------------------------------------------------------------------------
    def paths(self, tree: ast.Module) -> None:
        lefts = {id(n.left) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)}
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and id(node) not in lefts:
                for run in _constant_runs(_div_operands(node)):
                    self.path_run(run)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("joinpath", "with_name")
            ):
                for run in _constant_runs(node.args):
                    self.path_run(run, fixable=False)

    def path_run(self, run: list[ast.Constant], *, fixable: bool = True) -> None:
        parts = [str(c.value) for c in run]
        joined = "/".join(parts)
        stem, suffix = (joined[:-3], ".py") if joined.endswith(".py") else (joined, "")
        new = self.names.map(stem.replace("/", ".")) if "." not in stem else None
        if new is not None and len(parts) == 1:
            return  # one string: its path is rewritten with the other strings
        if fixable and new is not None:
            start, end = self.src.run_span(run)
            spelled = (new.replace(".", "/") + suffix).split("/")
            self.edits.append(_Edit(start, end, " / ".join(json.dumps(part) for part in spelled)))
            self.result.changes += 1
            return
        for old, moved in self.names.files():
            if old.split("/")[-len(parts) :] == parts:
                self.note(
                    run[0].lineno, f"a path built from {joined!r} may name {old} (now {moved}): check it"
                )
                return

    # -- strings and comments ------------------------------------------------------------------------------
    def tokens(self) -> None:
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(self.src.text).readline))
        except (tokenize.TokenError, SyntaxError) as error:
            self.note(1, f"cannot read its tokens ({error}): strings and comments left as they are")
            return
        for token in tokens:
            if token.type not in (tokenize.STRING, tokenize.COMMENT):
                continue
            new, count = self.names.rewrite(token.string)
            if count:
                start = self.src.starts[token.start[0] - 1] + token.start[1]
                end = self.src.starts[token.end[0] - 1] + token.end[1]
                self.edits.append(_Edit(start, end, new, structural=False))
                self.result.changes += count

    def apply(self) -> str:
        structural = sorted((e for e in self.edits if e.structural), key=lambda e: e.start)
        kept = list(structural)
        for edit in self.edits:
            if not edit.structural and not any(s.start < edit.end and edit.start < s.end for s in structural):
                kept.append(edit)
        text = self.src.text
        last = len(text) + 1
        for edit in sorted(kept, key=lambda e: e.start, reverse=True):
            if edit.end > last:
                self.note(1, "overlapping rewrites: check this file by hand")
                continue
            text = text[: edit.start] + edit.text + text[edit.end :]
            last = edit.start
        return text


def _from_statements(targets: list[tuple[str, str, str | None]]) -> list[str]:
    """``from MODULE import …`` per module; a module that became a top-level package is imported plainly."""
    grouped: dict[str, list[str]] = {}
    for module, name, bound in targets:
        grouped.setdefault(module, []).append(f"{name} as {bound}" if bound else name)
    return [
        f"from {module} import {', '.join(names)}" if module else f"import {', '.join(names)}"
        for module, names in grouped.items()
    ]


def _div_operands(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return [*_div_operands(node.left), node.right]
    return [node]


def _constant_runs(operands: list[ast.expr]) -> Iterator[list[ast.Constant]]:
    run: list[ast.Constant] = []
    for operand in [*operands, None]:
        if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
            run.append(operand)
            continue
        if run:
            yield run
        run = []


def rewrite_python(
    text: str,
    file: PythonFile,
    names: NameMap,
    is_module: Callable[[str], bool],
    provides: Callable[[str, str], bool] | None = None,
) -> Rewritten:
    """The file's text with its references to moved modules rewritten (see the module docstring).

    ``provides(front, name)`` says whether a front door gives a name (a lazy one, regenerated after the
    move, gives every name; one that is not gives what it binds): an import of a name it does not give
    keeps naming the module. Without it every front door gives every name.
    """
    rewriter = _Rewriter(text, file, names, is_module, provides or (lambda _front, _name: True))
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        rewriter.note(
            error.lineno or 1, f"not valid Python ({error.msg}): only strings and comments rewritten"
        )
        rewriter.tokens()
        rewriter.result.text = rewriter.apply()
        return rewriter.result
    imports: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            rewriter.import_from(node)
        elif isinstance(node, ast.Import):
            rewriter.import_plain(node)
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.update(id(child) for child in ast.walk(node))
    if rewriter.chained:
        rewriter.chains(tree, imports)
    rewriter.paths(tree)
    rewriter.tokens()
    rewriter.result.text = rewriter.apply()
    return rewriter.result
