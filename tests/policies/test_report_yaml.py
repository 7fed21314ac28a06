"""policies/report.py: the YAML streams of ``check --format policy-report`` and ``check --fix``, written by
libyaml's emitter where it writes what PyYAML's does, byte for byte, and read back by Kubernetes (go-yaml v2)
as they were written."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import report
from policies.report import yaml_stream

TEXT = st.one_of(
    st.sampled_from(
        ["", "a", "yes", "null", "~", "1", "0x1F", "- a", "a: b", "#x", " lead", "trail ", "'", '"']
    ),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=130),
    st.lists(st.sampled_from(["word", "wordwordword", "x" * 30]), max_size=30).map(" ".join),
    st.text(max_size=40),  # anything: escapes, line breaks, BOMs, astral characters
)
KEYS = st.one_of(
    TEXT, st.integers(), st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=70)
)
VALUES = st.recursive(
    st.one_of(TEXT, st.integers(), st.floats(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=16,
)


def _shared(value: Any) -> Any:
    """``value`` with its first list or map met again in two places (an alias in YAML)."""
    return {"first": value, "again": value, "more": [value]}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents=st.lists(st.one_of(VALUES, VALUES.map(_shared)), max_size=3))
def test_the_stream_is_what_pyyaml_writes(documents: list[Any]) -> None:
    expected = "".join(
        "---\n" + yaml.dump(d, Dumper=report._PyDumper, sort_keys=False, allow_unicode=True)
        for d in documents
    )
    assert yaml_stream(documents) == expected


def test_libyaml_writes_plain_documents_and_pyyaml_the_others() -> None:
    plain = {"apiVersion": "v1", "results": [{"message": "x " * 100, "n": 1, "ok": True, "none": None}]}
    assert report._emitted_alike(plain)
    for odd in ("é", "a\tb", "a\nb", "\ufeff"):
        assert not report._emitted_alike({"message": odd})
    assert not report._emitted_alike({"": 1})
    assert not report._emitted_alike({"k" * 65: 1})
    assert not report._emitted_alike({1: 1})
    assert not report._emitted_alike({"t": (1, 2)})


_GO_MAP = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], "bool"),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], "bool"),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], "null"),
    **dict.fromkeys(
        [
            ".nan",
            ".NaN",
            ".NAN",
            ".inf",
            ".Inf",
            ".INF",
            "+.inf",
            "+.Inf",
            "+.INF",
            "-.inf",
            "-.Inf",
            "-.INF",
        ],
        "float",
    ),
    "<<": "merge",
}
_GO_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
#: ``strconv.ParseFloat`` of what starts with a dot: ``_`` between two digits only.
_GO_DOT_FLOAT = re.compile(r"\.[0-9](?:_?[0-9])*(?:[eE][-+]?[0-9](?:_?[0-9])*)?")
_GO_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _go_parse_int(text: str, *, signed: bool) -> bool:
    """Whether Go's ``strconv.ParseInt(text, 0, 64)`` (``signed``) or ``ParseUint(text, 0, 64)`` takes it
    (``text`` holds no ``_``)."""
    sign = text[:1] in ("+", "-") and signed
    body = text[1:] if sign else text
    prefix = body[:2].lower()
    base, digits = {"0x": (16, body[2:]), "0o": (8, body[2:]), "0b": (2, body[2:])}.get(prefix, (0, ""))
    if not base:
        base, digits = (8, body[1:]) if body[:1] == "0" and len(body) > 1 else (10, body)
    if not digits or any(c not in _GO_DIGITS[base] for c in digits):
        return False
    value = int(digits, base) * (-1 if text[:1] == "-" and sign else 1)
    return -(2**63) <= value < 2**63 if signed else value < 2**64


def _go_yaml_v2_tag(value: str) -> str:
    r"""The type go-yaml v2 (gopkg.in/yaml.v2, as sigs.k8s.io/yaml and so kubectl and the API server decode
    YAML) gives the plain scalar ``value``, following its resolve.go: the first byte's hint (``+ -``: sign,
    digits, ``yYnNtTfFoO~``: map, ``.``: float, anything else: a string, never resolved); then the map of
    bools (``y Y yes Yes YES on On ON true True TRUE`` and the ``n``/``no``/``off``/``false`` forms), nulls
    (empty, ``~``, ``null Null NULL``), ``.inf``/``.nan`` forms and ``<<``; from a dot,
    ``strconv.ParseFloat`` (a dot, digits, an exponent, ``_`` between two digits); from a sign or digit,
    with every ``_`` removed, ``strconv.ParseInt`` base 0 (``0b 0o 0x`` in either case, a leading ``0``
    octal) or ``ParseUint``, else a float when it matches ``yamlStyleFloat``
    (``^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$``) and ``ParseFloat`` takes it (finite).
    Timestamps are left out: go-yaml v2 decodes them into an ``interface{}`` as the string they are.
    Base-60 numbers (``1:20``) are strings to it. Checked against kubectl v1.32 (``create --dry-run=client``
    refuses an annotation it types) on every string of :data:`TYPED` and on ``1e400 0b12 ._5 .5__0 1:20``
    (strings to both)."""
    hint = value[:1]
    if value and hint not in "+-0123456789yYnNtTfFoO~.":
        return "str"
    if value in _GO_MAP:
        return _GO_MAP[value]
    if hint == ".":
        return "float" if _GO_DOT_FLOAT.fullmatch(value) else "str"
    if hint not in "+-0123456789":
        return "str"
    plain = value.replace("_", "")
    if _go_parse_int(plain, signed=True) or _go_parse_int(plain, signed=False):
        return "int"
    if _GO_FLOAT.match(plain) and abs(float(plain)) != float("inf"):
        return "float"
    return "str"


def _kubernetes_reads(stream: str) -> list[tuple[str, str]]:
    """Every scalar of ``stream`` with the type go-yaml v2 reads it as (a quoted one is a string)."""
    return [
        (event.value, _go_yaml_v2_tag(event.value) if event.style is None and event.implicit[0] else "str")
        for event in yaml.parse(stream)
        if isinstance(event, yaml.ScalarEvent)
    ]


#: What the outside attack 37b found written plain (``check --fix``: kubectl refused the file), and the other
#: forms of go-yaml v2's that PyYAML's YAML 1.1 resolver reads as strings.
TYPED = ["y", "Y", "n", "N", "1e3", "1E3", "1e+3", "1.0e3", ".5e3", "0o17", "-0o7", "0O17", "0X1F", "0B101"]
TYPED += ["089", "-.5", "+.5", "-.5e3", "1_0e3", "0_x1F", "-_1", "1e-3", "+1.5E3", ".5e1_0"]
GO_TYPED = st.one_of(
    st.sampled_from(TYPED),
    st.from_regex(r"\A[-+]?(0[bB][01_]{1,6}|0[oO][0-7_]{1,6}|0[xX][0-9a-fA-F_]{1,6}|[0-9][0-9_]{0,6})\Z"),
    st.from_regex(r"\A[-+]?(\.[0-9]{1,4}|[0-9]{1,4}(\.[0-9]{0,3})?)([eE][-+]?[0-9]{1,3})?\Z"),
    st.sampled_from(sorted(_GO_MAP)),
    st.text(st.sampled_from("+-._0123456789abeoxEOXBy"), max_size=8),
)


def _both_emitters(value: str) -> list[tuple[dict[str, Any], str]]:
    """Documents holding ``value`` as a key and as values, and their streams, one written by libyaml's
    emitter and one by PyYAML's."""
    alike, other = {"k": value, value or "v": [value]}, {"é": value, value or "v": [value]}
    assert report._emitted_alike(alike)
    assert not report._emitted_alike(other)
    return [(alike, yaml_stream([alike])), (other, yaml_stream([other]))]


@pytest.mark.parametrize("value", TYPED)
def test_what_kubernetes_types_is_quoted(value: str) -> None:
    assert _go_yaml_v2_tag(value) != "str"  # the resolver of this test reads it as go-yaml v2 does
    assert "'" not in yaml.safe_dump(value)  # and PyYAML's own writes it plain
    for _, stream in _both_emitters(value):
        assert f"'{value}'" in stream
        assert all(tag == "str" for _, tag in _kubernetes_reads(stream))


@settings(max_examples=500, deadline=None)
@given(value=GO_TYPED)
def test_every_string_comes_back_a_string_in_kubernetes(value: str) -> None:
    for document, stream in _both_emitters(value):
        assert yaml.safe_load(stream) == document
        assert [tag for _, tag in _kubernetes_reads(stream)] == ["str"] * 4, stream


def test_ordinary_strings_stay_plain_and_pyyaml_is_left_as_it_was() -> None:
    document = {"image": "nvcr.io/nvidia/tensorrt:24.01-py3", "replicas": 3, "tag": "v1.2", "on": "yes"}
    assert yaml_stream([document]) == "---\n" + yaml.safe_dump(document, sort_keys=False)
    assert yaml.safe_dump(["y", "1e3"]) == "- y\n- 1e3\n"  # PyYAML's own dumpers are not changed
