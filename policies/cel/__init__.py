"""CEL expressions in policies: compiled once at load time within static bounds, evaluated on guarded data.

Built on ``cel-expr-python``, Google's binding of cel-cpp (see docs/cel.md for why). What bounds the cost
of one evaluation:

- at compile time, :class:`CelLimits`: source length, AST nodes and depth after macro expansion, and how
  deeply comprehensions (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) nest in one another;
- at evaluation time, cel-cpp stops an evaluation after 10,000 comprehension iterations in total (its
  default, which the binding does not let us change), and the data handed in is checked first: lists and
  maps no longer than ``max_list_length``, strings no longer than ``max_string_length`` and
  ``max_total_length`` together, no more than ``max_values`` values in all, nesting no deeper than
  ``max_value_depth`` (cel-cpp converts nested data recursively and crashes on very deep input);
- and in between, :mod:`policies.cel.cost` bounds the work and memory of one evaluation from the
  AST and those data limits (:attr:`CelProgram.cost`). Neither the binding nor cel-cpp can stop an
  evaluation that runs long or allocates much, so an expression whose bound is above
  ``inline_work``/``inline_memory`` must be evaluated where it can be stopped
  (:mod:`policies.cel.sandbox`); :attr:`CelProgram.inline` says which.

Only the declared variables may appear in an expression; each is dynamically typed. Times are handed in as
RFC 3339 strings and compared through ``timestamp()``::

    timestamp(manifest.build_timestamp) > timestamp("2026-01-01T00:00:00Z")
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cel_expr_python import cel as _cel
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from policies.cel.cost import CelCost, estimate
from verifier.errors import InputError, TrtguardError

__all__ = [
    "RESOURCE_HINT",
    "CelActivation",
    "CelCompileError",
    "CelCost",
    "CelEvaluationError",
    "CelLimits",
    "CelProgram",
    "compile_expression",
    "prepare_activation",
]

#: Comprehension iterations cel-cpp allows one evaluation (RuntimeOptions.comprehension_max_iterations).
COMPREHENSION_ITERATION_BUDGET: Final = 10_000

_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_SPEC = "https://github.com/google/cel-spec/blob/master/doc/langdef.md"


@dataclass(frozen=True, slots=True)
class CelLimits:
    """Bounds on one expression (checked when it is compiled) and on the data it is evaluated against.

    The defaults are far above what a policy rule needs (the five rules in bench/cel_candidates.py have
    6 to 19 AST nodes) and above the size of ordinary Pod-bearing objects; docs/cel.md gives the worst
    evaluation time they allow.
    """

    #: code points of source text
    max_length: int = 4096
    #: AST nodes after macro expansion (``exists`` alone expands to about ten)
    max_nodes: int = 500
    #: AST nesting depth after macro expansion (the CEL spec asks parsers for at least 32 levels)
    max_depth: int = 64
    #: comprehensions inside comprehensions: 2 allows ``containers.all(c, c.ports.all(p, ...))``
    max_comprehension_nesting: int = 2
    #: items in any one list or map handed in
    max_list_length: int = 1000
    #: code points (bytes for bytes values) of any one string handed in; kubectl's last-applied-configuration
    #: annotation can be longer on large objects: drop it before evaluating
    max_string_length: int = 65_536
    #: values (scalars, lists and maps) handed in, all variables together
    max_values: int = 20_000
    #: nesting of lists and maps handed in
    max_value_depth: int = 64
    #: code points of all strings handed in, all variables together (the API server refuses requests over
    #: 3 MiB, etcd objects over 1.5 MiB)
    max_total_length: int = 4 * 1024 * 1024
    #: worst-case work (about ns, see cel_cost) up to which an expression may run inline
    inline_work: float = 20_000_000
    #: worst-case memory (bytes) up to which an expression may run inline
    inline_memory: float = 16 * 1024 * 1024


class CelCompileError(InputError):
    """A policy expression that does not compile, names an undeclared variable or exceeds a limit.

    ``location`` is ``file:line:column`` of the first problem where the caller gave ``file:line`` of the
    expression start; ``line`` and ``column`` (1-based, in code points) are relative to the expression.
    """

    def __init__(
        self,
        message: str,
        *,
        expression: str,
        location: str,
        line: int,
        column: int,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, location=location, hint=hint)
        self.expression = expression
        self.line = line
        self.column = column


class CelEvaluationError(TrtguardError):
    """A policy expression could not be evaluated: no such key, type error, or a limit exceeded.

    A failed evaluation is never a pass: callers turn it into a violation. ``resource`` is true when a
    bound on time or memory stopped it (the iteration budget, the time limit, the memory limit, a worker
    that died), which the evaluator treats as "could not be checked": the policy's ``onError``.
    """

    def __init__(
        self, message: str, *, location: str | None = None, hint: str | None = None, resource: bool = False
    ) -> None:
        super().__init__(message, location=location, hint=hint)
        self.resource = resource


class CelActivation(Mapping[str, Any]):
    """Variable values checked against the limits once, to evaluate many programs against.

    Build one with :func:`prepare_activation` per set of values (the evaluator: per policy and engine):
    cel-cpp then converts each variable into its own representation once, on first use, for all programs
    compiled with the same variables.
    """

    __slots__ = ("_activations", "_values", "limits")

    def __init__(self, values: dict[str, Any], limits: CelLimits) -> None:
        self._values = values
        self.limits = limits
        # cel-cpp activation per environment (keyed by the environment object, which this keeps alive)
        self._activations: dict[Any, Any] = {}

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def _for(self, env: Any) -> Any:
        activation = self._activations.get(env)
        if activation is None:
            # two threads may both build one; setdefault keeps the first, the other is dropped unused
            activation = self._activations.setdefault(env, env.Activation(self._values))
        return activation


def prepare_activation(values: Mapping[str, Any], *, limits: CelLimits = CelLimits()) -> CelActivation:
    """Check ``values`` (variable name → JSON-like data) against ``limits`` for repeated evaluation.

    Values are what JSON or YAML yields: dicts, lists, str, int, float, bool, None (bytes too). Other
    mappings and sequences (a ``MappingProxyType``, a tuple) are copied into dicts and lists.
    Raises :class:`CelEvaluationError` when the data exceeds a limit or has a type CEL cannot represent.
    """
    return CelActivation(_guarded(values, limits), limits)


@dataclass(frozen=True)
class CelProgram:
    """A compiled policy expression. Thread-safe: evaluate it from any number of threads."""

    source: str
    location: str | None
    variables: frozenset[str]
    limits: CelLimits
    #: worst case of one evaluation over data within ``limits`` (:mod:`policies.cel.cost`)
    cost: CelCost
    _env: Any = field(repr=False, compare=False)
    _expression: Any = field(repr=False, compare=False)

    @property
    def inline(self) -> bool:
        """Whether the worst case is cheap enough to evaluate in the caller's thread, on its event loop."""
        return self.cost.within(self.limits.inline_work, self.limits.inline_memory)

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """Evaluate against ``activation`` (variable name → value, or a :class:`CelActivation`).

        Returns plain Python values (bool, int, float, str, bytes, None, list, dict, ``datetime`` for
        timestamps, ``timedelta`` for durations). Raises :class:`CelEvaluationError` when evaluation
        fails, including a missing variable, a missing key and the comprehension iteration budget.
        """
        if not isinstance(activation, CelActivation):
            activation = prepare_activation(activation, limits=self.limits)
        try:
            value = self._expression.eval(activation._for(self._env))
        except RuntimeError as exc:  # cel-cpp statuses that are raised rather than returned as errors
            raise self._failure(str(exc)) from None
        except MemoryError:  # std::bad_alloc from cel-cpp, or Python's own
            raise CelEvaluationError(
                f"the expression ran out of memory while it was evaluated\n    {self.source}",
                location=self.location,
                hint=RESOURCE_HINT,
                resource=True,
            ) from None
        if value.type() == _cel.Type.ERROR:
            raise self._failure(str(value.value()))
        return value.plain_value()

    def evaluate_bool(self, activation: Mapping[str, Any]) -> bool:
        """Evaluate an expression that must yield ``true`` or ``false``; anything else is an error."""
        result = self.evaluate(activation)
        if type(result) is not bool:
            raise CelEvaluationError(
                f"the expression yields {_describe(result)}, not true or false: {self.source}",
                location=self.location,
                hint="write a comparison or a test that is true or false, e.g. `size(x) > 0`",
            )
        return result

    def _failure(self, status: str) -> CelEvaluationError:
        detail, hint = _explain_runtime(status)
        return CelEvaluationError(
            f"the expression could not be evaluated: {detail}\n    {self.source}",
            location=self.location,
            hint=hint,
            resource=hint == RESOURCE_HINT,
        )


def compile_expression(
    source: str,
    *,
    variables: Collection[str],
    location: str | None = None,
    limits: CelLimits = CelLimits(),
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
            hint="split it into several rules, each with its own message",
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
        problems = [(1, 1, _STATUS_CODE.sub("", status.strip()))]
    line, column, text = problems[0]
    if text.startswith("unknown name"):
        hint = f"the variables here are {', '.join(sorted(names))}; check the spelling"
    elif "recursion" in text:
        hint = "the parser allows 32 levels of nesting or repeated operators: group terms with parentheses"
    elif text.startswith("Syntax error"):
        hint = f"fix the syntax at the marked position; the grammar is in {_SPEC}"
    elif "no matching overload" in text:
        hint = "CEL converts no types implicitly: compare like with like, or convert with int(), double()"
    else:
        hint = f"see the CEL language definition: {_SPEC}"
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


# --------------------------------------------------------------------------------------------------
# Data handed in: bounded before cel-cpp converts it. The check runs once per workload on every value, so
# it has a fast pass (exact types, no paths) and, only when that finds a problem, a second pass that
# names where the problem is.

#: what cel-cpp takes as is (it rejects subclasses such as OrderedDict or a StrEnum member)
_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None), bytes})
_SCALARS: Final = (str, int, float, bytes)  # with their subclasses, which are copied to the base type


def _guarded(values: Mapping[str, Any], limits: CelLimits) -> dict[str, Any]:
    """Check sizes, depth and types; copy anything cel-cpp would not take as is into dicts and lists."""
    verdict = _scan(values, limits)
    if verdict is None:
        raise _locate(values, limits)
    if verdict:
        return dict(values)
    return {name: _plain_copy(value) for name, value in values.items()}


def _scan(values: Mapping[str, Any], limits: CelLimits) -> bool | None:
    """True: plain and within limits; False: within limits but needs a copy; None: a problem."""
    max_length, max_string, plain = limits.max_list_length, limits.max_string_length, True
    level = list(values.values())
    count, depth, total = len(level), 1, 0
    while level:
        children: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is str or kind is bytes:
                total += len(item)
                if len(item) > max_string:
                    return None
                continue
            if kind in _PLAIN_SCALARS:
                continue
            if kind is dict or kind is list:
                size = len(item)
                children.extend(item.values() if kind is dict else item)
            elif isinstance(item, Mapping):
                size, plain = len(item), False
                children.extend(item.values())
            elif isinstance(item, list | tuple):
                size, plain = len(item), False
                children.extend(item)
            elif isinstance(item, _SCALARS):
                if isinstance(item, str | bytes):
                    total += len(item)
                    if len(item) > max_string:
                        return None
                plain = False
                continue
            else:
                return None
            count += size
            if size > max_length or count > limits.max_values or depth > limits.max_value_depth:
                return None
        level = children
        depth += 1
    return None if total > limits.max_total_length else plain


def _locate(values: Mapping[str, Any], limits: CelLimits) -> CelEvaluationError:
    """The error for the first problem :func:`_scan` found, with the path to it."""
    # (value, depth, parent, key): a path is built from the parent links only for the message
    stack: list[tuple[Any, int, Any, Any]] = [(value, 1, None, name) for name, value in values.items()]
    count, total = len(stack), 0
    while stack:
        item, depth, parent, key = stack.pop()
        here = (parent, key)
        if isinstance(item, str | bytes) and len(item) > limits.max_string_length:
            what = "a string of {} characters" if isinstance(item, str) else "a bytes value of {} bytes"
            return _data_error(f"{what.format(len(item))} (limit {limits.max_string_length})", here)
        if isinstance(item, str | bytes):
            total += len(item)
            if total > limits.max_total_length:
                return _data_error(f"more than {limits.max_total_length} characters of text in all", here)
        if type(item) in _PLAIN_SCALARS or isinstance(item, _SCALARS):
            continue
        if isinstance(item, Mapping):
            children = [(child, depth + 1, here, child_key) for child_key, child in item.items()]
        elif isinstance(item, list | tuple):
            children = [(child, depth + 1, here, index) for index, child in enumerate(item)]
        else:
            return CelEvaluationError(
                f"cannot evaluate policy expressions on this data: {_path(here)} is a {type(item).__name__},"
                " which CEL cannot represent",
                hint="hand in JSON-like data: dicts, lists, str, int, float, bool, None"
                " (pydantic: model_dump(mode='json'); times as RFC 3339 strings)",
            )
        count += len(children)
        if len(children) > limits.max_list_length:
            what = "map" if isinstance(item, Mapping) else "list"
            return _data_error(f"a {what} of {len(children)} items (limit {limits.max_list_length})", here)
        if count > limits.max_values:
            return _data_error(f"more than {limits.max_values} values in all", here)
        if depth > limits.max_value_depth:
            return _data_error(f"nesting deeper than {limits.max_value_depth} levels", here)
        stack.extend(children)
    return _data_error("the data exceeds a limit", None)  # unreachable while _scan and this agree


def _plain_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_plain_copy(key): _plain_copy(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_copy(child) for child in value]
    if type(value) in _PLAIN_SCALARS:
        return value
    # subclasses (an IntEnum or StrEnum member) become their base type; bool needs no case: it has none
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return bytes(value)


def _path(here: Any) -> str:
    parts: list[str] = []
    while here is not None:
        parent, key = here
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}" if parent is not None else str(key))
        here = parent
    return "".join(reversed(parts))


def _data_error(what: str, here: Any) -> CelEvaluationError:
    where = f" at {_path(here)}" if here is not None else ""
    return CelEvaluationError(
        f"cannot evaluate policy expressions on this data: {what}{where}",
        hint="the limits protect the admission path; if the object is legitimate, raise them in CelLimits",
    )


# --------------------------------------------------------------------------------------------------
# Runtime errors: cel-cpp statuses ("NOT_FOUND: Key not found in map : \"x\"") → what to tell the user.

_STATUS_CODE = re.compile(r"^[A-Z_]+: |\s*\[[A-Z_]+\]$")
_HAS_HINT = "test optional fields first: has(x.field), or `'key' in x`"
#: The hint of every error that a bound on time or memory caused (CelEvaluationError.resource).
RESOURCE_HINT: Final = (
    "the expression's cost grows with the data it reads: filter lists before nesting macros and do not "
    "build strings or lists in loops; the policy's onError applies until it is cheaper"
)
_RUNTIME_HINTS: Final = (
    ("key not found", _HAS_HINT),
    ("no such key", _HAS_HINT),
    ("index error", "test the length first: `size(x) > i && x[i] ...`"),
    ("no value with name", "the policy engine did not hand this variable in: report it as a bug"),
    ("iteration budget exceeded", RESOURCE_HINT),
    (
        "no matching overload",
        "CEL converts no types implicitly: convert with int(), double(), string(), timestamp()",
    ),
    ("overflow", "keep integers within 64 bits"),
    ("by zero", "test the divisor first: `d != 0 && n / d > 1`"),
    ("non-cel value type", "hand in JSON-like data: dicts, lists, str, int, float, bool, None"),
    # what cel-cpp says when a string handed in holds a lone surrogate (a "\ud800" escape in JSON input)
    ("basic_string", "a string handed in is probably not valid Unicode (a lone \\uD800-\\uDFFF escape)"),
)


def _explain_runtime(status: str) -> tuple[str, str]:
    detail = _STATUS_CODE.sub("", status.strip())
    lowered = detail.lower()
    if "iteration budget exceeded" in lowered:
        detail = f"stopped after {COMPREHENSION_ITERATION_BUDGET} comprehension iterations (the budget)"
    for marker, hint in _RUNTIME_HINTS:
        if marker in lowered:
            return detail, hint
    return detail, f"see the CEL language definition: {_SPEC}"


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
