"""Compiling a policy expression within static bounds: source length, AST nodes and depth after macro
expansion, comprehensions nested in one another, and a worst-case cost (:mod:`policies.cel._cost`).

Errors point at ``file:line:column`` of the problem inside the policy file.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterator
from typing import Any

from cel_expr_python import cel as _cel
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from policies.cel._cost import estimate
from policies.cel._errors import LANGUAGE_DEFINITION, CelCompileError, status_text
from policies.cel._limits import DEFAULT_LIMITS, CelLimits
from policies.cel._program import CelProgram

__all__ = ["compile_expression"]

_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")


def compile_expression(
    source: str,
    *,
    variables: Collection[str],
    location: str | None = None,
    limits: CelLimits = DEFAULT_LIMITS,
    expect_bool: bool = False,
) -> CelProgram:
    """Compile ``source`` for repeated evaluation, referring to ``variables`` only.

    ``location`` is where the expression starts, ``file:line`` optionally followed by a space and a field
    path (``policy.yaml:12 spec.models.rules.expressions[0].cel``); errors point at ``file:line:column``
    of the problem, the column counted within the expression. With ``expect_bool``, an expression whose
    type is known and is not bool (``1 + 2``) is rejected here rather than at every evaluation.

    Raises :class:`CelCompileError` for syntax and type errors, undeclared names and exceeded limits.
    """
    names = frozenset(variables)
    for name in names:
        if not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"{name!r} cannot be a CEL variable name")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, e.g. from a "\ud800" escape in a JSON policy
        line, column = _line_column(source, exc.start)
        raise _compile_error(
            "the expression is not valid Unicode (a lone surrogate code point)",
            source=source,
            location=location,
            line=line,
            column=column,
            hint="remove the \\uD800-\\uDFFF escape, or write the character it was meant to be",
        ) from None
    if len(source) > limits.max_length:
        raise _compile_error(
            f"the expression is {len(source)} characters long; the limit is {limits.max_length}",
            source=source,
            location=location,
            line=1,
            column=1,
            hint="split it into several rules, each with its own message; a long list of ids or names "
            "(an allow-list) belongs in the built-in rules instead: `vulnerabilities.allow` or an "
            "`allowFrom` file, `components.banned` (docs/scans.md)",
        )
    env = _environment(names)
    try:
        expression = env.compile(source)
    except RuntimeError as exc:
        raise _from_checker(str(exc), source, location, names) from None
    checked = _check_shape(expression.serialize(), source, location, limits)
    cost = estimate(
        checked.expr,
        max_string_length=limits.max_string_length,
        max_list_length=limits.max_list_length,
        max_total_length=limits.max_total_length,
        max_values=limits.max_values,
    )
    if expect_bool:
        result_type = expression.return_type().name()
        if result_type.upper() not in ("BOOL", "DYN"):
            raise _compile_error(
                f"the expression yields {result_type.lower()}, a rule needs true or false",
                source=source,
                location=location,
                line=1,
                column=1,
                hint='compare the value with something, e.g. `x > 0` or `x == "value"`',
            )
    return CelProgram(source, location, names, limits, cost, env, expression)


# --------------------------------------------------------------------------------------------------
# Environments: one per set of variable names, all of them dynamically typed.


@functools.lru_cache(maxsize=32)
def _environment(names: frozenset[str]) -> Any:
    return _cel.NewEnv(variables=dict.fromkeys(sorted(names), _cel.Type.DYN))


# --------------------------------------------------------------------------------------------------
# Compile errors: cel-cpp reports "ERROR: <input>:LINE:COLUMN: message" followed by a source snippet, once
# per problem, inside one status text.

_CHECKER_ERROR = re.compile(r"ERROR: <input>:(-?\d+):(-?\d+): ([^\n]*?)(?: \[[A-Z_]+\])?$", re.MULTILINE)
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")


def _from_checker(status: str, source: str, location: str | None, names: frozenset[str]) -> CelCompileError:
    lines = source.split("\n")
    problems: list[tuple[int, int, str]] = []
    for line_text, column_text, reported in _CHECKER_ERROR.findall(status):
        # -1:-1 marks a problem with no position (the parser's recursion limit): show it at the start
        line, column, text = max(int(line_text), 1), max(int(column_text), 1), reported
        undeclared = _UNDECLARED.search(reported)
        if undeclared:
            column = _name_start(lines[line - 1] if line <= len(lines) else "", column, undeclared.group(1))
            text = f"unknown name '{undeclared.group(1).split('.')[0]}'"
        if (line, column, text) not in problems:
            problems.append((line, column, text))
    if not problems:  # a status without positions: report it whole at the start
        problems = [(1, 1, status_text(status))]
    line, column, text = problems[0]
    if text.startswith("unknown name"):
        hint = f"the variables here are {', '.join(sorted(names))}; check the spelling"
    elif "recursion" in text:
        hint = "the parser allows 32 levels of nesting or repeated operators: group terms with parentheses"
    elif text.startswith("Syntax error"):
        hint = f"fix the syntax at the marked position; the grammar is in {LANGUAGE_DEFINITION}"
    elif "no matching overload" in text:
        hint = "CEL converts no types implicitly: compare like with like, or convert with int(), double()"
    else:
        hint = f"see the CEL language definition: {LANGUAGE_DEFINITION}"
    others = "".join(f"\n  also {lin}:{col}: {what}" for lin, col, what in problems[1:5])
    if len(problems) > 5:
        others += f"\n  and {len(problems) - 5} more"
    return _compile_error(
        text + others, source=source, location=location, line=line, column=column, hint=hint
    )


def _name_start(line: str, column: int, name: str) -> int:
    """Column where the undeclared ``name`` starts.

    The checker names the longest qualified name it tried (``wrkload.metadata.namespace``) and points at
    the last dot; a person looks for the first part.
    """
    start = column - (len(name) - len(name.rsplit(".", 1)[-1]) - 1) if "." in name else column
    return start if line[start - 1 : start - 1 + len(name)] == name else column


def _compile_error(
    what: str, *, source: str, location: str | None, line: int, column: int, hint: str
) -> CelCompileError:
    lines = source.split("\n")
    snippet = lines[line - 1] if 0 < line <= len(lines) else ""
    caret = " " * (max(column, 1) - 1) + "^"
    return CelCompileError(
        f"invalid CEL expression: {what}\n    {snippet}\n    {caret}",
        expression=source,
        location=_position(location, line, column),
        line=line,
        column=column,
        hint=hint,
    )


_LOCATION = re.compile(r"(?P<file>.*?):(?P<line>\d+)(?P<rest>\s.*)?", re.DOTALL)


def _position(location: str | None, line: int, column: int) -> str:
    """``file:line`` of the expression start + a position inside it → ``file:line:column``."""
    if location is None:
        return f"<cel>:{line}:{column}"
    match = _LOCATION.fullmatch(location)
    if match is None:
        return f"{location} (expression {line}:{column})"
    start = int(match.group("line"))
    return f"{match.group('file')}:{start + line - 1}:{column}{match.group('rest') or ''}"


# --------------------------------------------------------------------------------------------------
# Static bounds. The binding hands out the checked AST only as a serialized cel.expr.CheckedExpr, so we
# describe the part of cel-spec's syntax.proto that we walk (field numbers as published there) and let
# protobuf decode it; fields we do not declare are skipped as unknown.

_T = descriptor_pb2.FieldDescriptorProto


def _checked_expr_class() -> type[Any]:
    spec = descriptor_pb2.FileDescriptorProto(
        name="trtguard/cel_ast.proto", package="trtguard.cel_ast", syntax="proto3"
    )

    def message(name: str, *fields: tuple[str, int, int, str | None, bool]) -> descriptor_pb2.DescriptorProto:
        proto = spec.message_type.add(name=name)
        for field_name, number, kind, type_name, repeated in fields:
            proto.field.add(
                name=field_name,
                number=number,
                type=kind,
                type_name=f".trtguard.cel_ast.{type_name}" if type_name else None,
                label=_T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL,
            )
        return proto

    msg, string, i64, i32, raw = _T.TYPE_MESSAGE, _T.TYPE_STRING, _T.TYPE_INT64, _T.TYPE_INT32, _T.TYPE_BYTES
    expr = message(
        "Expr",
        ("id", 2, i64, None, False),
        ("const_expr", 3, msg, "Constant", False),
        ("ident_expr", 4, msg, "Ident", False),
        ("select_expr", 5, msg, "Select", False),
        ("call_expr", 6, msg, "Call", False),
        ("list_expr", 7, msg, "CreateList", False),
        ("struct_expr", 8, msg, "CreateStruct", False),
        ("comprehension_expr", 9, msg, "Comprehension", False),
    )
    expr.oneof_decl.add(name="expr_kind")
    for kind_field in expr.field[1:]:
        kind_field.oneof_index = 0
    constant = message(
        "Constant", ("string_value", 6, string, None, False), ("bytes_value", 7, raw, None, False)
    )
    constant.oneof_decl.add(name="constant_kind")
    for kind_field in constant.field:
        kind_field.oneof_index = 0
    message("Ident", ("name", 1, string, None, False))
    message(
        "Select",
        ("operand", 1, msg, "Expr", False),
        ("field", 2, string, None, False),
        ("test_only", 3, _T.TYPE_BOOL, None, False),
    )
    message(
        "Call",
        ("target", 1, msg, "Expr", False),
        ("function", 2, string, None, False),
        ("args", 3, msg, "Expr", True),
    )
    message("CreateList", ("elements", 1, msg, "Expr", True))
    message("Entry", ("map_key", 3, msg, "Expr", False), ("value", 4, msg, "Expr", False))
    message("CreateStruct", ("entries", 2, msg, "Entry", True))
    message(
        "Comprehension",
        ("iter_var", 1, string, None, False),
        ("iter_range", 2, msg, "Expr", False),
        ("accu_var", 3, string, None, False),
        ("accu_init", 4, msg, "Expr", False),
        ("loop_condition", 5, msg, "Expr", False),
        ("loop_step", 6, msg, "Expr", False),
        ("result", 7, msg, "Expr", False),
    )
    source_info = message("SourceInfo", ("positions", 4, msg, "SourceInfo.PositionsEntry", True))
    entry = source_info.nested_type.add(name="PositionsEntry")
    entry.field.add(name="key", number=1, type=i64, label=_T.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=i32, label=_T.LABEL_OPTIONAL)
    entry.options.map_entry = True
    message("CheckedExpr", ("expr", 4, msg, "Expr", False), ("source_info", 5, msg, "SourceInfo", False))

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(spec.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("trtguard.cel_ast.CheckedExpr"))


_CHECKED_EXPR = _checked_expr_class()


def _children(node: Any) -> Iterator[Any]:
    """The sub-expressions of ``node``."""
    kind = node.WhichOneof("expr_kind")
    if kind == "select_expr":
        yield node.select_expr.operand
    elif kind == "call_expr":
        call = node.call_expr
        if call.HasField("target"):
            yield call.target
        yield from call.args
    elif kind == "list_expr":
        yield from node.list_expr.elements
    elif kind == "struct_expr":
        for entry in node.struct_expr.entries:
            if entry.HasField("map_key"):
                yield entry.map_key
            yield entry.value
    elif kind == "comprehension_expr":
        loop = node.comprehension_expr
        yield from (loop.iter_range, loop.accu_init, loop.loop_condition, loop.loop_step, loop.result)


def _check_shape(serialized: bytes, source: str, location: str | None, limits: CelLimits) -> Any:
    """The checked AST; rejected with too many nodes, too deep, or with comprehensions nested too deeply."""
    wrapper = any_pb2.Any()
    try:
        wrapper.ParseFromString(serialized)
        checked = _CHECKED_EXPR()
        checked.ParseFromString(wrapper.value)
    except DecodeError:  # the binding changed its serialization: refuse rather than skip the bounds
        raise _compile_error(
            "cannot measure the expression: the CEL library returned an AST this trtguard cannot read",
            source=source,
            location=location,
            line=1,
            column=1,
            hint="install the cel-expr-python version that trtguard pins",
        ) from None
    positions = checked.source_info.positions

    def fail(what: str, node: Any, hint: str) -> CelCompileError:
        line, column = _line_column(source, positions.get(node.id, 0))
        return _compile_error(what, source=source, location=location, line=line, column=column, hint=hint)

    nodes = 0
    stack: list[tuple[Any, int, int]] = [(checked.expr, 1, 0)]
    while stack:
        node, depth, nesting = stack.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise fail(
                f"the expression has more than {limits.max_nodes} nodes",
                node,
                "split it into several rules, each with its own message",
            )
        if depth > limits.max_depth:
            raise fail(
                f"the expression nests deeper than {limits.max_depth} levels",
                node,
                "flatten it: split it into several rules",
            )
        if node.WhichOneof("expr_kind") == "comprehension_expr" and not _trivial(node.comprehension_expr):
            nesting += 1
            if nesting > limits.max_comprehension_nesting:
                raise fail(
                    f"more than {limits.max_comprehension_nesting} comprehensions (all, exists, exists_one, "
                    "map, filter) nested in one another",
                    node,
                    "nest fewer macros; the work grows with the product of the list sizes",
                )
        stack.extend((child, depth + 1, nesting) for child in _children(node))
    return checked


def _trivial(loop: Any) -> bool:
    """A comprehension over the empty list literal costs nothing (as in cel-go's nesting validator)."""
    iter_range = loop.iter_range
    return iter_range.WhichOneof("expr_kind") == "list_expr" and not iter_range.list_expr.elements


def _line_column(source: str, offset: int) -> tuple[int, int]:
    """1-based line and column (code points) of a code point offset into ``source``."""
    line_start = source.rfind("\n", 0, offset) + 1
    return source.count("\n", 0, offset) + 1, offset - line_start + 1
