"""A stored record body's JSON: parsed, telling whether it is plain (:func:`load_json`), canonicalised
(:func:`canonical_of`), and read apart from the shared part a store keeps once (:class:`SharedParts`); JSON
texts a reader depends on held to their canonical bytes (:func:`canonical_object`, :func:`stored_exact`) or
refused where a key appears twice (:func:`unique_json`, :func:`duplicate_key`)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

from decisionlog._errors import DecisionLogError
from decisionlog._record import StoredRecord, canonical_json
from decisionlog._tree_json import tree_json, tree_text

#: The members of a record a store keeps apart, once, as its shared part (``decisionlog._sql.link``): a
#: workload's images and engines with their evidence repeat from one admission to the next. The record's
#: hash covers them as always (the body is given back whole); see docs/decision-log-storage.md.
SHARED_KEYS: Final = ("engines", "images")


class NotText(str):
    """A stored body or shared part that is not text (a BLOB in SQLite, whose JSON functions read a BLOB as
    JSONB), decoded: :func:`load_json` refuses it, so that the chain check names its row (``_sql``)."""

    __slots__ = ()


class _NotPlain(Exception):
    """The body holds a value that sorted compact JSON does not write as RFC 8785 does."""


def _not_plain(_: str) -> NoReturn:
    raise _NotPlain


def _plain_int(text: str) -> int:
    value = int(text)
    if len(text) > 15 and not -(2**53) < value < 2**53:  # JCS cannot write it exactly
        raise _NotPlain
    return value


# Parses only what the fast encoding below writes as JCS: no floats, NaN or infinities, no integer beyond
# ±2^53 (each found by the parser itself, at no cost for the values that are not numbers).
_PLAIN: Final = json.JSONDecoder(parse_float=_not_plain, parse_constant=_not_plain, parse_int=_plain_int)


def load_json(text: str | bytes) -> tuple[Any, bool]:
    """``json.loads(text)``, and whether the text holds no float, NaN, infinity or integer beyond ±2^53
    (found by the parser as it meets them, at no cost for other values): for such data
    :func:`canonical_of` need not walk it to know that sorted compact JSON is RFC 8785."""
    if type(text) is NotText:
        raise ValueError("it is stored as a BLOB, not as text: it was written by other means than trtguard")
    try:
        return _PLAIN.decode(text if isinstance(text, str) else text.decode("utf-8")), True
    except (_NotPlain, ValueError):  # a float, or text only json.loads reads (or none): its answer stands
        return json.loads(text), False


def canonical_of(data: Mapping[str, Any], plain: bool) -> bytes:
    """``canonical_json(data)`` (RFC 8785) of ``data`` parsed by :func:`load_json`, given its ``plain``.

    ``canonical_json`` walks the whole object to decide whether sorted compact JSON is JCS for it; when the
    parser ruled out floats and long integers, ASCII output rules out keys that sort otherwise.
    """
    if plain:
        encoded = tree_json(data)  # parsed from text: a tree
        if encoded.isascii():
            return encoded
    return canonical_json(data)


class SharedParts:
    """The shared parts of the rows of one pass over a log, each parsed (and canonicalised) once.

    A store keeps the parts of a record that repeat from one record to the next (a workload's images and
    engines, most of its bytes) once, and a row's body is its own part joined with the shared one
    (``decisionlog._sql``). Read apart, a row costs the parsing of its own part: the shared part's values
    and canonical members are reused, so the records of a pass share them (records are immutable). Where
    the two parts do not join as two objects simply would (not both non-empty objects, keys in both, a
    float, text beyond ASCII), the answer is None and the caller reads the joined body as before, for the
    same values and the same errors.
    """

    def __init__(self, limit: int = 256, limit_chars: int = 16 * 1024 * 1024) -> None:
        self._parts: dict[str, _Part | None] = {}
        # Bounded in parts and in their text: a part is kept as its values and members too, a few times
        # its text, and a log of a few hundred large parts must not take gigabytes to read (attack 38e F2).
        self._limit = limit
        self._limit_chars = limit_chars
        self._chars = 0

    def load(self, body: str, shared: str) -> dict[str, Any] | None:
        """``load_body`` of ``body`` joined with ``shared``, or None (see the class)."""
        part = self._part(shared)
        if part is None or not body.endswith("}"):
            return None
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return _joined(data, part)

    def canonical(self, body: str, shared: str) -> tuple[dict[str, Any], bytes] | None:
        """``_canonical_body`` of ``body`` joined with ``shared`` (the data, its canonical JSON), or None."""
        found = self.checked(body, shared)
        return None if found is None else found[:2]

    def checked(self, body: str, shared: str) -> tuple[dict[str, Any], bytes, bool] | None:
        """:meth:`canonical`, and whether both texts are exactly the canonical JSON of what they hold (as a
        store writes them: no duplicate key, whitespace or other order of keys; ``decisionlog._chain``)."""
        part = self._part(shared)
        if part is None or part.members is None or not body.endswith("}"):
            return None
        try:
            data, plain = load_json(body)
        except (ValueError, RecursionError):
            return None
        joined = _joined(data, part) if plain else None
        if joined is None:
            return None
        spliced = part.splice_text(data)
        if spliced is None:
            return None
        canonical, own = spliced
        return joined, canonical, part.exact is True and own == body

    def exact(self, body: str, shared: str, data: Mapping[str, Any] | None = None) -> bool:
        """Whether ``body`` (a row's own part) and ``shared`` (its shared part) are each exactly the canonical
        JSON of an object, as a store writes them: the shared part holds the record's :data:`SHARED_KEYS`,
        the own part none of them. The shared part's answer is kept with it: a pass checks it once.

        ``data``: the values of the two joined, where the caller parsed them: the own part is then exact when
        its text is the canonical JSON of the values not the shared part's (a key of both, written twice,
        whitespace or another order differ from it), so it is not parsed again (attack 39b F2)."""
        part = self._part(shared)
        if part is None or not part.is_exact(shared):
            return False
        try:
            if data is not None:
                own = {key: value for key, value in data.items() if key not in part.data}
                return canonical_json(own) == body.encode()
            data, plain = load_json(body)
            if not isinstance(data, dict) or canonical_of(data, plain) != body.encode():
                return False
        except (ValueError, RecursionError, OverflowError):
            return False
        return data.keys().isdisjoint(part.data)

    def text(self, shared: str) -> str:
        """``shared`` as kept here (the copy first read of a part that repeats), for a reader that keeps a
        row's text: the rows of a pass then hold one copy of each part, not one each."""
        part = self._part(shared)
        return shared if part is None else part.text

    def _part(self, shared: str) -> _Part | None:
        try:
            return self._parts[shared]
        except KeyError:
            pass
        part = _Part.parse(shared)
        if len(shared) > self._limit_chars:
            return part
        # A log of many distinct parts: the oldest go.
        while self._parts and (
            len(self._parts) >= self._limit or self._chars + len(shared) > self._limit_chars
        ):
            self._chars -= len(oldest := next(iter(self._parts)))
            del self._parts[oldest]
        self._parts[shared] = part
        self._chars += len(shared)
        return part


@dataclass(frozen=True, slots=True)
class _Plan:
    """Where a shared part's members go in the canonical JSON of a body's own part, for one order of its
    keys: each (a search for the own member they precede, ``,"key":``; None: the end) with the members.

    The search finds the member at the top level where the own members before it hold no object (checked
    per row, ``guard``): in the compact JSON of strings, numbers, literals and lists of them, ``"`` followed
    by ``:`` comes only after a key (a quote inside a string is written ``\\"``).
    """

    insertions: tuple[tuple[str | None, str], ...]
    guard: tuple[str, ...]


@dataclass(slots=True)
class _Part:
    """One shared part: its values, and the canonical JSON of each of its members (None: not plain ASCII)."""

    data: dict[str, Any]
    members: dict[str, str] | None
    #: The part's text.
    text: str = ""
    #: Whether the part is as a store writes it: exactly the canonical JSON of its values, which are a
    #: record's :data:`SHARED_KEYS` (None: not found yet, where ``members`` is None: :meth:`is_exact`).
    exact: bool | None = None
    #: The keys of a body's own part (as parsed, in order) → how its canonical JSON joins with this part's.
    plans: dict[tuple[str, ...], _Plan | None] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> _Part | None:
        if not text.startswith("{"):
            return None
        try:
            data, plain = load_json(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(data, dict) or not data:
            return None
        members: dict[str, str] | None = None
        if plain:
            members = {key: tree_text({key: value})[1:-1] for key, value in data.items()}
            if not all(member.isascii() for member in members.values()):
                members = None
        exact = None if members is None else tuple(data) == SHARED_KEYS and text == _object_text(members)
        return cls(data, members, text, exact)

    def is_exact(self, text: str) -> bool:
        """:attr:`exact`, found once (``text``: this part's)."""
        if self.exact is None:
            try:
                canonical = canonical_json(self.data)
                self.exact = tuple(sorted(self.data)) == SHARED_KEYS and canonical == text.encode()
            except (ValueError, RecursionError, OverflowError):
                self.exact = False
        return self.exact

    def splice(self, own: dict[str, Any]) -> bytes | None:
        """:meth:`splice_text`'s canonical JSON."""
        spliced = self.splice_text(own)
        return None if spliced is None else spliced[0]

    def splice_text(self, own: dict[str, Any]) -> tuple[bytes, str] | None:
        """The canonical JSON of ``own`` joined with this part (``tree_json`` of both together), or None
        where it is not ASCII, ``own``'s keys are not sorted or hold an object before a place where a member
        of this part goes. ``own`` is encoded once and this part's members, kept, are put in their places:
        a JCS object is its members in order, each as it is alone. With the canonical JSON, that of ``own``
        alone."""
        keys = tuple(own)
        try:
            plan = self.plans[keys]
        except KeyError:
            if len(self.plans) >= _PLANS:
                self.plans.clear()
            plan = self.plans[keys] = self._plan(keys)
        if plan is None:  # keys not in sorted order (not as trtguard writes them): the general way
            return None
        for key in plan.guard:
            value = own[key]
            if type(value) not in _FLAT and not (
                type(value) is list and all(type(v) in _FLAT for v in value)
            ):
                return None
        text = tree_text(own)
        pieces: list[str] = []
        done = 0
        for search, members in plan.insertions:
            at = len(text) - 1 if search is None else text.find(search, done)
            if at < 0:
                return None
            pieces += (text[done:at], ",", members)
            done = at
        pieces.append(text[done:])
        encoded = "".join(pieces)
        return (encoded.encode(), text) if encoded.isascii() else None

    def _plan(self, keys: tuple[str, ...]) -> _Plan | None:
        members = self.members
        if members is None or list(keys) != sorted(keys):
            return None
        insertions: list[tuple[str | None, str]] = []
        guard: tuple[str, ...] = ()
        for key in sorted(members):
            after = [own for own in keys if own > key]
            if after and (after[0] == keys[0] or not _PLAIN_KEY.fullmatch(after[0])):
                return None  # before every own member (no comma to find), or a key written with escapes
            search = f',"{after[0]}":' if after else None
            if insertions and insertions[-1][0] == search:
                insertions[-1] = (search, f"{insertions[-1][1]},{members[key]}")
            else:
                insertions.append((search, members[key]))
            if after:
                guard = tuple(own for own in keys if own < after[0])
        return _Plan(tuple(insertions), guard)


#: Orders of keys kept per shared part (a record's format fixes them: a log holds one or two).
_PLANS: Final = 16
#: Values whose compact JSON holds no key.
_FLAT: Final = frozenset({str, int, float, bool, type(None)})
#: Keys written in JSON as they are.
_PLAIN_KEY: Final = re.compile("[a-z_]+")


def _object_text(members: dict[str, str]) -> str:
    """The canonical JSON of an object from the canonical JSON of each of its members (keys sorted)."""
    return "{" + ",".join(members[key] for key in sorted(members)) + "}"


def _flat(value: Any) -> bool:
    """Whether the compact JSON of ``value`` holds no key: a scalar, or a list of them."""
    return type(value) in _FLAT or (type(value) is list and all(type(v) in _FLAT for v in value))


def _joined(data: Any, part: _Part) -> dict[str, Any] | None:
    """``data`` (a body's own part, parsed) with ``part``'s members after its own: the values of the
    joined text, where both are non-empty objects without a key in common; else None."""
    if not isinstance(data, dict) or not data or not data.keys().isdisjoint(part.data):
        return None
    return data | part.data


def duplicate_key(text: str | bytes) -> str | None:
    """The first key found twice in one object of ``text`` (None: none, or not JSON); linear in its keys."""
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if not found:
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    found.append(key)
                    break
                seen.add(key)
        return dict(items)

    try:
        json.loads(text, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    return found[0] if found else None


def twice(key: str) -> str:
    """What a key found twice in one object means, in words."""
    return f"the key {key!r} appears twice in one object (JSON readers differ on which value counts)"


def canonical_object(text: str | bytes, *, what: str, where: str | None = None) -> dict[str, Any]:
    """The JSON object ``text`` holds where ``text`` is exactly its canonical JSON (RFC 8785), as trtguard
    writes ``what`` (a stored checkpoint statement, a carried row, a segment's carried state); else
    :class:`DecisionLogError` naming ``what``, ``where`` and why (a key twice, other text for the values)."""
    try:
        raw = text.encode() if isinstance(text, str) else text
        data, plain = load_json(raw)
        exact = isinstance(data, dict) and canonical_of(data, plain) == raw
    except (ValueError, RecursionError, OverflowError) as error:
        raise DecisionLogError(f"{what} is not JSON: {error}", location=where) from None
    if not isinstance(data, dict):
        raise DecisionLogError(f"{what} is not a JSON object", location=where)
    if not exact:
        key = duplicate_key(raw)
        why = twice(key) if key is not None else "other text for the same values (whitespace, order of keys)"
        raise DecisionLogError(f"{what} is not the canonical JSON (RFC 8785) written: {why}", location=where)
    return data


class _Twice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(items: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(items)
    if len(found) < len(items):
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise _Twice(key)
            seen.add(key)
    return found


def unique_json(text: str | bytes, *, what: str, where: str | None = None) -> Any:
    """``json.loads(text)`` (its errors as they are), but :class:`DecisionLogError` naming ``what``, ``where``
    and the key where an object holds a key twice: for JSON whose layout trtguard does not fix (a checkpoint
    file, which people copy), only that makes readers disagree on what it says."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except _Twice as error:
        raise DecisionLogError(f"{what} is not valid: {twice(error.key)}", location=where) from None


#: Shared parts of the records checked by :func:`stored_exact`, each checked once (under the lock).
_CHECKED: Final = SharedParts(limit=64)
_CHECKED_LOCK: Final = threading.Lock()


def stored_exact(stored: StoredRecord) -> bool | None:
    """Whether ``stored`` was read from text that is exactly the canonical JSON its hash covers, as the chain
    check requires (``decisionlog._chain``): the body whole, or its own part and its shared part as a store
    writes them. None: its text was not kept (not read by a store's query)."""
    if stored.text is None:
        return None
    body, part = stored.text
    if type(body) is NotText or type(part) is NotText:
        return False  # (equal to the text of a part kept as text, which a look-up by it would find)
    if part is not None:
        with _CHECKED_LOCK:
            return _CHECKED.exact(body, part)
    try:
        data, plain = load_json(body)
        return isinstance(data, dict) and canonical_of(data, plain) == body.encode()
    except (ValueError, RecursionError, OverflowError):
        return False
