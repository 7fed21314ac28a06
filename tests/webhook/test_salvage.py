"""webhook/_salvage.py: the envelope of a body json.loads refused, read without recursion from its start."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook._salvage import OTHER, WINDOW_BYTES, Salvaged, salvage

HEAD = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}


def _read(body: bytes, *, deep: int = 500, max_digits: int = 4300) -> Salvaged:
    return salvage(body, deep=deep, max_digits=max_digits)


def _uid(envelope: Salvaged) -> object:
    """The request.uid read, or None where there is no request object."""
    request = (envelope.document or {}).get("request")
    return request.get("uid") if isinstance(request, dict) else None


# Keys that the envelope reads, at every place: a "uid" anywhere else must never be taken.
_KEYS = st.sampled_from(["uid", "request", "kind", "apiVersion", "object", "x", "u\\id", 'u"id', "üid"])
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS | st.sampled_from(['"uid": "evil"', "uid", '{"uid": "x"}']),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(_KEYS | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def _documents(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = draw(st.dictionaries(_KEYS, _VALUES, max_size=5))
    if draw(st.booleans()):
        request["uid"] = draw(st.text(min_size=0, max_size=12) | _VALUES)
    document: dict[str, Any] = draw(st.dictionaries(_KEYS, _VALUES, max_size=3))
    document.update(HEAD if draw(st.booleans()) else {})
    document["request"] = request if draw(st.integers(0, 5)) else draw(_VALUES)
    order = draw(st.permutations(list(document)))
    return {key: document[key] for key in order}


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    document=_documents(),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 1, "\t"]),
    encoding=st.sampled_from(["utf-8", "utf-16", "utf-32-le"]),
)
def test_the_uid_read_is_exactly_the_one_json_loads_reads(
    document: dict[str, Any], ascii_only: bool, indent: int | str | None, encoding: str
) -> None:
    body = json.dumps(document, ensure_ascii=ascii_only, indent=indent).encode(encoding)
    assert len(body) < WINDOW_BYTES
    decoded = json.loads(body)
    request = decoded["request"]
    envelope = _read(body)
    assert envelope.document is not None
    found = {"uid": _uid(envelope), "apiVersion": envelope.document.get("apiVersion")}
    expected = {
        "uid": request.get("uid") if isinstance(request, dict) else None,
        "apiVersion": decoded.get("apiVersion"),
    }
    for field, value in expected.items():
        if isinstance(value, str):
            assert found[field] == value
        else:
            assert not isinstance(found[field], str), f"took {found[field]!r} from elsewhere"


@pytest.mark.parametrize(
    ("body", "uid"),
    [
        (b'{"request": {"u\\u0069d": "a\\"b\\\\\\u00e9\\ud800"}}', 'a"b\\\u00e9\ud800'),
        (b'{"request": {"x": "\\"uid\\": \\"evil\\"", "uid": "good"}}', "good"),
        (b'{"request": {"x": {"uid": "evil"}, "y": [{"uid": "evil"}]}}', None),
        (b'{"x": {"request": {"uid": "evil"}}, "request": {}}', None),
        (b'{"uid": "evil", "request": {"uid\\"": "evil"}}', None),
        # json.loads keeps the last of duplicate keys: so does the envelope.
        (b'{"request": {"uid": "first", "uid": "last"}}', "last"),
        (b'{"request": {"uid": "first"}, "request": {"name": "n"}}', None),
        (b'{"request": {"uid": ["a"]}}', OTHER),
        (b'\xef\xbb\xbf{"request": {"uid": "bom"}}', "bom"),
        (b' \r\n\t{ "request" : { "uid" : "spaced" } }', "spaced"),
    ],
)
def test_a_uid_only_at_its_place(body: bytes, uid: object) -> None:
    assert _uid(_read(body)) == uid


@pytest.mark.parametrize(
    "body",
    [
        b'["request", {"uid": "x"}]',
        b'"{\\"request\\": {\\"uid\\": \\"x\\"}}"',
        b'{"request" {"uid": "x"}}',
        b'{"request": {"uid": "x\x01"}}',  # a control character: json.loads refuses the string
        b'{"request": {"uid": "\\x41"}}',  # no such escape in JSON
    ],
)
def test_no_envelope_where_json_has_none(body: bytes) -> None:
    assert not isinstance(_uid(_read(body)), str)


def test_the_fields_of_the_envelope_are_read() -> None:
    request = {
        "uid": "u-1",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"resource": "deployments"},
        "name": "n",
        "namespace": "ns",
        "operation": "UPDATE",
        "userInfo": {"username": "me", "groups": ["a", 7, "b"], "extra": {"k": ["v"]}},
        "object": {"kind": {"kind": "evil"}, "uid": "evil"},
        "oldObject": None,
        "dryRun": True,
    }
    envelope = _read(json.dumps({**HEAD, "request": request}).encode())
    assert envelope.document == {
        **HEAD,
        "request": {
            "uid": "u-1",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "name": "n",
            "namespace": "ns",
            "operation": "UPDATE",
            "userInfo": {"username": "me", "groups": ["a", OTHER, "b"]},
            "dryRun": True,
        },
    }
    assert (envelope.deepest, envelope.long_number) == (None, None)


def _review(value: bytes) -> bytes:
    body = json.dumps({**HEAD, "request": {"uid": "u-1", "object": {"spec": "HERE"}, "oldObject": None}})
    return body.encode().replace(b'"HERE"', value)


def test_where_the_nesting_and_the_long_number_are() -> None:
    deep = _read(_review(b"[" * 990 + b"]" * 990))
    assert (_uid(deep), deep.deepest, deep.long_number) == ("u-1", "request.object", None)
    assert _read(_review(b"[" * 400 + b"]" * 400)).deepest is None
    long = _read(_review(b"[1.5, " + b"9" * 4301 + b"e1, -" + b"9" * 4301 + b"]"))
    assert (_uid(long), long.deepest, long.long_number) == ("u-1", None, "request.object")
    assert _read(_review(b"-" + b"9" * 4300)).long_number is None
    assert _read(_review(b"9" * 4301), max_digits=0).long_number is None
    top = _read(b'{"x": ' + b"9" * 5000 + b', "request": {"uid": "u"}}')
    assert (_uid(top), top.long_number) == ("u", "x")


def test_only_the_window_is_read() -> None:
    pad = b" " * WINDOW_BYTES
    assert _uid(_read(b'{"request": {' + pad + b'"uid": "late"}}')) is None
    body = _review(b'"' + b"x" * WINDOW_BYTES + b'"')
    assert _uid(_read(body)) == "u-1"
    # A character cut at the window's end is no decoding error.
    cut = b'{"request": {"uid": "u", "x": "' + "é".encode() * WINDOW_BYTES + b'"}}'
    assert _uid(_read(cut)) == "u"


@pytest.mark.parametrize(
    "body",
    [
        b"[" * (3 << 20),
        b'"' * (3 << 20),
        b"{" * (3 << 20),
        b'{"a":' + b"[" * (3 << 20),
        b'{"a":' * (3 << 19),
        _review(b"[" * (3 << 20)),
        _review(b"[" + b"0," * (3 << 19)),
        _review(b'["' + b'\\"' * (3 << 19)),
        _review(b"9" * (3 << 20)),
    ],
)
def test_hostile_bodies_cost_a_bounded_amount(body: bytes) -> None:
    """3 MiB built to be expensive: only the window is scanned (about 25 ms measured for the worst)."""
    started = time.process_time()
    envelope = _read(body)
    assert time.process_time() - started < 2.0
    assert _uid(envelope) in (None, "u-1")
