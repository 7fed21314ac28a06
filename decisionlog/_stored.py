"""What a store writes for a record, found in one walk of it when nothing in it needs changing.

:func:`decisionlog._record.storable` walks every value of a record to bound it and make it storable, and
:func:`~decisionlog._record.canonical_parts` walks it again to find whether the standard library's JSON of it
is its JCS form; nearly every record needs neither change nor ``rfc8785``. :func:`stored_form` checks that
in one cheaper walk and encodes the record once; any record it is not sure of takes the general path, whose
result is the same (tests/decisionlog/test_record.py checks both paths against each other).
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Collection
from typing import Any, Final

from decisionlog._record import (
    LIST_FIELDS,
    MAX_ITEMS,
    MAX_LIST_CHARS,
    MAX_TEXT_CHARS,
    DecisionRecord,
    _entries,
    canonical_parts,
    storable,
)
from decisionlog._tree_json import tree_json

_TEXT_LISTS: Final = frozenset({"warnings", "groups"})
#: Encoded records up to this size fit every list bound (see stored_form).
_UNTOUCHED_MAX_BYTES: Final = MAX_LIST_CHARS * 2 // 3
#: Writes JSON values only (no NaN, no infinity): anything else takes the general path.
_STRICT_JSON: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
#: JSON of the parts stored apart (images, engines) by their ``marshal`` bytes, for the parts encoded last:
#: a workload's next admission repeats them, and marshalling them costs about a fifth of walking and encoding
#: them (see :class:`_Apart`). Any thread may use it; bounded in entries and bytes.
_APART: Final[dict[bytes, bytes]] = {}
_APART_MAX: Final = 128
_APART_MAX_BYTES: Final = 32 * 1024
#: The marshal bytes of engine lists :func:`_fits` found to fit (checked on the event loop for every
#: admission, and repeated as the parts apart are); bounded as :data:`_APART` is.
_FITTING: Final[set[bytes]] = set()


def stored_form(
    record: DecisionRecord, apart: Collection[str]
) -> tuple[DecisionRecord, dict[str, Any], tuple[bytes, bytes, bytes]]:
    """:func:`storable` of ``record``, its :meth:`~DecisionRecord.to_json`, and :func:`canonical_parts` of
    that: what a store writes, with the record walked once when nothing in it needs changing (as for nearly
    every record), instead of once to make it storable and once more to find whether JSON of it is JCS.

    The walk (:func:`_untouched`) checks types, text lengths and integer ranges; what it cannot see cheaply
    (a lone surrogate, which UTF-8 cannot encode, or NUL, escaped as ``\\u0000``) and the list bounds are
    checked on the encoded bytes. Anything else takes the general path, whose result is the same.
    """
    data = record.to_json()
    parts_apart = _Apart(data, apart)
    if parts_apart.untouched(data) and all(
        len(entries) <= MAX_ITEMS
        and all(type(entry) is (str if name in _TEXT_LISTS else dict) for entry in entries)
        for name in LIST_FIELDS
        if (entries := getattr(record, name))
    ):
        try:
            parts = canonical_parts(data, apart, plain=parts_apart.json)
        except UnicodeEncodeError:  # a lone surrogate: storable escapes it
            pass
        else:
            # The list bounds count at most 1.5 characters per encoded byte (a bracket pair per container).
            if len(parts[0]) <= _UNTOUCHED_MAX_BYTES and b"\\u0000" not in parts[0]:
                return record, data, parts
    record = storable(record)
    data = record.to_json()
    return record, data, canonical_parts(data, apart)


class _Apart:
    """The parts of one record stored apart (images, engines), looked up in :data:`_APART` by their marshal
    bytes: a part found there passed :func:`_untouched` before and is not walked again, nor encoded.

    Version 0 of ``marshal`` writes each value with its exact type (None, True, False, an integer, text as
    UTF-8, a list, a dict's members in order) and refuses subclasses: equal bytes are the same tree, so the
    same walk and the same JSON. (Equality would not do: ``True == 1``.) A dict whose members come in another
    order, or any other difference, is only walked and encoded anew. A part is remembered only once walked and
    encoded, so one that cannot be (a lone surrogate) is never found.
    """

    __slots__ = ("found", "keys")

    def __init__(self, data: dict[str, Any], apart: Collection[str]) -> None:
        #: By the ``id`` of each part (alive in ``data`` meanwhile): its marshal bytes, and its JSON if known.
        self.keys: dict[int, bytes] = {}
        self.found: dict[int, bytes] = {}
        for name in apart:
            if name not in data:
                continue
            value = data[name]
            try:
                key = marshal.dumps(value, 0)
            except ValueError:  # not of marshal's types, or nested deeper than it goes: walked and encoded
                continue
            self.keys[id(value)] = key
            if (encoded := _APART.get(key)) is not None:
                self.found[id(value)] = encoded

    def untouched(self, data: dict[str, Any]) -> bool:
        """:func:`_untouched` of ``data``, taking the parts found as walked."""
        for key, value in data.items():
            if type(key) is not str or not key.isascii() or len(key) > MAX_TEXT_CHARS:
                return False
            if id(value) not in self.found and not _untouched(value):
                return False
        return True

    def json(self, value: Any) -> bytes:
        """:func:`tree_json` of a part of the record that :meth:`untouched` passed, remembered."""
        encoded = self.found.get(id(value))
        if encoded is None:
            encoded = tree_json(value)
            key = self.keys.get(id(value))
            if key is not None and len(key) <= _APART_MAX_BYTES and len(encoded) <= _APART_MAX_BYTES:
                if len(_APART) >= _APART_MAX:
                    _APART.clear()  # not one by one: clear() is one step for threads sharing the dict
                _APART[key] = encoded
        return encoded


def _untouched(value: Any) -> bool:
    """True when :func:`storable` would leave ``value`` as it is and JSON of it is JCS (``_record._plain``),
    save for lone surrogates and NUL in its text (:func:`stored_form` looks for those in the encoded bytes):
    only dicts with ASCII string keys, lists, strings of at most :data:`MAX_TEXT_CHARS`, integers JCS can
    write, booleans and None, of exactly these types (a subclass or a tuple takes the general path)."""
    kind = type(value)
    if kind is str:
        return len(value) <= MAX_TEXT_CHARS
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or len(key) > MAX_TEXT_CHARS or not _untouched(item):
                return False
        return True
    if kind is list:
        for item in value:  # noqa: SIM110 - a loop, not all() over a generator: this runs per value
            if not _untouched(item):
                return False
        return True
    if kind is int:
        return bool(-(2**53) < value < 2**53)
    return value is None or kind is bool


def engines_left_out(record: DecisionRecord) -> str | None:
    """Why a store could not keep every engine entry of ``record``, in words (None: it keeps them all).

    Change control reads what ran from the records: one that leaves engines out behind its ``{"omitted": N}``
    marker would make it forget them, so the webhook refuses such an admission instead (attack 35a F1).
    """
    engines = record.engines
    if len(engines) <= MAX_ITEMS and _fits(engines):
        return None
    kept = _entries(engines)
    last = kept[-1] if kept and kept is not record.engines else None
    if not (isinstance(last, dict) and set(last) == {"omitted"}):
        return None
    return (
        f"trtguard denies this request: its decision record cannot hold all {len(record.engines)} engine "
        f"entries ({last['omitted']} would be left out: a record keeps at most {MAX_ITEMS} entries and "
        f"{MAX_LIST_CHARS // 1024} KiB in one list), so change control could not remember what it runs; "
        "mount each engine in fewer containers, or split the workload"
    )


def _fits(entries: tuple[Any, ...]) -> bool:
    """True when :func:`~decisionlog._record._entries` would cut nothing from ``entries``, told from their
    JSON (in C) instead of a walk of every value: the bounds count at most 1.5 characters per encoded byte
    (as in :func:`stored_form`); text the record would change (a lone surrogate, NUL, a text cut short)
    either fails to encode, is seen in the bytes, or only shortens what the bounds count. False: not sure."""
    try:  # equal marshal bytes: the same tree (see _Apart), so the same answer
        key: bytes | None = marshal.dumps(entries, 0)
    except ValueError:  # not of marshal's types
        key = None
    if key in _FITTING:
        return True
    try:
        encoded = _STRICT_JSON.encode(list(entries)).encode()
    except (TypeError, ValueError):  # not plain JSON (a lone surrogate is a UnicodeEncodeError, a ValueError)
        return False
    fits = len(encoded) <= _UNTOUCHED_MAX_BYTES and b"\\u0000" not in encoded
    if fits and key is not None and len(key) <= _APART_MAX_BYTES:
        if len(_FITTING) >= _APART_MAX:
            _FITTING.clear()
        _FITTING.add(key)
    return fits
