"""Read YAML/JSON documents safely, keeping the line of every value.

PyYAML's C parser composes the node graph quickly; the Python objects are then built here, so that
limits can be enforced and each value's source line recorded:

- duplicate mapping keys are an error (PyYAML silently keeps the last one, which hides conflicting settings);
- aliases are refused: policies and Kubernetes manifests don't need them, and they are how "billion laughs"
  inputs blow up whoever walks the result;
- depth and node counts are bounded, so a hostile document costs bounded time and memory;
- non-UTF-8 bytes are reported with their offset instead of a decoder traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from verifier.errors import InputError

try:  # the C parser is an optional part of PyYAML wheels; fall back to the pure-Python one
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment,unused-ignore]
except AttributeError:  # pragma: no cover - every manylinux wheel ships it
    _Loader = yaml.SafeLoader

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one document."""

    max_depth: int = 64
    max_nodes: int = 200_000


@dataclass(frozen=True, slots=True)
class Document:
    """One parsed document: its data, its 1-based start line and the line of every value by path."""

    data: Any
    line: int
    index: int
    lines: dict[Path, int]

    def line_of(self, path: Path) -> int:
        """The line of the value at ``path``, or of its nearest ancestor that has one."""
        while path:
            found = self.lines.get(path)
            if found is not None:
                return found
            path = path[:-1]
        return self.line


def decode(raw: bytes, source: str) -> str:
    """UTF-8 text of ``raw``; a clear error with the byte offset otherwise."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"not UTF-8: byte 0x{raw[error.start]:02x} at offset {error.start} cannot be decoded",
            location=source,
            hint="save the file as UTF-8 (Kubernetes manifests and policies are UTF-8 text)",
        ) from None


def load_documents(text: str, source: str, limits: Limits | None = None) -> Iterator[Document]:
    """Yield every document of a YAML (or JSON) stream; empty documents are skipped."""
    limits = limits or Limits()
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if node is not None:
                yield _construct(node, source, index, limits)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = error.problem or error.context or "malformed YAML"
        raise InputError(f"malformed YAML: {problem}", location=where) from None
    except yaml.YAMLError as error:
        raise InputError(f"malformed YAML: {error}", location=source) from None
    except RecursionError:
        raise InputError(
            "document is nested too deeply to parse", location=source, hint="flatten the document"
        ) from None


_SCALAR_CONSTRUCTOR = yaml.SafeLoader(stream="")


def _scalar(node: yaml.ScalarNode) -> Any:
    return _SCALAR_CONSTRUCTOR.construct_object(node, deep=False)


def _construct(root: yaml.Node, source: str, index: int, limits: Limits) -> Document:
    lines: dict[Path, int] = {}
    seen: set[int] = set()
    count = 0

    def where(node: yaml.Node) -> str:
        return f"{source}:{node.start_mark.line + 1}"

    def visit(node: yaml.Node, path: Path) -> Any:
        nonlocal count
        count += 1
        if count > limits.max_nodes:
            raise InputError(
                f"document has more than {limits.max_nodes} values", location=where(root), hint="split it"
            )
        if len(path) > limits.max_depth:
            raise InputError(
                f"document is nested deeper than {limits.max_depth} levels", location=where(node)
            )
        if id(node) in seen:
            raise InputError(
                "YAML aliases (*name) are not accepted",
                location=where(node),
                hint="write the value out instead of referring to an anchor",
            )
        seen.add(id(node))
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode):
            return _scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return [visit(child, (*path, i)) for i, child in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise InputError("mapping keys must be plain values", location=where(key_node))
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise InputError("YAML merge keys (<<) are not accepted", location=where(key_node))
                key = _scalar(key_node)
                if key in result:
                    raise InputError(
                        f"key {key!r} appears twice in the same mapping",
                        location=where(key_node),
                        hint="remove one of them; which one was meant is ambiguous",
                    )
                result[key] = visit(value_node, (*path, str(key)))
            return result
        raise InputError(f"unsupported YAML node {node.tag}", location=where(node))  # pragma: no cover

    data = visit(root, ())
    return Document(data=data, line=root.start_mark.line + 1, index=index, lines=lines)
