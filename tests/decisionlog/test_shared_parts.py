"""``SharedParts``: a body and its shared part read apart give what the joined body gives, or nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decisionlog import DecisionLogError, DecisionRecord
from decisionlog._body_json import SharedParts
from decisionlog._chain import _canonical_body
from decisionlog._record import load_body
from decisionlog._sql import SHARED_KEYS, _whole_body

_TEXT = st.text(max_size=12) | st.sampled_from(["\x00", "a\ud800", "é", '",\\"', "engines"])
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT
_VALUES: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)
_KEYS = st.sampled_from(["allowed", "dry_run", "engines", "format", "images", "kind", "z", "é"]) | _TEXT
_OBJECTS = st.dictionaries(_KEYS, _VALUES, max_size=5)


def _general(body: str, shared: str) -> tuple[Any, ...]:
    """What the readers did before: the joined body, parsed (and canonicalised), or the error."""
    whole = _whole_body(body, shared)
    try:
        loaded: Any = load_body(whole)
    except DecisionLogError as error:
        loaded = error.message
    try:
        canonical: Any = _canonical_body(whole)
    except DecisionLogError as error:
        canonical = error.message
    return loaded, canonical


def _text(data: dict[str, Any], *, sort: bool, spaced: bool) -> str:
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(data, sort_keys=sort, separators=separators, ensure_ascii=False)


@given(_OBJECTS, _OBJECTS, st.booleans(), st.booleans())
def test_read_apart_is_the_joined_body_or_nothing(
    own: dict[str, Any], part: dict[str, Any], sort: bool, spaced: bool
) -> None:
    body, shared = _text(own, sort=sort, spaced=spaced), _text(part, sort=True, spaced=False)
    loaded, canonical = _general(body, shared)
    parts = SharedParts()
    for _ in range(2):  # the part as first met, then as kept
        apart = parts.load(body, shared)
        assert apart is None or (apart == loaded and list(apart) == list(loaded))
        both = parts.canonical(body, shared)
        assert both is None or (both == canonical and list(both[0]) == list(canonical[0]))


@pytest.mark.parametrize(
    ("body", "shared"),
    [
        ("{}", '{"engines":[]}'),
        ('{"a":1}', "{}"),
        ('{"a":1} ', '{"engines":[]}'),
        ('{"a":1}', ' {"engines":[]}'),
        ('{"a":1}', '{"engines":[]} '),
        ('{"a":1,"engines":2}', '{"engines":[]}'),
        ('{"b":1,"a":2}', '{"engines":[]}'),
        ('{"a":1.5}', '{"engines":[]}'),
        ('{"a":1}', '{"engines":[1.5]}'),
        ('{"a":"é"}', '{"engines":[]}'),
        ('{"a":1', '{"engines":[]}'),
        ('{"a":1}', '{"engines":[}'),
        ("[1]", '{"engines":[]}'),
        ('{"a":"\\ud800"}', '{"engines":[]}'),
        ('{"a":9007199254740993}', '{"engines":[]}'),
        ('{"a":{"kind":1},"kind":2}', '{"images":[]}'),
        ('{"a":[{"kind":1}],"kind":2}', '{"images":[]}'),
        ('{"a":"x,\\"kind\\":","b":["y\\\\",",\\"kind\\":"],"kind":2}', '{"images":[]}'),
        ('{"a":1,"kind":2}', '{"b":"x","engines":[],"images":{},"z":null}'),
        ('{"engines":1}', '{"a":[]}'),
        ('{"a":1,"k\\u0069nd":2}', '{"images":[]}'),
    ],
)
def test_what_does_not_join_simply_is_left_to_the_joined_body(body: str, shared: str) -> None:
    loaded, canonical = _general(body, shared)
    parts = SharedParts()
    apart, both = parts.load(body, shared), parts.canonical(body, shared)
    assert apart is None or apart == loaded
    assert both is None or both == canonical


def test_a_record_read_apart_is_the_record(make_record: Any) -> None:
    record: DecisionRecord = make_record(
        engines=({"reference": "r@sha256:" + "a" * 64, "digest": "sha256:" + "a" * 64},),
        images=({"reference": "i", "digest": None},),
    )
    data = record.to_json()
    own = {key: value for key, value in data.items() if key not in SHARED_KEYS}
    part = {key: data[key] for key in SHARED_KEYS}
    body, shared = _text(own, sort=True, spaced=False), _text(part, sort=True, spaced=False)
    parts = SharedParts()
    assert parts.load(body, shared) == data
    assert parts.canonical(body, shared) == (data, record.canonical())
    assert DecisionRecord.from_json(data) == record


def test_the_parts_kept_are_bounded_by_their_text_and_still_read_right() -> None:
    # A log of a few hundred large distinct parts took gigabytes to read (attack 38e F2).
    parts = SharedParts(limit_chars=10_000)
    body = '{"allowed":true,"uid":"u"}'
    for n in range(40):
        shared = json.dumps({"images": [{"reference": f"r{n}", "pad": "x" * 3_000}]}, separators=(",", ":"))
        assert parts.load(body, shared) == _general(body, shared)[0]
        assert parts.canonical(body, shared) == _general(body, shared)[1]
        assert sum(map(len, parts._parts)) <= 10_000
    huge = json.dumps({"images": ["y" * 20_000]}, separators=(",", ":"))  # larger than the bound: not kept
    assert parts.load(body, huge) == _general(body, huge)[0]
    assert huge not in parts._parts
