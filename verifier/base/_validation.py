"""Turn a pydantic ``ValidationError`` into an :class:`~verifier.base.InputError` a person can act on.

Every problem becomes one line with the field path, what was expected and the offending value (shortened)::

    builder_config.typing: expected 'weak' or 'strong'; got "mixed"
    toolchain.imag: unknown field (did you mean 'image'?); got "nvcr.io/…"

Cross-field validators can point at the sub-field they are about: a ``PydanticCustomError`` whose context
holds ``field`` (a dotted path relative to the error's location) and ``got`` (the value to show) is reported
at that path with that value. The module knows nothing about any particular document, so the manifest and
policy loaders share it; a loader that knows line numbers passes ``locate``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from verifier.base._errors import InputError

Loc = tuple[str | int, ...]
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_LISTED = 50
_MISSING = object()

# Messages of pydantic's built-in error types, rephrased to complete "expected …".
_EXPECTED: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "missing": lambda _: "a value (this field is required)",
    "literal_error": lambda ctx: str(ctx["expected"]),
    "string_too_short": lambda ctx: f"a string of at least {ctx['min_length']} character(s)",
    "string_too_long": lambda ctx: f"a string of at most {ctx['max_length']} character(s)",
    "string_pattern_mismatch": lambda ctx: f"a string matching the pattern {ctx['pattern']}",
    "too_short": lambda ctx: f"at least {ctx['min_length']} item(s)",
    "too_long": lambda ctx: f"at most {ctx['max_length']} item(s)",
    "model_type": lambda _: "an object (a mapping of field names to values)",
    "model_attributes_type": lambda _: "an object (a mapping of field names to values)",
    "dict_type": lambda _: "an object (a mapping)",
    "list_type": lambda _: "a list",
    "string_type": lambda _: "a string",
    "bool_type": lambda _: "true or false",
    "bool_parsing": lambda _: "true or false",
}
_LEADS = ("Input should be ", "Value error, ", "Assertion failed, ")


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One validation problem: where, what was expected, and the offending value."""

    loc: Loc
    path: str
    expected: str
    got: str | None
    """The offending value as shortened JSON; None where there is none (a missing field)."""

    def __str__(self) -> str:
        text = f"{self.path}: expected {self.expected}"
        return text if self.got is None else f"{text}; got {self.got}"


def format_path(loc: Sequence[str | int]) -> str:
    """``("a", 0, "input.1")`` → ``a[0]["input.1"]``; the empty path is ``(top level)``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":
            text += " (key)"
        elif _IDENTIFIER.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{shorten(part, 60)}]"
    return text or "(top level)"


def shorten(value: Any, limit: int = 80) -> str:
    """``value`` as ASCII JSON (so look-alike characters show as escapes), cut to ``limit`` characters.

    Only as much of ``value`` as the limit shows is rendered: a value that YAML aliases or a hostile client
    made huge costs no more than a small one.
    """
    return _cut(_render(value, limit + 1, as_json=True), limit)


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` of JSON-like data, cut to ``limit`` characters, rendering only what the limit shows."""
    return _cut(_render(value, limit + 1, as_json=False), limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class _Text:
    """Punctuation to emit as it is."""

    text: str


def _render(value: Any, budget: int, *, as_json: bool) -> str:
    """The start of ``value`` as JSON (or as Python's ``repr``): at least ``budget`` characters, or all."""
    out: list[str] = []
    size = 0
    stack: list[Any] = [value]  # a stack, not recursion: deep nesting costs no stack either
    while stack and size < budget:
        item = stack.pop()
        if isinstance(item, _Text):
            text = item.text
        elif isinstance(item, Mapping | list | tuple):
            stack.extend(reversed(_items(item, budget, as_json=as_json)))
            continue
        else:
            text = _scalar_text(item, budget, as_json=as_json)
        out.append(text)
        size += len(text)
    return "".join(out)


def _items(item: Mapping[Any, Any] | list[Any] | tuple[Any, ...], budget: int, *, as_json: bool) -> list[Any]:
    """Brackets, separators and as many children as ``budget`` characters can show (each shows one)."""
    parts: list[Any]
    if isinstance(item, Mapping):
        parts = [_Text("{")]
        for index, (key, child) in enumerate(item.items()):
            if index > budget:
                break
            parts += [_Text(", ")] if index else []
            parts += [str(key) if as_json else key, _Text(": "), child]
        return [*parts, _Text("}")]
    tuple_ = isinstance(item, tuple) and not as_json
    parts = [_Text("(" if tuple_ else "[")]
    for index, child in enumerate(item):
        if index > budget:
            break
        parts += [_Text(", "), child] if index else [child]
    return [*parts, _Text(",)" if tuple_ and len(item) == 1 else ")" if tuple_ else "]")]


def _scalar_text(item: Any, budget: int, *, as_json: bool) -> str:
    if isinstance(item, str | bytes):
        part = item[:budget]
        text = json.dumps(part if isinstance(part, str) else repr(part)) if as_json else repr(part)
        return text[:-1] if len(item) > budget else text  # cut short: no closing quote
    if isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 10_000:
        return f"<integer of {item.bit_length()} bits>"  # str() of a huge int is refused (4,300 digits)
    if as_json:
        try:
            return json.dumps(item)
        except (TypeError, ValueError):
            return json.dumps(str(item)[:budget])
    return repr(item)[:budget]


def field_problems(
    error: ValidationError,
    *,
    prefix: Loc = (),
    model: type[BaseModel] | None = None,
    value_limit: int = 80,
) -> list[FieldProblem]:
    """One :class:`FieldProblem` per error in ``error``.

    ``prefix`` is prepended to every path (e.g. ``("predicate",)`` when the model validated a part of a
    larger document). ``model``, when given, is used to suggest the closest field name for unknown fields.
    """
    return [_problem(details, prefix, model, value_limit) for details in error.errors()]


def input_error_from_validation(
    error: ValidationError,
    source: str,
    *,
    what: str = "document",
    prefix: Loc = (),
    model: type[BaseModel] | None = None,
    locate: Callable[[Loc], str | None] | None = None,
    hint: str | None = None,
) -> InputError:
    """An :class:`InputError` located at ``source`` that lists every problem of ``error``, one per line.

    ``what`` names the document kind in the message. ``locate``, when given, maps a problem's full path
    (prefix included) to a position such as ``"policy.yaml:12"`` shown in front of the line.
    """
    problems = field_problems(error, prefix=prefix, model=model)
    lines = []
    for problem in problems[:_MAX_LISTED]:
        where = locate(problem.loc) if locate is not None else None
        lines.append(f"  {where}: {problem}" if where else f"  {problem}")
    if len(problems) > _MAX_LISTED:
        lines.append(f"  ... and {len(problems) - _MAX_LISTED} more")
    count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
    return InputError(
        f"{what} is not valid ({count}):\n" + "\n".join(lines),
        location=source,
        hint=hint or "correct the fields listed above",
    )


def _problem(details: ErrorDetails, prefix: Loc, model: type[BaseModel] | None, limit: int) -> FieldProblem:
    kind = details["type"]
    ctx: Mapping[str, Any] = details.get("ctx") or {}
    loc: Loc = (*prefix, *details["loc"])
    value: Any = details.get("input", _MISSING)
    field = ctx.get("field")
    if isinstance(field, str) and field:
        loc = (*loc, *field.split("."))
    if "got" in ctx:
        value = ctx["got"]
    if kind == "missing":
        value = _MISSING
    if kind == "extra_forbidden":
        expected = "no field of this name (unknown field)"
        suggestion = _closest_field(model, details["loc"]) if model is not None else None
        if suggestion:
            expected = f"no field of this name (did you mean {suggestion!r}?)"
    elif kind in _EXPECTED:
        expected = _EXPECTED[kind](ctx)
    else:
        expected = details["msg"]
        for lead in _LEADS:
            expected = expected.removeprefix(lead)
    return FieldProblem(
        loc=loc,
        path=format_path(loc),
        expected=expected,
        got=None if value is _MISSING else shorten(value, limit),
    )


def _closest_field(model: type[BaseModel], loc: Loc) -> str | None:
    schema = model.model_json_schema()
    node = _schema_at(schema, schema, loc[:-1])
    if node is None or not isinstance(loc[-1], str):
        return None
    names = list(node.get("properties", {}))
    matches = difflib.get_close_matches(loc[-1], names, n=1, cutoff=0.6)
    return matches[0] if matches else None


def _schema_at(root: Mapping[str, Any], node: Mapping[str, Any], loc: Loc) -> Mapping[str, Any] | None:
    """The object schema reached from ``node`` by following ``loc`` (refs, nullable unions, lists, maps)."""
    node = _resolve(root, node)
    if not loc:
        return node if "properties" in node else _first_object(root, node)
    head, rest = loc[0], loc[1:]
    for candidate in node.get("anyOf", [node]):
        branch = _resolve(root, candidate)
        if isinstance(head, int) and isinstance(branch.get("items"), Mapping):
            return _schema_at(root, branch["items"], rest)
        if isinstance(head, str):
            properties = branch.get("properties", {})
            if head in properties:
                return _schema_at(root, properties[head], rest)
            extra = branch.get("additionalProperties")
            if isinstance(extra, Mapping):
                return _schema_at(root, extra, rest)
    return None


def _first_object(root: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for branch in node.get("anyOf", []):
        resolved = _resolve(root, branch)
        if "properties" in resolved:
            return resolved
    return None


def _resolve(root: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        resolved: Mapping[str, Any] = root.get("$defs", {}).get(reference.removeprefix("#/$defs/"), {})
        return resolved
    return node
