"""Vulnerability allow-lists: the entries of ``vulnerabilities.allow`` and of the file ``allowFrom`` names.

An entry names a finding by any of its ids or aliases, in any case (``cve-2020-14343``, ``GHSA-8Q59-…``:
:func:`verifier.scans.model.canonical_id`), says why it is admitted, and may expire: from ``expires`` on it
no longer matches, so that a forgotten exception ends by itself. An ``allowFrom`` file (YAML or JSON, relative
to the policy) holds a list of such entries, or a mapping with an ``allow`` list; its name ends in
``.allow.yaml``, ``.allow.yml`` or ``.allow.json``, so that a policy folder never loads it as a policy. Its
bytes count in the policy revision, and a malformed entry is a load error naming the file and line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from policies.schema import AllowedVulnerability, VulnerabilityRule, expiry_time
from verifier.base import InputError, decode, load_documents
from verifier.scans import canonical_id

__all__ = ["ALLOW_LIST_SUFFIXES", "AllowEntry", "allow_entries"]

#: How an ``allowFrom`` file's name ends (a policy folder skips no other YAML file).
ALLOW_LIST_SUFFIXES = (".allow.yaml", ".allow.yml", ".allow.json")

_ENTRIES: TypeAdapter[list[AllowedVulnerability]] = TypeAdapter(list[AllowedVulnerability])


@dataclass(frozen=True, slots=True)
class AllowEntry:
    """One allow-listed finding, ready to match: its id canonical, its expiry a time."""

    id: str
    reason: str
    expires: datetime | None
    #: Where it is written (``file:line``), for notes about it.
    source: str

    def active(self, now: datetime) -> bool:
        """Whether the entry still matches at ``now`` (an entry matches until it expires)."""
        return self.expires is None or now < self.expires


def allow_entries(
    rule: VulnerabilityRule, where: str, base: Path, problems: list[str], digest: Any
) -> tuple[AllowEntry, ...]:
    """The entries of ``rule.allow`` (written at ``where``) and of its ``allowFrom`` file (under ``base``,
    the policy's folder); problems are appended, and the file's bytes go into ``digest``."""
    entries = [_entry(e, where) for e in rule.allow]
    if rule.allow_from is not None:
        entries += _from_file(base / rule.allow_from, rule.allow_from, where, problems, digest)
    return tuple(entries)


def _entry(entry: AllowedVulnerability, source: str) -> AllowEntry:
    expires = expiry_time(entry.expires) if entry.expires is not None else None
    return AllowEntry(canonical_id(entry.id), entry.reason, expires, source)


def _from_file(path: Path, name: str, where: str, problems: list[str], digest: Any) -> list[AllowEntry]:
    if not path.name.endswith(ALLOW_LIST_SUFFIXES):
        problems.append(
            f"{where}: allowFrom {name!r}: name the allow-list file *.allow.yaml (or .allow.yml, "
            ".allow.json) so that a policy folder does not load it as a policy"
        )
        return []
    try:
        raw = path.read_bytes()
    except OSError as error:
        problems.append(f"{where}: allowFrom: cannot read {path}: {error.strerror}")
        return []
    digest.update(f"{name}\0{len(raw)}\0".encode())
    digest.update(raw)
    try:
        documents = list(load_documents(decode(raw, str(path)), str(path)))
    except InputError as error:
        problems.append(str(error))
        return []
    if len(documents) != 1:
        problems.append(
            f"{path}: an allow-list file holds one document (a list of entries), not {len(documents)}"
        )
        return []
    [document] = documents
    data = document.data
    items = data.get("allow") if isinstance(data, dict) and set(data) == {"allow"} else data
    prefix: Sequence[str | int] = ("allow",) if items is not data else ()
    try:
        entries = _ENTRIES.validate_python(items)
    except ValidationError as error:
        for item in error.errors(include_url=False):
            loc = (*prefix, *item["loc"])
            message = str(item["msg"]).removeprefix("Value error, ")
            problems.append(f"{path}:{document.line_of(tuple(loc))}: {_dotted(item['loc'])}: {message}")
        return []
    return [_entry(e, f"{path}:{document.line_of((*prefix, i))}") for i, e in enumerate(entries)]


def _dotted(loc: Sequence[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "<document>"
