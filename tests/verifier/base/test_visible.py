"""verifier.base visible(): every invisible, reordering or line-breaking code point written out, decided from
the Unicode data; checked over every code point and against Unicode 15's Default_Ignorable_Code_Point list
(tests/data/761)."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import DATA
from verifier.base._errors import InputError
from verifier.base._visible import hidden, visible

IGNORABLE_FILE = DATA / "761-unicode-15-default-ignorable-code-points.txt"
_RANGE = re.compile(r"([0-9A-F]{4,6})(?:\.\.([0-9A-F]{4,6}))?\s*;\s*Default_Ignorable_Code_Point")


def default_ignorable() -> set[int]:
    """The code points of Unicode 15.0's Default_Ignorable_Code_Point (DerivedCoreProperties.txt)."""
    found: set[int] = set()
    for line in IGNORABLE_FILE.read_text().splitlines():
        if match := _RANGE.match(line):
            first = int(match.group(1), 16)
            found.update(range(first, int(match.group(2) or match.group(1), 16) + 1))
    return found


def test_every_code_point_is_written_out_exactly_when_the_unicode_data_says_it_is_invisible() -> None:
    ignorable = default_ignorable()
    assert len(ignorable) == 4174  # the file's "Total code points"
    for code in range(0x110000):
        character = chr(code)
        category = unicodedata.category(character)
        # categories C (Cc Cf Cs Co Cn) and Z (Zs Zl Zp) but the space; default-ignorable ones; the blank
        expected = (category[0] in "CZ" and character != " ") or code in ignorable or code == 0x2800
        assert hidden(character) is expected, f"U+{code:04X} {unicodedata.name(character, '')} {category}"
        assert visible(character) == (f"<U+{code:04X}>" if expected else character)


def test_the_characters_the_report_printed_raw_are_written_out() -> None:
    assert visible("admin\U000e0041\U000e0064\U000e006d") == "admin<U+E0041><U+E0064><U+E006D>"  # tags
    assert visible("a\u2028b\u2029c") == "a<U+2028>b<U+2029>c"
    assert visible("ad\u00admin") == "ad<U+00AD>min"  # soft hyphen
    assert visible("a\ufe0f\u180b\U000e0100") == "a<U+FE0F><U+180B><U+E0100>"  # variation selectors
    assert visible("\u3164\u115f\uffa0\u2800") == "<U+3164><U+115F><U+FFA0><U+2800>"  # look empty
    assert visible("x\u0085y\x1b[31m") == "x<U+0085>y<U+001B>[31m"  # NEXT LINE, an escape sequence
    assert visible("\ufdd0\uffff\U0010ffff\ue000") == "<U+FDD0><U+FFFF><U+10FFFF><U+E000>"  # nonchar, Co
    assert visible("a\u00a0b\u3000c") == "a<U+00A0>b<U+3000>c"  # spaces that are not U+0020


def test_printable_text_stays_as_it_is() -> None:
    for text in (
        "Pod prod/resnet50",
        "nvcr.\u0456o/nvidia/tensorrt",
        "caf\u00e9 \u00e9\u0301",
        "\u4f60\u597d",
        "",
    ):
        assert visible(text) == text


def test_keep_leaves_the_controls_an_output_needs() -> None:
    assert visible("a\tb\nc\r\n", keep="\t\n") == "a\tb\nc<U+000D>\n"
    assert visible("a\tb\nc") == "a<U+0009>b<U+000A>c"


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40))
def test_what_is_shown_is_one_line_of_visible_text(text: str) -> None:
    shown = visible(text)
    assert len(shown.splitlines()) <= 1  # no line break of any kind (str.splitlines knows them all)
    assert not any(hidden(character) for character in shown)
    shown.encode("utf-8")  # a lone surrogate is written out too
    # nothing is lost: each hidden character became one <U+XXXX>, the rest is unchanged
    assert re.sub(r"<U\+[0-9A-F]{4,6}>", "\x00", shown) == "".join(
        "\x00" if hidden(character) else character for character in text
    )


def test_error_diagnostics_show_what_they_quote_written_out() -> None:
    # an error quotes a file name or a value from the input; the newlines of its own lines stay, the location
    # is one line whatever it holds
    error = InputError("2 problems:\n  a\u202eb\u2028c", location="evil\n\x1b[2K.yaml", hint="rename\u0085it")
    assert (
        error.diagnostics()
        == "evil<U+000A><U+001B>[2K.yaml: 2 problems:\n  a<U+202E>b<U+2028>c\n  hint: rename<U+0085>it"
    )
