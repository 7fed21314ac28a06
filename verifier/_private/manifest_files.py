"""Reading the files the ``manifest`` commands take: JSON records, YAML/JSON settings, manifest files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from verifier._private.files import read_limited
from verifier.dsse import Envelope
from verifier.errors import InputError
from verifier.intoto import statement_from_envelope
from verifier.manifest import EngineBuildManifest, load_manifest

#: Manifests, records and settings are small; anything far larger is a mistake (or an attack on memory).
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024


def _read_text(path: Path, what: str) -> str:
    data = read_limited(path, MAX_DOCUMENT_BYTES, f"the {what}")
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
            raise ValueError(f"the key {key!r} appears twice in one object")
        document[key] = value
    return document


def read_json(path: Path, what: str) -> Any:
    """Parse the JSON file at ``path``; duplicate keys and non-UTF-8 bytes are :class:`InputError`."""
    text = _read_text(path, what)
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


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects a key given twice in one mapping."""


def _construct_mapping(
    loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} appears twice in one mapping", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: Path, what: str) -> Any:
    """Parse the YAML (or JSON) file at ``path``; syntax errors name the line."""
    text = _read_text(path, what)
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        location = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise InputError(
            f"the {what} is not valid YAML: {error.problem or error}",
            location=location,
            hint="fix the syntax at that position",
        ) from error
    except yaml.YAMLError as error:
        raise InputError(f"the {what} is not valid YAML: {error}", location=str(path)) from error


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
