"""Reading the files the ``manifest`` commands take: JSON records, YAML/JSON settings, manifest files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from verifier.base import InputError, load_document, read_limited, short_repr
from verifier.crypto import Envelope, statement_from_envelope
from verifier.manifest import EngineBuildManifest, load_manifest

#: What a settings file holds: a mapping or a list.
_Shape = TypeVar("_Shape", dict[str, Any], list[Any])

#: Manifests, records and settings are small; anything far larger is a mistake (or an attack on memory).


def _read_text(path: Path, what: str) -> str:
    return _text(read_limited(path, f"the {what}"), path, what)


def _text(data: bytes, path: Path, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"the {what} is not UTF-8 text (byte {error.start} is not valid UTF-8)",
            location=str(path),
            hint="save the file as UTF-8",
        ) from error


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            # Two values for one key read differently by different parsers; a signed record must not be.
            raise ValueError(f"the key {short_repr(key)} appears twice in one object")
        document[key] = value
    return document


def read_json(path: Path, what: str) -> Any:
    """Parse the JSON file at ``path``; duplicate keys and non-UTF-8 bytes are :class:`InputError`."""
    return parse_json(read_limited(path, f"the {what}"), path, what)


def parse_json(data: bytes, path: Path, what: str) -> Any:
    """Parse ``data``, the bytes read from ``path``, as :func:`read_json` does (for a caller that must judge
    and parse the very same bytes, as a signed record's)."""
    text = _text(data, path, what)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as error:
        raise InputError(
            f"the {what} is not valid JSON: {error.msg}",
            location=f"{path}:{error.lineno}:{error.colno}",
            hint="fix the JSON syntax at that position",
        ) from error
    except ValueError as error:
        raise InputError(
            f"the {what} is ambiguous: {error}", location=str(path), hint="keep one value"
        ) from error


def read_yaml(path: Path, what: str) -> Any:
    """Parse the YAML (or JSON) file at ``path`` (one document, bounded as the project's YAML reader is).

    Syntax errors name the line; an empty file reads as ``None``.
    """
    text = _read_text(path, what)
    document = load_document(text, str(path), what=f"the {what}")
    return None if document is None else document.data


def read_yaml_as(
    path: Path,
    what: str,
    kind: type[_Shape],
    must_be: str,
    *,
    hint: str | None = None,
    key: str | None = None,
) -> _Shape:
    """:func:`read_yaml`, for a file that ``must_be`` (in the message) a ``kind``; a mapping of ``key`` alone
    stands for its value."""
    value = read_yaml(path, what)
    if key is not None and isinstance(value, dict) and set(value) == {key}:
        value = value[key]
    if not isinstance(value, kind):
        raise InputError(f"the {what} must be {must_be}", location=str(path), hint=hint)
    return value


def read_manifest_file(path: Path) -> tuple[EngineBuildManifest, bool]:
    """The manifest in ``path``: a bare predicate, an in-toto Statement, or a DSSE envelope around one.

    Returns the manifest and whether it came out of an envelope. An envelope's signatures are **not**
    verified here (``trtguard verify-attestation`` does that); callers say so where it matters.
    """
    document = read_json(path, "manifest")
    if isinstance(document, dict) and "payloadType" in document and "payload" in document:
        envelope = Envelope.from_dict(document, location=str(path))
        statement = statement_from_envelope(envelope, location=str(path))
        return load_manifest(statement, f"{path} (DSSE payload)"), True
    return load_manifest(document, str(path)), False
