"""The one reader of a DER element's header, for the few places that walk DER by hand (untrusted bytes)."""

from __future__ import annotations


def der_header(data: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, content offset, content length) of the DER element at ``offset``; ValueError if truncated."""
    if offset + 2 > len(data):
        raise ValueError("truncated")
    tag = data[offset]
    first = data[offset + 1]
    offset += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or offset + count > len(data):
            raise ValueError("bad length")
        length = int.from_bytes(data[offset : offset + count], "big")
        offset += count
    if offset + length > len(data):
        raise ValueError("truncated")
    return tag, offset, length
