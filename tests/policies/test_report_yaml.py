"""policies/report.py: the YAML streams of ``check --format policy-report`` and ``check --fix``, written by
libyaml's emitter where it writes what PyYAML's does, byte for byte."""

from __future__ import annotations

from typing import Any

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
    expected = "".join("---\n" + yaml.safe_dump(d, sort_keys=False, allow_unicode=True) for d in documents)
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
