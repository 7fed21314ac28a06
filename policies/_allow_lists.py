"""Vulnerability allow-lists: the entries of ``vulnerabilities.allow`` and of the file ``allowFrom`` names.

An entry names a finding by any of its ids or aliases, in any case (``cve-2020-14343``, ``GHSA-8Q59-…``:
:func:`verifier.scans.model.canonical_id`), says why it is admitted, and may expire: from ``expires`` on it
no longer matches, so that a forgotten exception ends by itself. An ``allowFrom`` file (YAML or JSON, relative
to the policy) holds a list of such entries, or a mapping with an ``allow`` list; its name ends in
``.allow.yaml``, ``.allow.yml`` or ``.allow.json``, so that a policy folder never loads it as a policy. Its
bytes count in the policy revision, and a malformed entry is a load error naming the file and line.

The file must lie in the policy's folder (or below it): an absolute name, one that climbs out with ``..``,
or a symbolic link that leads out is a load error, so that what admits a finding is reviewed, versioned and
watched (``serve`` reloads when it changes: :attr:`AllowEntries.files`) with the policy itself.

:class:`AllowList` matches findings in time linear in the findings' ids and the entries: one dictionary
lookup per id, never a scan of the list per finding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from policies.schema import AllowedVulnerability, VulnerabilityRule, expiry_time
from verifier.base import InputError, decode, load_documents
from verifier.scans import canonical_id

__all__ = ["ALLOW_LIST_SUFFIXES", "AllowEntries", "AllowEntry", "AllowList", "allow_entries"]

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


@dataclass(frozen=True, slots=True)
class AllowList:
    """Allow-list entries indexed by id, so that a finding is matched by looking up each of its ids."""

    entries: tuple[AllowEntry, ...] = ()
    _by_id: Mapping[str, tuple[AllowEntry, ...]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, entries: Iterable[AllowEntry]) -> AllowList:
        """The list of ``entries``, indexed once."""
        listed = tuple(entries)
        by_id: dict[str, list[AllowEntry]] = {}
        for entry in listed:
            by_id.setdefault(entry.id, []).append(entry)
        return cls(listed, {key: tuple(value) for key, value in by_id.items()})

    def match(self, ids: Sequence[str], now: datetime) -> tuple[AllowEntry | None, list[AllowEntry]]:
        """The entry active at ``now`` that admits the finding of ``ids`` (canonical, its own id first), and
        the expired entries that name them (None and those when no active one admits it).

        An entry naming any of the ids admits the finding, but where its aliases name several
        vulnerabilities of one scheme (an advisory listing two CVEs, ``ALAS-2023-1950``): then only an entry
        naming the finding's own id, or entries naming every one of those vulnerabilities, admit it, so that
        allowing one CVE never admits another that the same finding carries."""
        expired: list[AllowEntry] = []
        if not ids:
            return None, expired
        schemes: dict[str, list[str]] = {}
        for alias in ids[1:]:
            schemes.setdefault(alias.split("-", 1)[0], []).append(alias)
        several = [alias for group in schemes.values() if len(group) > 1 for alias in group]
        if not several:
            for finding_id in ids:
                entry = self._active(finding_id, now, expired)
                if entry is not None:
                    return entry, []
            return None, expired
        entry = self._active(ids[0], now, expired)
        if entry is not None:
            return entry, []
        each = [self._active(alias, now, expired) for alias in several]
        if all(each):
            return each[0], []
        return None, expired

    def _active(self, finding_id: str, now: datetime, expired: list[AllowEntry]) -> AllowEntry | None:
        """The first entry naming ``finding_id`` active at ``now``; the expired ones go to ``expired``."""
        for entry in self._by_id.get(finding_id, ()):
            if entry.active(now):
                return entry
            expired.append(entry)
        return None


@dataclass(frozen=True, slots=True)
class AllowEntries:
    """What :func:`allow_entries` read: the entries, and the allow-list files they came from."""

    allow_list: AllowList
    #: each file read, with the SHA-256 of the bytes read
    files: tuple[tuple[Path, str], ...] = ()


def allow_entries(
    rule: VulnerabilityRule, where: str, base: Path, problems: list[str], digest: Any
) -> AllowEntries:
    """The entries of ``rule.allow`` (written at ``where``) and of its ``allowFrom`` file (in ``base``, the
    policy's folder, or below it); problems are appended, and the file's bytes go into ``digest``."""
    entries = [_entry(e, where) for e in rule.allow]
    files: list[tuple[Path, str]] = []
    if rule.allow_from is not None:
        path = _inside(base, rule.allow_from, where, problems)
        if path is not None:
            entries += _from_file(path, rule.allow_from, where, problems, digest, files)
    return AllowEntries(AllowList.of(entries), tuple(files))


def _inside(base: Path, name: str, where: str, problems: list[str]) -> Path | None:
    """``base / name`` when it lies in ``base`` (lexically and once symbolic links are followed)."""
    written = Path(name)
    if written.is_absolute() or ".." in written.parts:
        problems.append(
            f"{where}: allowFrom {name!r}: the allow-list file must lie in the policy's folder ({base}) or "
            "below it: write a name relative to the policy, without '..'"
        )
        return None
    path = base / written
    try:
        resolved, folder = path.resolve(), base.resolve()
    except (OSError, RuntimeError) as error:  # a symbolic link loop
        problems.append(f"{where}: allowFrom {name!r}: cannot resolve {path}: {error}")
        return None
    if not resolved.is_relative_to(folder):
        problems.append(
            f"{where}: allowFrom {name!r}: {path} is a symbolic link to {resolved}, outside the policy's "
            f"folder ({folder}): keep the allow-list file itself beside the policy"
        )
        return None
    return path


def _entry(entry: AllowedVulnerability, source: str) -> AllowEntry:
    expires = expiry_time(entry.expires) if entry.expires is not None else None
    return AllowEntry(canonical_id(entry.id), entry.reason, expires, source)


def _from_file(
    path: Path, name: str, where: str, problems: list[str], digest: Any, files: list[tuple[Path, str]]
) -> list[AllowEntry]:
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
    files.append((path, hashlib.sha256(raw).hexdigest()))
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
