"""Path patterns over Kubernetes objects, and the JSON paths trtguard reports.

A pattern names where a kind keeps its pod templates, pod specs or containers: keys joined by dots, with two
wildcards, ``[*]`` (every item of a list) and ``*`` (every value of a map), e.g.
``spec.workerGroupSpecs[*].template`` or ``spec.mpiReplicaSpecs.*.template``. :meth:`PathPattern.expand`
turns it into the concrete paths an object has (``spec.workerGroupSpecs[1].template``), the form every image,
engine and problem is reported with. A map key that is not a plain identifier is written in brackets
(``metadata.annotations[trtguard.dev/engines]``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["Match", "PathError", "PathPattern", "child", "item"]

_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_TOKEN: Final = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_-]*)|(?P<map>\*)|(?P<list>\[\*\])")
#: Parsed objects are dicts; testing dict first skips the slower ABC check.
_MAPPINGS: Final = (dict, Mapping)
#: Segment kinds of a parsed pattern.
_LIST: Final = "[*]"
_MAP: Final = "*"


class PathError(ValueError):
    """A path pattern that does not parse; the message says where."""


def child(path: str, key: str) -> str:
    """``path`` extended by the map key ``key`` (bracketed unless it is a plain identifier)."""
    if _KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def item(path: str, index: int) -> str:
    """``path`` extended by the list index ``index``."""
    return f"{path}[{index}]"


@dataclass(frozen=True, slots=True)
class PathPattern:
    """A parsed path pattern: keys, ``*`` (every map value) and ``[*]`` (every list item)."""

    text: str
    segments: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> PathPattern:
        """Parse ``text``; raises :class:`PathError` saying what is wrong and where."""
        segments: list[str] = []
        position = 0
        expect_key = True
        while position < len(text):
            if not expect_key and text.startswith(".", position):
                position += 1
                expect_key = True
                continue
            found = _TOKEN.match(text, position)
            if found is None or (found.group("list") is None and not expect_key):
                raise PathError(
                    f"{text!r} is not a path pattern at character {position + 1}: write keys joined by "
                    "dots, with [*] for every item of a list and * for every value of a map "
                    "(spec.workerGroupSpecs[*].template)"
                )
            if found.group("list") is not None:
                segments.append(_LIST)
            else:
                segments.append(found.group("key") or _MAP)
            position = found.end()
            expect_key = False
        if expect_key:
            raise PathError(f"{text!r} is empty or ends with a dot" if text else "a path pattern is empty")
        if segments[0] in (_MAP, _LIST):
            raise PathError(f"{text!r} starts with a wildcard: a path starts with a key")
        return cls(text, tuple(segments))

    @property
    def has_wildcard(self) -> bool:
        """True when the pattern can match more than one place."""
        return _LIST in self.segments or _MAP in self.segments

    def expand(self, node: Any, base: str = "") -> Iterator[tuple[str, Any]]:
        """Every (concrete path, value) the pattern reaches in ``node``, in document order.

        A key that is absent (or null) reaches nothing; so does a wildcard over a value of the wrong type (a
        ``[*]`` over a map): the caller decides whether absence is a problem. Concrete paths start with
        ``base`` when it is given.
        """
        for path, value, _ in _expand(node, self.segments, base, None):
            yield path, value

    def expand_items(self, node: Any, base: str = "") -> Iterator[tuple[str, Any, Match | None]]:
        """:meth:`expand`, with what the last wildcard matched on the way (None: the pattern has none)."""
        yield from _expand(node, self.segments, base, None)


@dataclass(frozen=True, slots=True)
class Match:
    """What a wildcard matched: a map's key (``Worker``) or a list's index, and the value there."""

    key: str | int
    value: Any


def _expand(
    node: Any, segments: tuple[str, ...], path: str, matched: Match | None
) -> Iterator[tuple[str, Any, Match | None]]:
    if not segments:
        if node is not None:
            yield path, node, matched
        return
    head, rest = segments[0], segments[1:]
    if head == _LIST:
        if isinstance(node, list):
            for index, value in enumerate(node):
                yield from _expand(value, rest, item(path, index), Match(index, value))
        return
    if not isinstance(node, _MAPPINGS):
        return
    if head == _MAP:
        for key, value in node.items():
            if isinstance(key, str):
                yield from _expand(value, rest, child(path, key), Match(key, value))
        return
    yield from _expand(node.get(head), rest, child(path, head), matched)
