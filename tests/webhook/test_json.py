"""webhook/_json.py: the text of ``JSONEncoder.encode`` and ``json.dumps``, with the C encoder made once."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.conftest import DATA
from webhook._json import compact_encoder, json_encoder, json_list

HOSTILE = list(json.loads((DATA / "760-hostile-strings.json").read_text())["strings"].values())
ODD = ["", "\ud800", "a\x00b", "\u2028", "é", '"\\/', "\U0001f600", "x" * 5000]
VALUES: list[Any] = [
    {},
    [],
    "plain",
    None,
    True,
    0,
    -(2**70),
    1.5,
    float("nan"),
    float("inf"),
    1e-300,
    {"nested": [{"a": [1, 2.25, None, False]}, {"b": {"c": "d"}}], "": "empty key"},
    {text: [text, {text: text}] for text in HOSTILE + ODD},
    {3: "int key", 2.5: "float key", True: "bool key", None: "none key"},
    ("a", "tuple"),
    [HOSTILE, ODD],
]


@pytest.mark.parametrize("ensure_ascii", [False, True])
@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_the_same_text_as_json_encoder(value: Any, ensure_ascii: bool) -> None:
    reference = json.JSONEncoder(separators=(",", ":"), ensure_ascii=ensure_ascii)
    encode = compact_encoder(ensure_ascii=ensure_ascii)
    assert encode(value) == reference.encode(value)
    assert encode(value) == reference.encode(value)  # the C encoder kept from the first call


def test_options_of_the_template_are_kept() -> None:
    template = json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    value = {"z": object(), "a": {3, 1}, "m": ["é"]}
    first = json_encoder(template)(value)
    assert json.loads(first).keys() == {"a", "m", "z"}
    assert list(json.loads(first)) == ["a", "m", "z"]
    assert first.startswith('{"a":"{1, 3}"') and '"m":["é"]' in first


def test_what_json_cannot_hold_raises_as_before_and_the_next_call_works() -> None:
    encode = compact_encoder(ensure_ascii=False)
    inner: list[Any] = []
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode({"a": [inner, object()]})
    circular: dict[str, Any] = {}
    circular["self"] = [circular]
    with pytest.raises(ValueError, match="Circular reference detected"):
        encode(circular)
    # A failed call left nothing behind: the containers it was inside are not taken for circular ones now.
    assert encode({"a": [inner, inner]}) == '{"a":[[],[]]}'
    circular["self"] = []
    assert encode(circular) == '{"self":[]}'


def test_a_call_from_inside_a_call_gets_its_own_check() -> None:
    shared = ["shared"]

    def default(value: object) -> object:
        # The encoder is asked again from inside its own call, about a container the outer call is inside.
        return encode({"inner": shared})

    encode = json_encoder(json.JSONEncoder(default=default, separators=(",", ":")))
    reference = json.JSONEncoder(default=lambda _: json.dumps({"inner": shared}, separators=(",", ":")))
    assert json.loads(encode([shared, object()])) == json.loads(reference.encode([shared, object()]))


def test_each_thread_has_its_own_encoder() -> None:
    encode = compact_encoder(ensure_ascii=False)
    value = {"k": [list(range(50)) for _ in range(50)]}
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    results: list[bool] = []

    def work() -> None:
        results.extend(encode(value) == expected for _ in range(200))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 800


@pytest.mark.parametrize(
    "texts", [(), ("a",), ("int8-calibration", "signed-images"), tuple(HOSTILE + ODD), ("é", "\ud800")]
)
def test_json_list_is_json_dumps(texts: tuple[str, ...]) -> None:
    assert json_list(texts) == json.dumps(list(texts))


def test_json_list_of_other_values_is_json_dumps() -> None:
    class Name(str):
        __slots__ = ()

    assert json_list([Name("a"), "b"]) == json.dumps([Name("a"), "b"])
    assert json_list(["a", 1]) == json.dumps(["a", 1])  # type: ignore[list-item]
