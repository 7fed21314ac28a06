"""verifier/base/_yamldoc.py: the one YAML reader, its bounds on expanded size, and its messages."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from verifier.base._errors import InputError
from verifier.base._yamldoc import Document, Limits, load_document, load_documents, load_each_document


def scalar_alias_bomb(aliases: int = 150_000, size: int = 60_000) -> str:
    """The issue's shape: ~510 KB of text, 9 GB once its aliases of one 60 KB scalar are written out."""
    return f"big: &a {'x' * size}\nmany: [{', '.join(['*a'] * aliases)}]\n"


def billion_laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def measured(action: Callable[[], Any]) -> tuple[BaseException | None, float, int]:
    """What ``action`` raised, the CPU seconds it took and the peak of Python memory it allocated.

    CPU time of this thread: what a bomb costs is work, and wall time would also count what a loaded
    machine gives to other processes meanwhile.
    """
    tracemalloc.start()
    start = time.thread_time()
    raised: BaseException | None = None
    try:
        action()
    except BaseException as error:  # the test looks at whatever came out
        raised = error
    elapsed = time.thread_time() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return raised, elapsed, peak


def test_the_scalar_alias_bomb_is_refused_at_once_naming_the_line_and_the_limit() -> None:
    text = scalar_alias_bomb()
    raised, elapsed, peak = measured(lambda: list(load_documents(text, "bomb.yaml")))
    assert isinstance(raised, InputError)
    assert raised.location == "bomb.yaml:2"  # the list that holds the aliases
    assert "more than 16777216 characters of text once its YAML aliases are expanded" in raised.message
    assert "the value anchored at line 1" in raised.message
    assert raised.hint is not None and "each alias counts as a copy" in raised.hint
    assert len(raised.diagnostics()) < 500
    assert elapsed < 1.0
    assert peak < 30 * 1024 * 1024  # the text and its node graph; nothing of the 9 GB


def test_aliases_of_a_scalar_within_the_limits_are_read_as_copies() -> None:
    [document] = load_documents("a: &x value\nb: [*x, *x]\n", "ok.yaml")
    assert document.data == {"a": "value", "b": ["value", "value"]}


def test_aliased_keys_count_too() -> None:
    text = f"anchor: &k {'k' * 1000}\nmaps: [{', '.join(['{*k: 1}'] * 20)}]\n"
    with pytest.raises(InputError, match="more than 10000 characters of text once its YAML aliases"):
        list(load_documents(text, "keys.yaml", Limits(max_characters=10_000)))


def test_many_aliases_of_a_short_scalar_count_as_values() -> None:
    text = f"a: &a x\nb: [{', '.join(['*a'] * 250_000)}]\n"
    with pytest.raises(InputError, match="more than 200000 values once its YAML aliases are expanded"):
        list(load_documents(text, "values.yaml"))


@pytest.mark.parametrize(
    "text",
    [
        billion_laughs(),
        "a: &a {x: [1, 2], y: [3, 4]}\nb: &b {p: *a, q: *a}\nc: &c {p: *b, q: *b}\nd: [*c, *c, *c]\n",
    ],
    ids=["sequences", "mappings"],
)
def test_billion_laughs_on_lists_and_maps_are_refused(text: str) -> None:
    raised, elapsed, peak = measured(lambda: list(load_documents(text, "laughs.yaml")))
    assert isinstance(raised, InputError)
    assert raised.message == "YAML aliases (*name) of lists and maps are not accepted"
    assert raised.location is not None and raised.location.startswith("laughs.yaml:")
    assert elapsed < 1.0 and peak < 5 * 1024 * 1024


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!float abc\n", "'abc' cannot be read as float"),
        ("a: !!bool maybe\n", "'maybe' cannot be read as bool"),
        ("a: " + "1" * 5000 + "\n", "cannot be read as int: it has too many digits"),
    ],
)
def test_values_that_do_not_read_as_their_tag_are_input_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as raised:
        list(load_documents(text, "values.yaml"))
    assert raised.value.location == "values.yaml:1"
    assert len(raised.value.message) < 200


@pytest.mark.parametrize("tag", ["!!seq", "!!map", "!!binary", "!!set", "!!omap", "!!pairs"])
def test_a_scalar_with_the_tag_of_a_collection_or_bytes_is_refused(tag: str) -> None:
    # a scalar tagged !!seq once came back as a Python generator object, !!binary as bytes
    with pytest.raises(InputError, match="unsupported YAML tag") as raised:
        list(load_documents(f"a: 1\nb: {tag} eA==\n", "tags.yaml"))
    assert raised.value.location == "tags.yaml:2"


def test_a_huge_duplicate_key_is_named_in_short() -> None:
    key = "k" * 100_000
    with pytest.raises(InputError) as raised:
        list(load_documents(f"? {key}\n: 1\n? {key}\n: 2\n", "dup.yaml"))
    assert raised.value.message.startswith("the key 'kkkk")
    assert raised.value.message.endswith("appears twice in one mapping")
    assert len(raised.value.message) < 120


def test_load_document_wants_at_most_one_document() -> None:
    assert load_document("", "empty.yaml", what="the settings") is None
    loaded = load_document("a: 1\n", "one.yaml", what="the settings")
    assert loaded is not None and loaded.data == {"a": 1}
    with pytest.raises(InputError, match="the settings holds more than one YAML document") as raised:
        load_document("a: 1\n---\nb: 2\n", "two.yaml", what="the settings")
    assert raised.value.location == "two.yaml:3"


def test_load_document_names_the_file_kind() -> None:
    with pytest.raises(InputError) as syntax:
        load_document("a: [\n", "bad.yaml", what="the settings")
    assert syntax.value.message.startswith("the settings is not valid YAML: ")
    assert syntax.value.location == "bad.yaml:2:1"
    with pytest.raises(InputError) as bomb:
        load_document(scalar_alias_bomb(), "bomb.yaml", what="the settings")
    assert bomb.value.message.startswith("the settings: the document holds more than")
    assert bomb.value.location == "bomb.yaml:2"


def test_each_document_is_read_on_its_own_when_one_is_malformed() -> None:
    text = "a: 1\n---\nb: [unclosed\n---\nc:\n  d: 3\n--- |\n  text\n---\ne: 5\ne: 6\n"
    found = list(load_each_document(text, "many.yaml"))
    assert [d.data if isinstance(d, Document) else d.location for d in found] == [
        {"a": 1},
        "many.yaml:4:1",
        {"c": {"d": 3}},
        "text\n",
        "many.yaml:11",
    ]
    # Lines and paths are those of the whole stream, not of the document's own text.
    third = found[2]
    assert isinstance(third, Document) and (third.line, third.line_of(("c", "d"))) == (5, 6)
    # A stream that reads whole is read whole (one pass, the same documents as load_documents).
    whole = list(load_each_document("a: 1\n---\nb: 2\n", "two.yaml"))
    assert [d.data for d in whole if isinstance(d, Document)] == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize(
    "text",
    ["kind: Pod\nmetadata:\n\tname: x\n", "spec:\n  containers:\n  \t- name: x\n", "a: 1\n\tb: 2\n"],
)
def test_a_tab_in_indentation_is_named_as_a_tab(text: str) -> None:
    """Issue 28 item 9: the parser's "cannot start any token" says what the character is."""
    with pytest.raises(InputError) as caught:
        list(load_documents(text, "f.yaml"))
    assert "a tab character, which YAML never allows in indentation" in caught.value.message
    assert caught.value.hint is not None and "indent with spaces" in caught.value.hint


def test_other_malformed_yaml_says_nothing_of_tabs() -> None:
    with pytest.raises(InputError) as caught:
        list(load_documents("a: [1, 2\nb: 3\n", "f.yaml"))
    assert "tab" not in caught.value.message


def test_a_line_is_found_from_its_own_document_not_the_whole_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report asks for lines in each of thousands of documents: composing the whole stream again for them
    kept every node of every document alive (the cycle collector rescanned them for seconds)."""
    import yaml  # noqa: PLC0415

    documents = [
        f"kind: Pod\nmetadata:\n  name: p{n}\nspec:\n  containers:\n  - image: i{n}\n" for n in range(50)
    ]
    text = "---\n".join(documents)
    read = list(load_documents(text, "s.yaml"))
    composed: list[int] = []
    compose_all = yaml.compose_all

    def counted(stream: str, **options: Any) -> Any:
        composed.append(len(stream))
        return compose_all(stream, **options)

    monkeypatch.setattr(yaml, "compose_all", counted)
    assert [d.line_of(("spec", "containers", 0, "image")) for d in read] == [7 * n + 6 for n in range(50)]
    assert composed and max(composed) <= max(map(len, documents))
