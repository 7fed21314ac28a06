"""JSON text as ``json.JSONEncoder(...).encode`` writes it, at less cost a call: an answer per admission.

``JSONEncoder.encode`` builds a new C encoder (``_json.make_encoder``) on every call, with a new dict of the
containers it is inside (for its circular-reference check). :func:`compact_encoder` and :func:`json_encoder`
build the C encoder once per thread and keep its dict, emptied again after a call that fails (a successful
call leaves it empty; a call made from inside another, through ``default``, takes ``encode``): the same
text, the same ``TypeError`` for what JSON cannot hold and the same ``ValueError`` for a circular
reference. Without the C accelerator they are ``JSONEncoder.encode``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from json import encoder as _encoder
from typing import Any


def compact_encoder(*, ensure_ascii: bool) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), ensure_ascii=ensure_ascii).encode``."""
    return json_encoder(json.JSONEncoder(separators=(",", ":"), ensure_ascii=ensure_ascii))


def json_encoder(template: json.JSONEncoder) -> Callable[[Any], str]:
    """``template.encode``, its C encoder made once per thread (``template`` must not change afterwards)."""
    make: Callable[..., Callable[[Any, int], Any]] | None = getattr(_encoder, "c_make_encoder", None)
    if make is None or template.indent is not None or not template.check_circular:
        return template.encode
    escape = _encoder.c_encode_basestring_ascii if template.ensure_ascii else _encoder.c_encode_basestring
    if escape is None:
        return template.encode
    local = threading.local()

    def made() -> tuple[dict[int, Any], Callable[[Any, int], Any]]:
        markers: dict[int, Any] = {}
        encode = make(
            markers,
            template.default,
            escape,
            None,
            template.key_separator,
            template.item_separator,
            template.sort_keys,
            template.skipkeys,
            template.allow_nan,
        )
        local.made = (markers, encode)
        return markers, encode

    def encode(value: Any) -> str:
        if isinstance(value, str):  # as JSONEncoder.encode
            return escape(value)
        markers, one_shot = getattr(local, "made", None) or made()
        if markers:  # called again from inside a call of this thread (its default): a fresh check, as before
            return template.encode(value)
        try:
            return "".join(one_shot(value, 0))
        except BaseException:
            markers.clear()  # a failed call leaves the containers it was inside
            raise

    return encode


def json_list(texts: Sequence[str]) -> str:
    """``json.dumps(list(texts))``, for strings without an encoder's set-up (an annotation an answer)."""
    if all(type(text) is str for text in texts):
        return "[" + ", ".join(map(_encoder.encode_basestring_ascii, texts)) + "]"
    return json.dumps(list(texts))
