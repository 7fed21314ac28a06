"""The base every package stands on: typed errors, deadlines, digests, image references, bounded reads,
pydantic errors a person can act on, the one YAML reader, the result cache, and text made visible for people.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifier.base._cache import ResultCache, SingleFlight
    from verifier.base._deadline import Deadline
    from verifier.base._digests import (
        FileDigest,
        ProgressCallback,
        hash_file,
        is_sha256_hex,
        parse_sha256,
        sha256_bytes,
    )
    from verifier.base._errors import EvidenceUnavailable, InputError, TrtguardError, VerificationError
    from verifier.base._files import MAX_DOCUMENT_BYTES, read_limited
    from verifier.base._references import ImageReference, InvalidReference
    from verifier.base._validation import (
        field_problems,
        format_path,
        input_error_from_validation,
        short_repr,
        shorten,
    )
    from verifier.base._visible import hidden, visible
    from verifier.base._yamldoc import Document, decode, load_document, load_documents, load_each_document

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("ResultCache", "SingleFlight"), "verifier.base._cache"),
    "Deadline": "verifier.base._deadline",
    **dict.fromkeys(
        ("FileDigest", "ProgressCallback", "hash_file", "is_sha256_hex", "parse_sha256", "sha256_bytes"),
        "verifier.base._digests",
    ),
    **dict.fromkeys(
        ("EvidenceUnavailable", "InputError", "TrtguardError", "VerificationError"), "verifier.base._errors"
    ),
    **dict.fromkeys(("MAX_DOCUMENT_BYTES", "read_limited"), "verifier.base._files"),
    **dict.fromkeys(("ImageReference", "InvalidReference"), "verifier.base._references"),
    **dict.fromkeys(
        ("field_problems", "format_path", "input_error_from_validation", "short_repr", "shorten"),
        "verifier.base._validation",
    ),
    **dict.fromkeys(("hidden", "visible"), "verifier.base._visible"),
    **dict.fromkeys(
        ("Document", "decode", "load_document", "load_documents", "load_each_document"),
        "verifier.base._yamldoc",
    ),
}

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "Deadline",
    "Document",
    "EvidenceUnavailable",
    "FileDigest",
    "ImageReference",
    "InputError",
    "InvalidReference",
    "ProgressCallback",
    "ResultCache",
    "SingleFlight",
    "TrtguardError",
    "VerificationError",
    "decode",
    "field_problems",
    "format_path",
    "hash_file",
    "hidden",
    "input_error_from_validation",
    "is_sha256_hex",
    "load_document",
    "load_documents",
    "load_each_document",
    "parse_sha256",
    "read_limited",
    "sha256_bytes",
    "short_repr",
    "shorten",
    "visible",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
