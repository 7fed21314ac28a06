"""The envelope of an AdmissionReview body that ``json.loads`` refused for its depth or a too-long integer.

Such a body can be a well-formed review: the API server accepts JSON nested up to 10,000 levels (a custom
resource with ``x-kubernetes-preserve-unknown-fields`` carries free-form objects) and integers of any length,
where Python's decoder stops near its recursion limit and at ``sys.get_int_max_str_digits()`` digits. Its
uid can still be read, so the webhook answers it with a denial instead of the HTTP 400 that ``failurePolicy:
Ignore`` admits.

:func:`salvage` reads only the body's first :data:`WINDOW_BYTES`, token by token without recursion
(the API server writes ``request.uid`` first in ``request``, and the envelope's other fields but
``dryRun`` before ``request.object``), so the failure path costs a bounded amount of work whatever the
body holds. It keeps
the envelope's fields, as ``json.loads`` would decode them from the part read (the last of duplicate keys,
escapes decoded), and nothing at other places: a ``"uid"`` inside a string, at another depth or under
another key is never taken.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import Any, Final

#: How much of the body is read: the envelope before ``request.object`` is a few KiB.
WINDOW_BYTES: Final = 64 * 1024

#: A value that is not what the envelope expects there (a number, a list where a string belongs): kept so
#: that a later field or check does not see an earlier one, and never equal to a string.
OTHER: Final = object()

# The fields read: a dict of fields, a one-item list for a list of such items, None for a scalar.
_ENVELOPE: Final[dict[str, Any]] = {
    "apiVersion": None,
    "kind": None,
    "request": {
        "uid": None,
        "kind": {"group": None, "version": None, "kind": None},
        "subResource": None,
        "name": None,
        "namespace": None,
        "operation": None,
        "userInfo": {"username": None, "groups": [None]},
        "dryRun": None,
    },
}
_MISSING: Final = object()
_OUTSIDE_OBJECT: Final = (True, None, None)
_OUTSIDE_ARRAY: Final = (False, None, None)

_WHITESPACE = re.compile(r"[ \t\n\r]++")
# A JSON string as json.loads (strict) reads it: no control characters, only the escapes JSON defines.
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"')
# json.scanner.NUMBER_RE, and the constants json.loads accepts; group 2 or 3 makes it no integer.
_SCALAR = re.compile(
    r"(-?(?:0|[1-9][0-9]*+))(\.[0-9]++)?([eE][-+]?[0-9]++)?|true|false|null|NaN|Infinity|-Infinity"
)
_CONSTANTS: Final[dict[str, object]] = {"true": True, "false": False, "null": None}

# What the scanner expects next.
_VALUE, _FIRST_ITEM, _FIRST_KEY, _KEY, _COLON, _AFTER = range(6)


@dataclass(frozen=True, slots=True)
class Salvaged:
    """What :func:`salvage` read.

    ``document`` is the top-level object with the envelope's fields found (``request`` a dict of its own
    fields), or None when the body is no JSON object; a field of another type than expected is
    :data:`OTHER`. ``deepest`` names the field (``request.object``) that holds the deepest nesting seen, when
    that reached the ``deep`` asked for; ``long_number`` names the field that holds the first integer of more
    than ``max_digits`` digits seen.
    """

    document: dict[str, Any] | None
    deepest: str | None
    long_number: str | None


def salvage(body: bytes, *, deep: int, max_digits: int) -> Salvaged:
    """The envelope of ``body``, read from its first :data:`WINDOW_BYTES` (see the module's doc).

    ``max_digits`` 0 means no limit, as for ``sys.set_int_max_str_digits``.
    """
    try:
        # As json.loads decodes bytes; a character cut at the window's end is left out, not an error.
        decoder = codecs.getincrementaldecoder(json.detect_encoding(body))("surrogatepass")
        text = decoder.decode(body[:WINDOW_BYTES])
    except (UnicodeDecodeError, LookupError):
        return Salvaged(None, None, None)
    return _Scan(text, deep, max_digits).run()


class _Scan:
    """One pass over ``text``: a stack of open containers, each ``(is_object, fields, node)`` where
    ``fields`` is the part of :data:`_ENVELOPE` it holds and ``node`` what was read of it (both None for a
    container outside the envelope)."""

    def __init__(self, text: str, deep: int, max_digits: int) -> None:
        self.text = text
        self.deep = deep
        self.max_digits = max_digits
        self.root: dict[str, Any] | None = None
        self.stack: list[tuple[bool, Any, Any]] = []
        self.key: str = ""  # the key whose value comes next, in an object of the envelope
        self.head: list[str] = []  # the keys of the two outermost objects open: where something is
        self.head_moved = True  # since deepest was named
        self.depth_seen = 0
        self.deepest: str | None = None
        self.long_number: str | None = None

    def run(self) -> Salvaged:
        text, stack = self.text, self.stack
        end = len(text)
        position = 0
        expect = _VALUE
        while position < end:
            char = text[position]
            if char in " \t\n\r":
                match = _WHITESPACE.match(text, position)
                position = match.end() if match else position + 1
                continue
            if expect <= _FIRST_ITEM and char != "]" and stack and stack[-1][1] is None:
                # A value outside the envelope (below its top two levels), the bulk of a hostile body.
                if char in "{[":
                    stack.append(_OUTSIDE_OBJECT if char == "{" else _OUTSIDE_ARRAY)
                    if len(stack) > self.depth_seen:
                        self._deeper()
                    expect = _FIRST_KEY if char == "{" else _FIRST_ITEM
                    position += 1
                    continue
                match = (_STRING if char == '"' else _SCALAR).match(text, position)
                if match is None:
                    break
                if match.lastindex == 1:
                    self._integer(match.group())
                position = match.end()
                expect = _AFTER
                continue
            if expect == _AFTER:
                if not stack:
                    break  # the top-level value ended
                if char == ",":
                    expect = _KEY if stack[-1][0] else _VALUE
                elif char == ("}" if stack[-1][0] else "]"):
                    stack.pop()
                else:
                    break
                position += 1
            elif expect == _COLON:
                if char != ":":
                    break
                expect = _VALUE
                position += 1
            elif expect in (_FIRST_KEY, _KEY):
                if char == "}" and expect == _FIRST_KEY:
                    stack.pop()
                    expect = _AFTER
                    position += 1
                    continue
                match = _STRING.match(text, position) if char == '"' else None
                if match is None:
                    break
                position = match.end()
                self._read_key(match.group())
                expect = _COLON
            elif char == "]" and expect == _FIRST_ITEM:
                stack.pop()
                expect = _AFTER
                position += 1
            else:
                read = self._read_value(char, position)
                if read < 0:
                    break
                position = read
                expect = _FIRST_KEY if char == "{" else _FIRST_ITEM if char == "[" else _AFTER
        return Salvaged(self.root, self.deepest, self.long_number)

    def _read_key(self, token: str) -> None:
        stack = self.stack
        depth = len(stack)
        if stack[-1][1] is not None or depth <= 2:
            key: str = json.loads(token)
            self.key = key
            if depth <= 2:
                del self.head[depth - 1 :]
                self.head.append(key)
                self.head_moved = True

    def _read_value(self, char: str, position: int) -> int:
        """Reads the value (or the opening of the container) at ``position``; the position after it, or -1
        where no JSON value starts."""
        stack = self.stack
        if not stack:
            if char != "{":
                return -1
            fields: Any = _ENVELOPE
        else:
            is_object, parent_fields, _ = stack[-1]
            if parent_fields is None:
                fields = _MISSING
            elif is_object:
                fields = parent_fields.get(self.key, _MISSING)
            else:
                fields = parent_fields[0]
        if char in "{[":
            is_object = char == "{"
            if fields is not _MISSING and isinstance(fields, dict if is_object else list):
                node: Any = {} if is_object else []
                self._store(node)
                stack.append((is_object, fields, node))
            else:
                self._store_other(fields)
                stack.append(_OUTSIDE_OBJECT if is_object else _OUTSIDE_ARRAY)
            depth = len(stack)
            if depth <= 2:
                del self.head[depth - 1 :]
                self.head_moved = True
            if depth > self.depth_seen:
                self._deeper()
            return position + 1
        if char == '"':
            match = _STRING.match(self.text, position)
            if match is None:
                return -1
            if fields is None:
                self._store(json.loads(match.group()))
            else:
                self._store_other(fields)
            return match.end()
        match = _SCALAR.match(self.text, position)
        if match is None:
            return -1
        token = match.group()
        if match.lastindex == 1:
            self._integer(token)
        if fields is None and token in _CONSTANTS:
            self._store(_CONSTANTS[token])
        else:
            self._store_other(fields)
        return match.end()

    def _integer(self, token: str) -> None:
        """Notes where the first integer of more digits than json.loads converts is."""
        if 0 < self.max_digits < len(token) - token.startswith("-") and self.long_number is None:
            self.long_number = ".".join(self.head)

    def _deeper(self) -> None:
        """The stack is deeper than ever: where the deepest nesting is, once it reaches ``deep``."""
        self.depth_seen = len(self.stack)
        if self.depth_seen >= self.deep and self.head_moved:
            self.deepest = ".".join(self.head)
            self.head_moved = False

    def _store(self, value: object) -> None:
        """Keeps ``value`` as the field being read (the parent is in the envelope: the caller checked)."""
        if not self.stack:
            self.root = value if isinstance(value, dict) else None
            return
        is_object, _, node = self.stack[-1]
        if is_object:
            node[self.key] = value
        else:
            node.append(value)

    def _store_other(self, fields: object) -> None:
        if fields is not _MISSING:
            self._store(OTHER)
