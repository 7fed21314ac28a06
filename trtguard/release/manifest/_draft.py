"""A manifest being assembled (by ``manifest import`` or ``manifest create``) and what is still missing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from verifier.base import field_problems
from verifier.manifest import EngineBuildManifest


@dataclass(frozen=True, slots=True)
class Note:
    """Something the user should know about one field of the assembled manifest.

    ``blocking`` notes (a required value that is missing, a value that could not be mapped or is invalid)
    keep the manifest from being complete; the others report where a value came from or a doubt about it.
    """

    field: str
    message: str
    blocking: bool

    def __str__(self) -> str:
        return f"{'missing' if self.blocking else 'note'}: {self.field}: {self.message}"


@dataclass(frozen=True, slots=True)
class Draft:
    """The assembled predicate (``None`` where a value is missing) and the notes about it.

    ``manifest`` is the validated manifest, or None while any blocking note remains.
    """

    document: dict[str, Any]
    notes: tuple[Note, ...]
    manifest: EngineBuildManifest | None

    @property
    def missing(self) -> tuple[Note, ...]:
        """The blocking notes."""
        return tuple(note for note in self.notes if note.blocking)


def finish(document: dict[str, Any], notes: Iterable[Note]) -> Draft:
    """Validate ``document``; each validation problem that no note covers yet becomes a blocking note."""
    collected = list(notes)
    try:
        manifest = EngineBuildManifest.model_validate(document)
    except ValidationError as error:
        for problem in field_problems(error, model=EngineBuildManifest):
            if not any(_covers(note.field, problem.path) for note in collected if note.blocking):
                got = f"; got {problem.got}" if problem.got is not None else ""
                collected.append(Note(problem.path, f"expected {problem.expected}{got}", blocking=True))
        return Draft(document, tuple(collected), None)
    if any(note.blocking for note in collected):
        return Draft(document, tuple(collected), None)
    return Draft(document, tuple(collected), manifest)


def _covers(noted: str, path: str) -> bool:
    return path == noted or path.startswith((f"{noted}.", f"{noted}["))


def set_path(document: dict[str, Any], path: str, value: Any) -> None:
    """Set ``document[a][b]…`` for a dotted ``path`` of plain keys, creating objects on the way."""
    *parents, last = path.split(".")
    node = document
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[last] = value


def get_path(document: Mapping[str, Any], path: str) -> Any:
    """``document[a][b]…`` for a dotted ``path``, or None where any step is missing."""
    node: Any = document
    for key in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node
