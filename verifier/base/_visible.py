"""Text for people with every invisible, reordering or line-breaking code point written out as ``<U+XXXX>``.

Names, requesters, references and messages come from workloads and packages: a right-to-left override
reverses what follows it ("Trojan Source"), a zero-width or tag character hides text, a line separator or a
newline in a name forges a line of a table or a log (``ALLOW Pod/prod/fake``), an escape sequence drives
the terminal. Every output meant to be read (the evidence report, the ``check`` table, ``audit tail``,
``query`` and ``history``, error lines) shows such text through :func:`visible`.

Which code points are written out is decided from the Unicode Character Database as Python's
:mod:`unicodedata` has it, not from a list of code points:

* every code point :meth:`str.isprintable` refuses: general categories ``C`` (``Cc`` controls, ``Cf``
  format characters such as the bidirectional controls, zero-width characters, U+00AD SOFT HYPHEN and the
  tag characters U+E0000-E007F, ``Cs`` surrogates, ``Co`` private use, ``Cn`` unassigned code points and
  noncharacters) and ``Z`` (``Zl`` U+2028, ``Zp`` U+2029, and ``Zs`` spaces, which look like U+0020 but are
  not), but U+0020 SPACE itself;
* the default-ignorable code points (Unicode's Default_Ignorable_Code_Point, which :mod:`unicodedata` does
  not carry) of other categories, found by their Unicode names: the variation selectors (``Mn``), U+034F
  COMBINING GRAPHEME JOINER, the Hangul fillers (``Lo``) and the Khmer inherent vowels (``Mn``); and
  U+2800 BRAILLE PATTERN BLANK, a letter-like blank (``So``) used for names that look empty.

A caller keeps the few controls its output needs (the report page: tab and newline) with ``keep``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

__all__ = ["hidden", "visible"]

# Names of default-ignorable code points outside categories C and Z (PropList.txt: Variation_Selector and
# Other_Default_Ignorable_Code_Point), and of the braille blank.
_INVISIBLE_NAMES: Final = re.compile(
    r"VARIATION SELECTOR|GRAPHEME JOINER|HANGUL (CHOSEONG |JUNGSEONG )?FILLER|KHMER VOWEL INHERENT"
    r"|BRAILLE PATTERN BLANK"
)


@functools.lru_cache(maxsize=4096)
def hidden(character: str) -> bool:
    """Whether :func:`visible` writes ``character`` (one code point) out."""
    return not character.isprintable() or _INVISIBLE_NAMES.search(unicodedata.name(character, "")) is not None


def visible(text: str, *, keep: str = "") -> str:
    """``text`` with every code point :func:`hidden` says is invisible written out as ``<U+XXXX>``, but those
    in ``keep``. The result holds no line break, control or invisible character but ``keep``'s, and encodes
    as UTF-8 (a lone surrogate is written out too)."""
    if text.isascii() and text.isprintable():  # the common case, at C speed
        return text
    return "".join(
        f"<U+{ord(character):04X}>" if character not in keep and hidden(character) else character
        for character in text
    )
