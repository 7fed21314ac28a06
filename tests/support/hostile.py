"""Hostile evidence for the readers' fuzz tests (issue 24 item 11): valid documents with mutated fields,
types and sizes, and mutated bytes, as hypothesis strategies; and the one assertion the tests make of a
reader: it reads, or it refuses with a typed error (``VerificationError`` or ``InputError``), within bounds.
"""

from __future__ import annotations

import copy
import json
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from hypothesis import strategies as st

from verifier.base._errors import InputError, VerificationError

T = TypeVar("T")
Path = tuple[str | int, ...]

#: What a reader may spend on one document: far above what any of them needs (milliseconds; parsed JSON
#: takes about ten times its text), so that only a runaway trips it; memory grows with the input's size.
MAX_CPU_SECONDS = 10.0
BASE_PYTHON_BYTES = 64 * 1024 * 1024
#: The most one "grow" mutation makes of a value (documents stay within a few MiB, as evidence files do).
MAX_GROWN_BYTES = 512 * 1024
PYTHON_BYTES_PER_INPUT_BYTE = 64

#: JSON-like values of every type, small and big: what a mutated field becomes.
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "\x00",
            "\ud800",  # a lone surrogate: not encodable as UTF-8
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00Z",
            "2024-02-30T00:00:00Z",
            "+275760-09-13T00:00:00Z",
            "1e309",
            "sha256:" + "a" * 64,
            "pkg:pypi/a@1",
            "CVE-2024-0001",
            "critical",
            "NaN",
        ]
    ),
)
JSON_VALUES = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=6), st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=25,
)


def _paths(document: Any) -> Iterator[Path]:
    """Where a mutation may go: every value down to :data:`_MAX_PATH_DEPTH` (the first few of long lists)."""
    pending: list[tuple[Path, Any]] = [((), document)]
    while pending:
        prefix, value = pending.pop()
        yield prefix
        if len(prefix) >= _MAX_PATH_DEPTH:
            continue
        if isinstance(value, dict):
            pending += [((*prefix, key), item) for key, item in value.items()]
        elif isinstance(value, list):
            pending += [((*prefix, index), item) for index, item in enumerate(value[:_MAX_PATH_ITEMS])]


_MAX_PATH_DEPTH = 12
_MAX_PATH_ITEMS = 8


def _get(document: Any, path: Path) -> Any:
    for step in path:
        document = document[step]
    return document


def _set(document: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    _get(document, path[:-1])[path[-1]] = value
    return document


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for level in range(depth):
        value = [value] if level % 2 else {"components": [value], "name": "n"}
    return value


@st.composite
def mutated(draw: st.DrawFn, valid: Any, *, max_mutations: int = 4) -> Any:
    """``valid`` (a parsed JSON document) with one to ``max_mutations`` fields replaced by other types or
    values, removed, grown (long strings, long lists, deep nesting) or given extra keys."""
    document = copy.deepcopy(valid)
    for _ in range(draw(st.integers(min_value=1, max_value=max_mutations))):
        path = draw(st.sampled_from(list(_paths(document))))
        target = _get(document, path)
        operation = draw(st.sampled_from(["replace", "remove", "grow", "nest", "add"]))
        if operation == "remove" and path:
            parent = _get(document, path[:-1])
            del parent[path[-1]]
        elif operation == "grow":
            # Big, not unbounded: the grown value stays under MAX_GROWN_BYTES of JSON.
            size = len(json.dumps(target, default=str)) + 1
            times = min(draw(st.sampled_from([2, 100, 5000])), max(1, MAX_GROWN_BYTES // size))
            grown = (
                target * times
                if isinstance(target, str | list)
                else [copy.deepcopy(target) for _ in range(min(times, 200))]
            )
            document = _set(document, path, grown)
        elif operation == "nest":
            # Deeper than this the test's own json.dumps refuses; deeper text is raw_nesting's.
            document = _set(document, path, _nested(draw(st.sampled_from([50, 300]))))
        elif operation == "add" and isinstance(target, dict):
            target[draw(st.text(max_size=12))] = draw(JSON_VALUES)
        else:
            document = _set(document, path, draw(JSON_VALUES))
    return document


@st.composite
def mutated_bytes(draw: st.DrawFn, valid: bytes) -> bytes:
    """``valid`` with bytes flipped, cut, repeated or inserted (OpenPGP packets, base64 armor, JSON text)."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not data:
            data += draw(st.binary(max_size=64))
            continue
        position = draw(st.integers(min_value=0, max_value=len(data) - 1))
        operation = draw(st.sampled_from(["flip", "cut", "repeat", "insert", "truncate", "set"]))
        if operation == "flip":
            data[position] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif operation == "set":
            data[position] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xFF]))
        elif operation == "cut":
            end = draw(st.integers(min_value=position, max_value=min(len(data), position + 64)))
            del data[position:end]
        elif operation == "repeat":
            end = draw(st.integers(min_value=position, max_value=min(len(data), position + 256)))
            data[end:end] = data[position:end] * draw(st.sampled_from([1, 2, 50]))
        elif operation == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=32))
        else:
            del data[position:]
    return bytes(data)


def raw_nesting(depth: int) -> bytes:
    """JSON text nested ``depth`` deep (arrays in objects), beyond what Python's json module recurses into."""
    return b'{"a": [' * depth + b"1" + b"]}" * depth


def read_or_refuse(read: Callable[[], T], *, size: int = 0, measure_memory: bool = True) -> T | None:
    """``read()``'s result, or None when it refused with a ``VerificationError`` or an ``InputError``.

    Any other exception propagates (the test fails with it), and so does a read of an input of ``size``
    bytes that uses more than :data:`MAX_CPU_SECONDS` of CPU or, where measured, more Python memory than
    :data:`BASE_PYTHON_BYTES` and :data:`PYTHON_BYTES_PER_INPUT_BYTE` for each byte of input.
    """
    limit = BASE_PYTHON_BYTES + PYTHON_BYTES_PER_INPUT_BYTE * size
    if measure_memory:
        tracemalloc.start()
    start = time.process_time()
    try:
        return read()
    except (VerificationError, InputError) as refusal:
        assert refusal.message, "a refusal says why"
        return None
    finally:
        spent = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1] if measure_memory else 0
        if measure_memory:
            tracemalloc.stop()
        assert spent < MAX_CPU_SECONDS, f"the reader spent {spent:.1f} s of CPU on one document"
        assert peak < limit, (
            f"the reader allocated {peak / 2**20:.0f} MiB for {size / 2**20:.1f} MiB of input"
        )
