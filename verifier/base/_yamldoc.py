"""Read YAML/JSON documents safely, keeping the line of every value: the one YAML reader of trtguard.

Policies, ``trtguard check`` inputs, PolicyTest suites, manifest settings and records, the registry
configuration and ``serve --config`` are all read here. PyYAML's C parser composes the node graph quickly;
the Python objects are then built here, so that limits can be enforced and each value's source line
recorded:

- duplicate mapping keys are an error (PyYAML silently keeps the last one, which hides conflicting settings);
- aliases of lists and maps, and merge keys (``<<``), are refused: policies and Kubernetes manifests don't
  need them, and they are how "billion laughs" inputs blow up whoever walks the result;
- an alias of a scalar is read as a copy of its anchor's value, and every copy counts: a document may hold
  at most :attr:`Limits.max_values` values and :attr:`Limits.max_characters` characters of text *after*
  aliases are expanded, so 150,000 aliases of one 60 KB scalar (9 GB once written out) are refused after
  the first few hundred, not handed to code that would serialise them;
- depth is bounded, so a hostile document costs bounded time and memory;
- values that cannot be read as their tag says (``!!float abc``, an integer of 5,000 digits) and
  non-UTF-8 bytes are reported with their position instead of a traceback;
- messages show at most a short prefix of any value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from verifier.base._errors import InputError
from verifier.base._validation import short_repr

try:  # the C parser is an optional part of PyYAML wheels; fall back to the pure-Python one
    from yaml import CSafeLoader as _Base
except ImportError:  # pragma: no cover - every manylinux wheel ships it
    from yaml import SafeLoader as _Base  # type: ignore[assignment]

_ScalarNode, _SequenceNode, _MappingNode = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode
#: Tags of the plain scalars met so far, by text: the same names, labels and images recur through a stream,
#: and resolving one runs the resolver's regular expressions in Python (a third of composing).
_PLAIN_TAGS: dict[str, str] = {}
_PLAIN_TAGS_KEPT = 65_536
_PLAIN_TAG_LENGTH = 256


class _Loader(_Base):
    """The safe loader, with the tag of each plain scalar kept by its text.

    Without path resolvers (the safe loader has none), a plain scalar's tag depends on its text alone, so
    the tag kept is the one the resolver would give again; a quoted scalar's, a list's and a map's are
    their defaults (``BaseResolver.resolve`` says so).
    """

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        # Called by the C parser for every scalar: the common answers come first, in as few steps as may be.
        if kind is _ScalarNode and not self.yaml_path_resolvers:
            if not implicit[0]:
                return _STR  # quoted or block text: a string (BaseResolver's DEFAULT_SCALAR_TAG)
            tag = _PLAIN_TAGS.get(value)
            if tag is not None:
                return tag
            tag = str(super().resolve(kind, value, implicit))  # type: ignore[no-untyped-call]
            if len(value) <= _PLAIN_TAG_LENGTH:
                if len(_PLAIN_TAGS) >= _PLAIN_TAGS_KEPT:
                    _PLAIN_TAGS.clear()  # bounded: one stream of unique values costs at most this much
                _PLAIN_TAGS[value] = tag
            return tag
        if kind is _MappingNode and not self.yaml_path_resolvers:
            return str(self.DEFAULT_MAPPING_TAG)
        if kind is _SequenceNode and not self.yaml_path_resolvers:
            return str(self.DEFAULT_SEQUENCE_TAG)
        return str(super().resolve(kind, value, implicit))  # type: ignore[no-untyped-call]


Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one document, counted with every alias expanded."""

    #: nesting of lists and maps
    max_depth: int = 64
    #: values: scalars, lists and maps (mapping keys not counted)
    max_nodes: int = 200_000
    #: characters of text in all scalars, mapping keys included; Kubernetes objects are at most ~1.5 MiB
    #: (etcd's request limit), policies, settings and records far less
    max_characters: int = 16 * 1024 * 1024


#: What ends a line for the C parser (its columns count from the last of these).
_BREAKS = "\r\n\x85\u2028\u2029"


class _Nodes:
    """The node trees of one stream, composed again only when a line number is asked for.

    Keeping every node of every document alive for the whole run makes Python's cycle collector rescan
    them over and over (10,000 manifests: seconds); the text alone costs it nothing. A document's tree is
    composed from the document's own lines (the last one is kept: a report asks for several of its lines
    in a row); the whole stream only when those lines do not read as that document alone.
    """

    __slots__ = ("_last", "_roots", "_text", "anchored", "read")

    def __init__(self, text: str) -> None:
        self._text = text
        self._roots: list[yaml.Node | None] | None = None
        self._last: tuple[int, yaml.Node | None, int] | None = None
        #: Whether the text may hold an anchor (``&name``), so that an alias may repeat a node: without one,
        #: no node can be met twice and reading need not keep which ones it met.
        self.anchored = "&" in text
        #: Whether the whole stream was read: only then may a document be composed from its lines alone (from
        #: a stream that does not compose, no line is found but the document's own, as before).
        self.read = False

    def root(self, index: int, span: Span | None = None) -> tuple[yaml.Node | None, int]:
        """The root node of document ``index`` (``span``: where its text is) and the lines of the text
        before the text it was composed from."""
        last = self._last  # read once: another thread may ask for another document's lines meanwhile
        if last is not None and last[0] == index:
            return last[1], last[2]
        alone = self._alone(span) if span is not None and self.read else None
        found = (alone, span[3]) if alone is not None and span is not None else (self._stream_root(index), 0)
        self._last = (index, *found)
        return found

    def _alone(self, span: Span) -> yaml.Node | None:
        """The root composed from the document's lines alone, or None when they do not compose to the same
        place (a ``%TAG`` the document needs, say): its start at the same column, its end at the same end."""
        start, end, column, _ = span
        if start and self._text[start - 1] not in _BREAKS:
            return None
        try:
            roots = list(yaml.compose_all(self._text[start:end], Loader=_Loader))
        except yaml.YAMLError:
            return None
        if len(roots) != 1 or roots[0] is None:
            return None
        root: yaml.Node = roots[0]
        same = (root.start_mark.line, root.start_mark.column, root.end_mark.index) == (0, column, end - start)
        return root if same else None

    def _stream_root(self, index: int) -> yaml.Node | None:
        if self._roots is None:
            try:
                self._roots = list(yaml.compose_all(self._text, Loader=_Loader))
            except (
                yaml.YAMLError
            ):  # the documents were read, so this cannot happen; a line is not worth a crash
                self._roots = []
        return self._roots[index] if index < len(self._roots) else None


#: Where a document's root is in the text its stream was read from: the index of the start of its first
#: line, the index of its end, its column and its line (0-based).
Span = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Document:
    """One parsed document: its data, its 1-based start line, and the means to find any value's line."""

    data: Any
    line: int
    index: int
    nodes: _Nodes
    offset: int = 0
    """Lines of the stream before the text ``nodes`` holds (a document read on its own)."""
    span: Span | None = None
    """Where the document is in the text ``nodes`` holds (None: found by composing the whole stream)."""

    def line_of(self, path: Path) -> int:
        """The line of the value at ``path``, or of its nearest ancestor that exists."""
        node, before = self._node(path)
        return self.line if node is None else int(node.start_mark.line) + 1 + self.offset + before

    def text_line_of(self, path: Path) -> int:
        """The line where the text of the scalar at ``path`` starts: for ``|`` and ``>`` blocks, the next."""
        node, before = self._node(path)
        if node is None:
            return self.line
        block = isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")
        return int(node.start_mark.line) + (2 if block else 1) + self.offset + before

    def _node(self, path: Path) -> tuple[yaml.Node | None, int]:
        """The node at ``path`` (or its nearest ancestor) and the lines before the text it was read from."""
        node, before = self.nodes.root(self.index, self.span)
        if node is None:
            return None, 0
        for part in path:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                child = next((v for k, v in node.value if k.value == str(part)), None)
            elif (
                isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value)
            ):
                child = node.value[part]
            if child is None:
                break
            node = child
        return node, before


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


_MALFORMED = "malformed YAML: "


def load_documents(
    text: str, source: str, limits: Limits | None = None, *, offset: int = 0
) -> Iterator[Document]:
    """Yield every document of a YAML (or JSON) stream; empty documents are skipped.

    ``offset`` is the number of lines before ``text`` in its source (for a document read on its own).
    """
    limits = limits or Limits()
    nodes = _Nodes(text)
    try:
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if node is not None:
                yield _construct(node, source, index, limits, nodes, offset)
        nodes.read = True
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1 + offset}:{mark.column + 1}" if mark else source
        problem = error.problem or error.context or "malformed YAML"
        if mark is not None and _tab_at(text, mark.index):
            raise InputError(
                f"{_MALFORMED}{problem}: a tab character, which YAML never allows in indentation",
                location=where,
                hint="indent with spaces (editors: expand tabs to spaces for YAML files)",
            ) from None
        raise InputError(f"{_MALFORMED}{problem}", location=where) from None
    except yaml.YAMLError as error:
        raise InputError(f"{_MALFORMED}{error}", location=source) from None
    except RecursionError:
        raise InputError(
            "document is nested too deeply to parse", location=source, hint="flatten the document"
        ) from None


def _tab_at(text: str, index: int) -> bool:
    """Whether the parser stopped at a tab, or on a line whose indentation holds one."""
    if 0 <= index < len(text) and text[index] == "\t":
        return True
    start = text.rfind("\n", 0, max(index, 0)) + 1
    line = text[start : text.find("\n", start) if "\n" in text[start:] else len(text)]
    return "\t" in line[: len(line) - len(line.lstrip(" \t"))]


def load_document(text: str, source: str, *, what: str, limits: Limits | None = None) -> Document | None:
    """The one document of a YAML (or JSON) file that must hold at most one; ``None`` when it is empty.

    ``what`` names the file in messages: "the registry configuration is not valid YAML: ...".
    """
    try:
        documents = iter(load_documents(text, source, limits))
        first = next(documents, None)
        second = next(documents, None)
    except InputError as error:
        detail = error.message
        message = (
            f"{what} is not valid YAML: {detail.removeprefix(_MALFORMED)}"
            if detail.startswith(_MALFORMED)
            else f"{what}: {detail}"
        )
        raise InputError(message, location=error.location, hint=error.hint) from None
    if second is not None:
        raise InputError(
            f"{what} holds more than one YAML document (a second starts at line {second.line})",
            location=f"{source}:{second.line}",
            hint="remove the '---' separator and what follows it",
        )
    return first


_SCALAR_CONSTRUCTOR = yaml.SafeLoader(stream="")
_CONSTRUCTORS = yaml.SafeLoader.yaml_constructors
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
# Kubernetes reads timestamps as strings; a datetime object would also not be JSON-like data.
_AS_TEXT = frozenset({_STR, "tag:yaml.org,2002:timestamp"})
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float"))


def _scalar(node: yaml.ScalarNode, source: str, offset: int) -> Any:
    if node.tag in _AS_TEXT:
        return node.value
    # Only tags of JSON-like scalars: a scalar tagged !!seq or !!map would construct a generator, !!binary
    # bytes, !!set a set; none of them is data a manifest or a policy can hold.
    constructor = _CONSTRUCTORS.get(node.tag) if node.tag in _SCALAR_TAGS else None
    if constructor is None:
        raise InputError(
            f"unsupported YAML tag {short_repr(node.tag)}",
            location=f"{source}:{node.start_mark.line + 1 + offset}",
            hint="remove the explicit tag",
        )
    try:
        return constructor(_SCALAR_CONSTRUCTOR, node)
    except (ValueError, TypeError, KeyError, OverflowError, yaml.YAMLError) as error:
        # e.g. !!float abc, !!bool maybe, or an integer beyond Python's 4,300-digit conversion limit
        what = node.tag.rsplit(":", 1)[-1]
        raise InputError(
            f"{short_repr(node.value)} cannot be read as {what}"
            + (": it has too many digits" if "digits" in str(error) else ""),
            location=f"{source}:{node.start_mark.line + 1 + offset}",
            hint="quote the value to keep it as text, or write a valid value",
        ) from None


def _construct(
    root: yaml.Node, source: str, index: int, limits: Limits, nodes: _Nodes, offset: int = 0
) -> Document:
    # The hot loop of every read: scalars of the plain-text tags are read inline rather than through a call
    # each, and which nodes were met is only kept when the stream has an anchor (``&``) an alias could name.
    seen: set[int] | None = set() if nodes.anchored else None
    count = 0
    characters = 0
    max_nodes, max_characters, max_depth = limits.max_nodes, limits.max_characters, limits.max_depth

    def where(node: yaml.Node) -> str:
        return f"{source}:{node.start_mark.line + 1 + offset}"

    def too_big(what: str, node: yaml.Node, parent: yaml.Node, repeated: bool) -> InputError:
        limits_text = f"limits per document: {max_nodes} values, {max_characters} characters"
        if repeated:
            return InputError(
                f"the document holds {what} once its YAML aliases are expanded: aliases (*name) here "
                f"repeat the value anchored at line {node.start_mark.line + 1 + offset}",
                location=where(parent),
                hint=f"each alias counts as a copy of its anchor's value ({limits_text}); "
                "write the values out, or split the document",
            )
        return InputError(
            f"the document holds {what}",
            location=where(root),
            hint=f"split it into documents ({limits_text})",
        )

    def text(node: yaml.ScalarNode, parent: yaml.Node, *, key: bool = False) -> Any:
        """The scalar's value, counted; a scalar met again is an alias of it, read as a copy."""
        nonlocal count, characters
        count += 0 if key else 1
        characters += len(node.value)
        repeated = False
        if seen is not None:
            repeated = id(node) in seen
            seen.add(id(node))
        if count > max_nodes:
            raise too_big(f"more than {max_nodes} values", node, parent, repeated)
        if characters > max_characters:
            raise too_big(f"more than {max_characters} characters of text", node, parent, repeated)
        if node.tag in _AS_TEXT:
            return node.value
        return _scalar(node, source, offset)

    def visit(node: yaml.Node, depth: int, parent: yaml.Node) -> Any:
        nonlocal count, characters
        if depth > max_depth:
            raise InputError(f"document is nested deeper than {max_depth} levels", location=where(node))
        if isinstance(node, _ScalarNode):
            return text(node, parent)
        count += 1
        if count > max_nodes:
            raise too_big(f"more than {max_nodes} values", node, parent, repeated=False)
        if seen is not None:
            if id(node) in seen:
                raise InputError(
                    "YAML aliases (*name) of lists and maps are not accepted",
                    location=where(node),
                    hint="write the value out instead of referring to an anchor",
                )
            seen.add(id(node))
        inner = depth + 1
        if isinstance(node, _SequenceNode):
            return [
                text(child, node) if isinstance(child, _ScalarNode) and inner <= max_depth
                else visit(child, inner, node)  # noqa: F821 - deleted once the document is built
                for child in node.value
            ]  # fmt: skip
        if isinstance(node, _MappingNode):
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, _ScalarNode):
                    raise InputError("mapping keys must be plain values", location=where(key_node))
                if key_node.tag == _MERGE:
                    raise InputError("YAML merge keys (<<) are not accepted", location=where(key_node))
                if seen is None:  # ``text`` of the key, inline (no node can be met twice)
                    key = key_node.value
                    characters += len(key)
                    if characters > max_characters:
                        raise too_big(f"more than {max_characters} characters of text", key_node, node, False)
                    if key_node.tag not in _AS_TEXT:
                        key = _scalar(key_node, source, offset)
                else:
                    key = text(key_node, node, key=True)
                if key in result:
                    raise InputError(
                        f"the key {short_repr(key)} appears twice in one mapping",
                        location=where(key_node),
                        hint="remove one of them; which one was meant is ambiguous",
                    )
                if not isinstance(value_node, _ScalarNode) or inner > max_depth:
                    result[key] = visit(value_node, inner, node)  # noqa: F821 - as above
                elif seen is None:  # ``text`` of the value, inline
                    value = value_node.value
                    count += 1
                    characters += len(value)
                    if count > max_nodes:
                        raise too_big(f"more than {max_nodes} values", value_node, node, False)
                    if characters > max_characters:
                        raise too_big(
                            f"more than {max_characters} characters of text", value_node, node, False
                        )
                    result[key] = value if value_node.tag in _AS_TEXT else _scalar(value_node, source, offset)
                else:
                    result[key] = text(value_node, node)
            return result
        raise InputError(f"unsupported YAML node {node.tag}", location=where(node))  # pragma: no cover

    try:
        data = visit(root, 0, root)
    finally:
        # ``visit`` calls itself through its closure: a cycle that would keep the document's whole node tree
        # (its marks, every node) alive until the cycle collector runs, or to the end where reading was done
        # without it (``check``: frozen with what was read, freed only at exit).
        del visit
    start = root.start_mark
    span = (start.index - start.column, root.end_mark.index, start.column, start.line)
    return Document(
        data=data, line=start.line + 1 + offset, index=index, nodes=nodes, offset=offset, span=span
    )


_SEPARATOR = re.compile(r"^---(?=[ \t\r]|$)", re.MULTILINE)


def load_each_document(
    text: str, source: str, limits: Limits | None = None
) -> Iterator[Document | InputError]:
    """Every document of a stream, or for each one that cannot be read, its :class:`InputError`.

    The stream is read whole first; when that fails, each document (split at its ``---`` line, as kubectl
    splits a stream) is read on its own, so that one malformed document costs only itself and every other
    document is still read, in order.
    """
    try:
        whole = list(load_documents(text, source, limits))
    except InputError:
        pass
    else:
        yield from whole
        return
    starts = [0, *(found.start() for found in _SEPARATOR.finditer(text) if found.start() > 0)]
    line = 0
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        chunk = text[begin:end]
        try:
            yield from load_documents(chunk, source, limits, offset=line)
        except InputError as error:
            yield error
        line += chunk.count("\n")
