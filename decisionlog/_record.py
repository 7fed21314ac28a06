"""One decision-log record and the hash that chains it to the one before.

The record format and the chain are specified in docs/decision-log.md (the reference for auditors' own
tools; a test checks it against a real log with an implementation of its own). In short: the hash of a
record is the SHA-256 of the RFC 8785 (JCS) canonical JSON of ``{"prev_hash": …, "record": …}``, so any
store — SQLite, PostgreSQL, an exported archive — can recompute it from the stored JSON alone. Records
hold no floating-point numbers (latency is in whole microseconds), and for such data the standard library's
sorted, compact JSON *is* JCS, several times faster than a general JCS encoder; anything else goes through
``rfc8785``.

Every answered request is recorded, whatever it held, so a record is made storable before it is written
(:func:`storable`; the stores do it): a lone surrogate (what a ``\ud800`` escape in the request's JSON
decodes to, which UTF-8 cannot encode) and NUL (which PostgreSQL text refuses) become
:data:`UNSTORABLE_MARK` followed by their JSON escape, e.g. ``"\ufffd\\ud800"``; text longer than
:data:`MAX_TEXT_CHARS` is cut, ending in ``…[N more characters not recorded]``; a list (violations, warnings,
images, engines) longer than :data:`MAX_ITEMS` entries or :data:`MAX_LIST_CHARS` characters keeps its first
entries and ends in ``{"omitted": N}`` (``"[N more entries not recorded]"`` among strings); integers beyond
±2^53 and non-finite numbers, which JCS cannot write, are kept as text. Applying it again changes nothing, so
records read back (and re-shipped from a spool) keep their hashes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import rfc8785

from decisionlog._errors import DecisionLogError
from decisionlog._json_fields import flag_of, integer_of, objects_of, optional_text_of, text_of, texts_of
from decisionlog._tree_json import tree_json
from policies.identity import WorkloadIdentity, identity_group

#: ``prev_hash`` of the first record of a chain.
GENESIS_HASH: Final = "0" * 64
#: The record format written now (docs/decision-log.md). Format 1 (records without a ``format`` key) lacks
#: ``format`` and ``groups``, and its images and engines carry no evidence; both are read back.
FORMAT: Final = 2

#: Fields of the hashed body that are also stored as columns, for queries; each must agree with the body.
INDEXED_NAMES: Final = (
    "record_id",
    "time",
    "uid",
    "operation",
    "kind",
    "namespace",
    "name",
    "allowed",
    "dry_run",
    "policy_revision",
)
#: Columns derived from the body (not fields of it), for queries; each must agree with what the body gives.
DERIVED_COLUMNS: Final = ("api_group",)

#: Longest text kept in one field; longer text is cut and says how much was left out.
MAX_TEXT_CHARS: Final = 4096
#: Most entries, and about the most characters (as JSON), kept in each list of a record.
MAX_ITEMS: Final = 1000
MAX_LIST_CHARS: Final = 256 * 1024
#: Stands before the ``\uXXXX`` escape of a character that cannot be stored (a lone surrogate, NUL).
UNSTORABLE_MARK: Final = "\ufffd"

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Room kept at the end of cut text for "…[N more characters not recorded]".
_CUT_SUFFIX_ROOM: Final = 64
_TEXT_FIELDS: Final = (
    "uid",
    "operation",
    "kind",
    "api_version",
    "sub_resource",
    "namespace",
    "name",
    "user",
    "reason",
    "message",
    "policy_revision",
    "replica",
)
LIST_FIELDS: Final = ("violations", "warnings", "images", "engines", "groups")
_FORMAT_1_KEYS: Final = frozenset(
    {
        "record_id",
        "time",
        "uid",
        "operation",
        "kind",
        "api_version",
        "sub_resource",
        "namespace",
        "name",
        "user",
        "dry_run",
        "allowed",
        "reason",
        "message",
        "violations",
        "warnings",
        "images",
        "engines",
        "policy_revision",
        "latency_us",
        "replica",
    }
)
#: The keys of a record of each format: exactly these, so that reading a record and writing it again gives
#: the bytes its hash was computed over.
KEYS: Final = {1: _FORMAT_1_KEYS, 2: _FORMAT_1_KEYS | {"format", "groups"}}

# Seeded from the OS (again in a forked child); record ids need uniqueness, not secrecy, and an os.urandom
# call per record costs a measurable share of an admission.
_ids = random.Random()  # noqa: S311
os.register_at_fork(after_in_child=_ids.seed)


def new_record_id() -> str:
    """128 random bits as hex: unique across replicas without a system call per record."""
    return f"{_ids.getrandbits(128):032x}"


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """What the webhook decided about one AdmissionReview, as written to the log (docs/decision-log.md).

    ``violations`` hold the Deny, Warn and Audit findings in their machine-readable form (``action`` says
    which); ``images`` and ``engines`` are objects with the reference as written, the digest where known,
    and the evidence the policies counted for each (``policies.results.ArtifactRecord``). ``user`` and
    ``groups`` are the requester as the API server authenticated them.
    """

    uid: str
    operation: str
    kind: str
    api_version: str
    allowed: bool
    reason: str
    namespace: str | None = None
    name: str | None = None
    sub_resource: str | None = None
    user: str | None = None
    dry_run: bool = False
    message: str | None = None
    violations: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    images: tuple[Mapping[str, Any], ...] = ()
    engines: tuple[Mapping[str, Any], ...] = ()
    policy_revision: str | None = None
    latency_us: int = 0
    replica: str | None = None
    groups: tuple[str, ...] = ()
    format: int = FORMAT
    time: datetime = field(default_factory=lambda: datetime.now(UTC))
    record_id: str = field(default_factory=new_record_id)

    def to_json(self) -> dict[str, Any]:
        """The JSON object that is stored and hashed (the keys of its :attr:`format`)."""
        data = {
            "record_id": self.record_id,
            "time": format_time(self.time),
            "uid": self.uid,
            "operation": self.operation,
            "kind": self.kind,
            "api_version": self.api_version,
            "sub_resource": self.sub_resource,
            "namespace": self.namespace,
            "name": self.name,
            "user": self.user,
            "dry_run": self.dry_run,
            "allowed": self.allowed,
            "reason": self.reason,
            "message": self.message,
            "violations": [dict(v) for v in self.violations],
            "warnings": list(self.warnings),
            "images": [dict(i) for i in self.images],
            "engines": [dict(e) for e in self.engines],
            "policy_revision": self.policy_revision,
            "latency_us": self.latency_us,
            "replica": self.replica,
        }
        if self.format >= 2:
            data["format"] = self.format
            data["groups"] = list(self.groups)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DecisionRecord:
        """Rebuild a record from :meth:`to_json` output; raises :class:`DecisionLogError` if it is not one.

        The keys must be exactly those of the record's format, so that :meth:`to_json` gives the object back.
        """
        try:
            version = data.get("format", 1)
            if isinstance(version, bool) or version not in KEYS:
                raise ValueError(f"unknown record format {version!r}")
            keys = set(data)
            if keys != KEYS[version]:
                extra, missing = sorted(keys - KEYS[version]), sorted(KEYS[version] - keys)
                raise ValueError(
                    f"keys of format {version} expected"
                    + (f"; unexpected: {', '.join(extra)}" if extra else "")
                    + (f"; missing: {', '.join(missing)}" if missing else "")
                )
            return cls(
                record_id=text_of(data, "record_id"),
                time=parse_time(text_of(data, "time")),
                uid=text_of(data, "uid"),
                operation=text_of(data, "operation"),
                kind=text_of(data, "kind"),
                api_version=text_of(data, "api_version"),
                sub_resource=optional_text_of(data, "sub_resource"),
                namespace=optional_text_of(data, "namespace"),
                name=optional_text_of(data, "name"),
                user=optional_text_of(data, "user"),
                dry_run=flag_of(data, "dry_run"),
                allowed=flag_of(data, "allowed"),
                reason=text_of(data, "reason"),
                message=optional_text_of(data, "message"),
                violations=tuple(objects_of(data, "violations")),
                warnings=tuple(texts_of(data, "warnings")),
                images=tuple(objects_of(data, "images")),
                engines=tuple(objects_of(data, "engines")),
                policy_revision=optional_text_of(data, "policy_revision"),
                latency_us=integer_of(data, "latency_us"),
                replica=optional_text_of(data, "replica"),
                groups=tuple(texts_of(data, "groups")),
                format=version,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise DecisionLogError(
                f"stored record is not a decision record: {error}",
                hint="the row was written by something other than trtguard or edited by hand",
            ) from None

    def canonical(self) -> bytes:
        """RFC 8785 canonical JSON of :meth:`to_json`, the form stored in the log."""
        return canonical_json(self.to_json())

    @property
    def api_group(self) -> str:
        """The API group that identifies the object (:func:`policies.identity.identity_group`): stored as a
        column beside the body, so that a workload's records are found by group, not by kind alone."""
        return identity_group(self.api_version, self.kind)

    @property
    def workload(self) -> WorkloadIdentity | None:
        """The workload the record is about: API group, kind, namespace and name (None without a namespace
        or a name)."""
        if self.namespace is None or self.name is None:
            return None
        return WorkloadIdentity(self.api_group, self.kind, self.namespace, self.name)


def storable(record: DecisionRecord) -> DecisionRecord:
    """``record`` with every field in a form every store can hold, and of bounded size (module docstring).

    Returns ``record`` itself when nothing needed changing.
    """
    changes: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        value = getattr(record, name)
        if isinstance(value, str) and (fixed := _storable_text(value)) is not value:
            changes[name] = fixed
    for name in LIST_FIELDS:
        entries = getattr(record, name)
        if (bounded := _entries(entries)) is not entries:
            changes[name] = bounded
    return dataclasses.replace(record, **changes) if changes else record


def _storable_text(value: str) -> str:
    if _UNSTORABLE.search(value):
        value = _UNSTORABLE.sub(lambda found: f"{UNSTORABLE_MARK}\\u{ord(found.group()):04x}", value)
    if len(value) > MAX_TEXT_CHARS:
        kept = MAX_TEXT_CHARS - _CUT_SUFFIX_ROOM
        value = f"{value[:kept]}…[{len(value) - kept} more characters not recorded]"
    return value


def _value(value: Any) -> tuple[Any, int]:
    """A JSON value (as a record's lists hold) that can be stored and hashed (the same object when it can),
    and about its length as JSON (what the list bounds count), found in the same walk."""
    if isinstance(value, str):
        text = _storable_text(value)
        return text, len(text) + 2
    if value is None or isinstance(value, bool):
        return value, len(str(value))
    if isinstance(value, int | float):
        text = str(value)
        if -(2**53) < value < 2**53 if isinstance(value, int) else _jcs_float(value):
            return value, len(text)
        return text, len(text) + 2  # JCS cannot write it (or read it back): kept as text
    if isinstance(value, Mapping):
        same, size, items = isinstance(value, dict), 2, []
        for key, item in value.items():
            new_key = _storable_text(str(key))
            new, item_size = _value(item)
            same = same and new_key is key and new is item
            size += len(new_key) + 4 + item_size
            items.append((new_key, new))
        return (value if same else dict(items)), size
    if isinstance(value, list | tuple):
        same, size, fixed = isinstance(value, list), 2, []
        for item in value:
            new, item_size = _value(item)
            same = same and new is item
            size += item_size + 1
            fixed.append(new)
        return (value if same else fixed), size
    text = _storable_text(str(value))
    return text, len(text) + 2


def _jcs_float(value: float) -> bool:
    """Whether JCS writes ``value`` as a number it reads back: a float from 2**53 to 1e21 it writes as
    integer digits, an integer JCS cannot write (attack 39b F3); beyond, in exponent notation."""
    return math.isfinite(value) and not 2**53 <= abs(value) < 1e21


def _entries(entries: tuple[Any, ...]) -> tuple[Any, ...]:
    """The entries, each storable, cut to :data:`MAX_ITEMS` and :data:`MAX_LIST_CHARS` behind a marker."""
    fixed, sizes = [], []
    for entry in entries:
        new, size = _value(entry)
        fixed.append(new)
        sizes.append(size)
    if len(fixed) > MAX_ITEMS or sum(sizes) > MAX_LIST_CHARS:
        # Room for the marker: the cut list fits both bounds, so that cutting it again changes nothing.
        kept, used = 0, _CUT_SUFFIX_ROOM
        while kept < MAX_ITEMS - 1 and used + sizes[kept] <= MAX_LIST_CHARS:
            used += sizes[kept]
            kept += 1
        omitted = len(fixed) - kept
        objects = all(isinstance(entry, dict) for entry in entries)
        marker = {"omitted": omitted} if objects else f"[{omitted} more entries not recorded]"
        return (*fixed[:kept], marker)
    if all(new is old for new, old in zip(fixed, entries, strict=True)):
        return entries
    return tuple(fixed)


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record read back from a store, with its place in the chain; ``text``: a query's (body, part)."""

    seq: int
    record: DecisionRecord
    prev_hash: str
    hash: str
    text: tuple[str, str | None] | None = field(default=None, compare=False, repr=False)


def chain_hash(prev_hash: str, record_json: Mapping[str, Any]) -> str:
    """The hash that links ``record_json`` (a :meth:`DecisionRecord.to_json` object) after ``prev_hash``."""
    return link_hash(prev_hash, canonical_json(record_json))


def canonical_json(data: Mapping[str, Any]) -> bytes:
    """RFC 8785 (JCS) canonical JSON of ``data``.

    Without floats (and with ASCII keys, as every record has) JCS and ``json.dumps`` with sorted keys, no
    whitespace and no ASCII escaping produce the same bytes: strings are escaped alike and integers print
    alike; only number formatting of floats and key order beyond ASCII differ.
    """
    if _plain(data):
        return _JSON.encode(data).encode("utf-8")
    return rfc8785.dumps(dict(data))


def canonical_parts(
    data: Mapping[str, Any], apart: Collection[str], *, plain: Callable[[Any], bytes] | None = None
) -> tuple[bytes, bytes, bytes]:
    """Canonical JSON of ``data`` (ASCII keys), of ``data`` without the keys ``apart``, and of those alone.

    Each member is encoded once and the three objects are joined from the pieces: a JCS object is its sorted
    members, each member's canonical form being the same on its own. (A store keeps the parts ``apart`` once
    and the record's hash covers the whole.) ``plain``: the caller knows ``data`` holds no float and no
    non-ASCII key (``decisionlog._stored``), so it is not walked again to find out, and encodes the values
    apart with this (:func:`tree_json`, or a memo of it).
    """
    whole: list[bytes] = []
    rest: list[bytes] = []
    alone: list[bytes] = []
    run: dict[str, Any] = {}
    for key in [*sorted(data), None]:  # None: the end, where the last run is encoded
        if key is not None and key not in apart:
            run[key] = data[key]
            continue
        if run:  # the members before this one, encoded together without their braces
            piece = (tree_json(run) if plain else canonical_json(run))[1:-1]
            whole.append(piece)
            rest.append(piece)
            run = {}
        if key is not None:
            value = data[key]
            encoded = plain(value) if plain else tree_json(value) if _plain(value) else rfc8785.dumps(value)
            whole.append(b'"%s":%s' % (key.encode("ascii"), encoded))
            alone.append(whole[-1])
    return b"{%s}" % b",".join(whole), b"{%s}" % b",".join(rest), b"{%s}" % b",".join(alone)


# Without floats (see canonical_json) this encoder writes JCS; one instance, not one per call of json.dumps.
_JSON: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and k.isascii() and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return (
        value is None
        or isinstance(value, str | bool)
        or (isinstance(value, int) and -(2**53) < value < 2**53)
    )


def link_hash(prev_hash: str, canonical_record: bytes) -> str:
    """:func:`chain_hash` from the record's canonical bytes (so a writer canonicalises each record once).

    The JCS form of ``{"prev_hash": p, "record": r}`` is exactly these bytes: keys sort as written, and a
    nested object's canonical form is its canonical form on its own.
    """
    digest = hashlib.sha256(b'{"prev_hash":"')
    digest.update(prev_hash.encode("ascii"))
    digest.update(b'","record":')
    digest.update(canonical_record)
    digest.update(b"}")
    return digest.hexdigest()


def load_body(body: str | bytes) -> dict[str, Any]:
    """Parse a stored record body; raises :class:`DecisionLogError` when it is not a JSON object."""
    try:
        data = json.loads(body)
    except ValueError as error:
        raise DecisionLogError(f"stored record is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise DecisionLogError("stored record is not a JSON object")
    return data


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with microseconds and a ``Z``: sortable as text."""
    utc = value.astimezone(UTC)
    if utc.year >= 1000:  # the same text as strftime's below, at half its cost (once per record written)
        return utc.isoformat(timespec="microseconds")[:-6] + "Z"
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # a year of fewer than four digits, as it always was


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time`; also accepts any RFC 3339 time with an offset."""
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"time {text!r} has no timezone")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # year 1 ahead of UTC, or 9999 behind it (attack 39b F4)
        raise ValueError(f"time {text!r} is out of range in UTC") from None
