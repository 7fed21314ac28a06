"""The YAML reader's fast path (tags of plain scalars kept by text, scalars read inline, no alias tracking
without an ``&``) against the reader as it was (``yamldoc_reference.py``): on generated streams with
duplicate keys, anchors and aliases, merge keys, explicit tags, malformed documents and tight limits, the
same documents with the same lines, or the same errors."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.verifier.base import yamldoc_reference as reference
from verifier.base import _yamldoc as fast
from verifier.base._errors import InputError

SCALARS = st.sampled_from(
    [
        "a", "b", "x y", "1", "-7", "0x1f", "0o17", "1_000", "1.5", ".inf", "1e3", "yes", "No", "on", "null",
        "~", "''", '""', "2001-12-14", "2001-12-14t21:59:43.10-05:00", "'quoted'", '"esc\\tape"',
        "!!float x", "!!float 1", "!!int 12", "!!int 1.5", "!!str 5", "!!bool maybe", "!!null ''",
        "!!binary aGk=", "!!timestamp 2001-12-14", "!foo x", "&s a", "&s 1", "*s", "*m", "*nothing", "'a\tb'",
        "|\n  block", "- -", "{", "]", "\t", "9" * 30, "x" * 40,
    ]
)  # fmt: skip
KEYS = st.sampled_from(
    ["a", "b", "c", "1", "true", "~", "<<", "&k a", "*k", "'a'", "[1]", "{a: 1}", "!!int 1"]
)


def _mapping(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",\n ".join(f"{k}: {v}" for k, v in pairs) + "}"


NODES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",\n ".join(items) + "]"),
        st.lists(st.tuples(KEYS, inner), max_size=4).map(_mapping),
        st.tuples(st.sampled_from(["&m ", "&s ", "!!seq ", "!!map ", ""]), inner).map("".join),
    ),
    max_leaves=12,
)
STREAMS = st.lists(NODES, min_size=1, max_size=4).map(lambda documents: "\n---\n".join(documents) + "\n")
LIMITS = st.sampled_from(
    [
        fast.Limits(),
        fast.Limits(max_depth=2, max_nodes=6, max_characters=30),
        fast.Limits(max_depth=1, max_nodes=3, max_characters=8),
    ]
)


def _paths(data: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, str(key)))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, (*prefix, index))
    return found


def _read(module: Any, text: str, limits: fast.Limits) -> list[Any]:
    """Every document (data, line and each value's lines) or error, as plain values to compare."""
    read: list[Any] = []
    for item in module.load_each_document(text, "s.yaml", limits):
        if isinstance(item, InputError):
            read.append(("error", item.message, item.location, item.hint))
        else:
            lines = [(p, item.line_of(p), item.text_line_of(p)) for p in _paths(item.data)]
            read.append(("document", repr(item.data), item.line, lines))
    return read


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=STREAMS, limits=LIMITS)
def test_the_fast_reader_reads_what_the_reference_reads(text: str, limits: fast.Limits) -> None:
    assert _read(fast, text, limits) == _read(reference, text, limits)


def test_the_adversarial_corpus_and_the_bench_shapes_read_the_same() -> None:
    from tests.conftest import DATA  # noqa: PLC0415

    for path in sorted(DATA.glob("*.yaml")):
        text = path.read_text()
        assert _read(fast, text, fast.Limits()) == _read(reference, text, fast.Limits()), path.name


DATA = st.recursive(
    st.sampled_from(["a", "x y", "1", "yes", "", "é", "|", "multi\nline", "- a", "k: v", "'q'"]),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c d", "1"]), inner, min_size=1, max_size=3),
    ),
    max_leaves=8,
)
BLOCK = st.tuples(
    DATA,
    st.sampled_from([2, 4]),
    st.booleans(),
    st.sampled_from(["", "  "]),
    st.sampled_from(["---\n", "--- # c\n", "...\n---\n", "\n# c\n---\n", "---\n\n", "--- "]),
)


def _block(document: tuple[Any, int, bool, str, str]) -> str:
    data, indent, flow, margin, separator = document
    text = yaml.safe_dump(data, indent=indent, default_flow_style=flow, allow_unicode=True)
    if separator == "--- " and isinstance(data, dict) and not flow:
        separator = "---\n"  # a block mapping cannot start on the separator's line
    if margin and isinstance(data, (dict, list)) and not flow:
        text = "".join(margin + line for line in text.splitlines(keepends=True))
    return separator + text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents=st.lists(BLOCK, min_size=1, max_size=4), crlf=st.booleans())
def test_block_documents_find_the_lines_the_whole_stream_finds(
    documents: list[tuple[Any, int, bool, str, str]], crlf: bool
) -> None:
    """Each document's lines are found from its own text (the whole stream composed only when it does not
    compose alone): indented roots, separators with comments, ``...`` ends and CRLF line ends included."""
    text = "".join(map(_block, documents))
    if crlf:
        text = text.replace("\n", "\r\n")
    assert _read(fast, text, fast.Limits()) == _read(reference, text, fast.Limits())


def test_a_document_that_needs_the_stream_directives_is_found_in_the_whole_stream() -> None:
    text = "a: 1\n...\n%TAG !e! tag:example.com,2000:\n--- !e!x\nb:\n  c: 2\n"
    assert _read(fast, text, fast.Limits()) == _read(reference, text, fast.Limits())
    assert [item.line_of(("b", "c")) for item in fast.load_documents(text, "s.yaml")] == [1, 6]
