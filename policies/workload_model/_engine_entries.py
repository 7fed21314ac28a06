"""One entry of the ``trtguard.dev/engines`` annotation, checked against the pod spec it is in.

An entry is ``{"name", "ref", "container"?}``: ``name`` is an image volume's name (the entry marks that
volume as an engine; ``ref``, if given, must be its reference) or the engine's own name, with ``ref``
naming it by digest; ``container``, if given, must be a container of the pod spec. A malformed entry is a
problem, reported through the reader's ``problem`` callback, and is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from verifier.base import ImageReference, InvalidReference

__all__ = ["Entry", "parse_entry"]

_ENTRY_KEYS: Final = frozenset({"name", "ref", "container"})


class _Volume(Protocol):
    @property
    def reference(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Entry:
    """One valid ``trtguard.dev/engines`` entry (``ref`` is the volume's reference for a volume entry)."""

    name: str
    ref: str
    container: str | None
    path: str
    volume: bool


def parse_entry(
    entry: dict[str, Any],
    path: str,
    names: Mapping[str, object],
    volumes: Mapping[str, _Volume],
    problem: Callable[[str, str], None],
) -> Entry | None:
    """The entry at ``path``, checked against the pod spec's container ``names`` and image ``volumes``;
    None (with a ``problem``) when it is malformed."""
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        problem(path, f"unknown keys {unknown}; an engine entry has name, ref and container")
        return None
    name, ref, container = entry.get("name"), entry.get("ref"), entry.get("container")
    if not isinstance(name, str) or not name:
        problem(path, "an engine entry needs a non-empty string name")
        return None
    if container is not None and (not isinstance(container, str) or container not in names):
        problem(path, f"engine {name!r} names container {container!r}, which the pod spec lacks")
        return None
    volume = volumes.get(name)
    if volume is not None:
        # The entry marks an image volume as an engine; the volume's reference is judged by image rules.
        if ref is not None and ref != volume.reference:
            problem(
                path,
                f"engine {name!r} names image volume {name!r} but its ref {ref!r} differs from the "
                f"volume's reference {volume.reference!r}",
            )
            return None
        return Entry(name, volume.reference, container, path, volume=True)
    if not isinstance(ref, str):
        problem(path, f"engine {name!r} needs ref, a string 'registry/repo@sha256:…'")
        return None
    try:
        parsed = ImageReference.parse(ref)
    except InvalidReference as error:
        problem(path, f"engine {name!r}: {error.message}")
        return None
    if parsed.digest is None:
        problem(path, f"engine {name!r} ref {ref!r} has no digest; name engines by sha256 digest")
        return None
    return Entry(name, ref, container, path, volume=False)
