"""Recomputing a decision log's hash chain and naming the first record that breaks it."""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from decisionlog._body_json import SharedParts, canonical_of, duplicate_key, load_json
from decisionlog._errors import DecisionLogError
from decisionlog._record import (
    GENESIS_HASH,
    INDEXED_NAMES,
    DecisionRecord,
    StoredRecord,
    format_time,
    link_hash,
    parse_time,
)
from decisionlog._record_check import is_record

#: Called with each record that checks, in ``seq`` order, and the canonical JSON its hash covers (what an
#: evidence package carries): a reader that needs the records too gets them from the one pass that verifies.
ChainSink = Callable[[StoredRecord, bytes], None]


class DataSink:
    """A :data:`ChainSink` that takes each record that checks as the JSON object its hash covers (parsed, as
    :meth:`DecisionRecord.to_json` gives it), not as a :class:`DecisionRecord`, for a reader that needs a
    few fields of every record (an evidence export). The object must not be changed: the records of one
    pass share their shared part's values (so a reader can tell repeated parts by identity).

    With :attr:`wants_records` False the stores' chain check builds no record of a row at all: it checks the
    types ``from_json`` checks (``decisionlog._record_check``), with the same errors.
    """

    #: Whether the chain check still builds each row's record (as for a plain sink), checking it so.
    wants_records: bool = True

    def take(self, seq: int, prev_hash: str, hash_: str, data: Mapping[str, Any], canonical: bytes) -> None:
        """Take the next record that checks, in ``seq`` order, with the canonical JSON its hash covers."""
        raise NotImplementedError

    def __call__(self, stored: StoredRecord, canonical: bytes) -> None:
        """As a plain :data:`ChainSink`, from a reader that built the record."""
        self.take(stored.seq, stored.prev_hash, stored.hash, stored.record.to_json(), canonical)


@dataclass(frozen=True, slots=True)
class Row:
    """A stored row as the verifier sees it: the hashed body plus the indexed columns beside it."""

    seq: int
    body: str
    prev_hash: str
    hash: str
    columns: dict[str, Any]
    #: The stored body without its shared part, and that part, when ``body`` was joined from them: a reader
    #: parses each shared part once (:class:`SharedParts`). None: ``body`` is as stored.
    parts: tuple[str, str] | None = None
    #: False: what holds ``body`` is not as trtguard writes it (an archived segment's line with other text
    #: around the record), so the row is not vouched for even where ``body`` is canonical.
    framed: bool = True


@dataclass(frozen=True, slots=True)
class Break:
    """The first place where the chain does not hold."""

    seq: int
    uid: str | None
    problem: str


@dataclass(frozen=True, slots=True)
class ChainReport:
    """Result of :func:`verify_rows`: how many records were checked and the first break, if any."""

    records: int
    head_seq: int
    head_hash: str
    first_break: Break | None = None
    #: The checkpoint the chain was checked from (records up to it were pruned); 0: from genesis.
    base_seq: int = 0

    @property
    def ok(self) -> bool:
        """True when every record links to the one before and the chain head matches the last record."""
        return self.first_break is None

    def summary(self) -> str:
        """One line for people."""
        if self.first_break is None:
            since = f" after the checkpoint at seq {self.base_seq}" if self.base_seq else ""
            return (
                f"chain verified: {self.records} records{since}, head {self.head_hash[:16]}… at seq "
                f"{self.head_seq}"
            )
        brk = self.first_break
        uid = f" (uid {brk.uid})" if brk.uid else ""
        return f"chain broken at record seq {brk.seq}{uid}: {brk.problem}"


class ChainVerifier:
    """Checks rows one at a time in ``seq`` order, so that a store can stream a log of any size."""

    def __init__(self, *, records: bool = True) -> None:
        #: Whether each row's record is built (:attr:`last_record`); else only its JSON is kept (a
        #: :class:`DataSink`), checked as a record would be.
        self.records = records
        #: The record of the last row that checked (read once here, for callers that fold records too).
        self.last_record: DecisionRecord | None = None
        #: The JSON of the last row that checked, as its hash covers it.
        self.last_data: Mapping[str, Any] | None = None
        #: The canonical JSON of :attr:`last_record`, as its hash covers it.
        self.last_canonical = b""
        #: The ``seq`` of the last row that checked (0: none yet).
        self.last_seq = 0
        self._expected_seq = 1
        self._prev = GENESIS_HASH
        self._previous: tuple[int, str | None] | None = None
        self._base_seq = 0
        self._count = 0
        self._break: Break | None = None
        # A row that is sound by itself but links to another hash than the record before it: decided once
        # the rest of the log was seen (see ``_resolve``).
        self._suspect: _Suspect | None = None
        self._shared = SharedParts()
        # The first row whose hash recomputes but whose stored text is not the canonical JSON the hash
        # covers: the chain vouches for no record from it on (none is handed on), and it is the break
        # unless the links name one no later (see ``finish``).
        self._unsound: Break | None = None

    def start_after(self, seq: int, hash_: str) -> None:
        """Begin after record ``seq`` with hash ``hash_`` (a log pruned up to a checkpoint), not genesis."""
        self._expected_seq = seq + 1
        self._prev = hash_
        self._base_seq = seq

    def feed(self, row: Row) -> bool:
        """Check the next row; returns False once the chain is broken (later rows need not be read)."""
        if self._suspect is not None:
            return self._suspect.look(row)
        if self._break is not None:
            return False
        self._count += 1
        problem, uid, data, record, canonical, exact = _check(
            row, self._expected_seq, self._prev, self._shared, self.records
        )
        if problem == _EDITED_BEFORE and self._previous is not None:
            # The row links, by a hash that covers it, to something other than the record before it. Which
            # record is out of place shows only further on: read the rest (of a broken log) before naming it.
            seq, previous_uid = self._previous
            self._suspect = _Suspect(row.seq, uid, row.prev_hash, seq, previous_uid, self._prev)
            return True
        if problem is not None:
            self._break = Break(row.seq, uid, problem)
            return False
        self._expected_seq = row.seq + 1
        self._prev = row.hash
        self._previous = (row.seq, uid)
        if self._unsound is None and not exact:
            self._unsound = Break(row.seq, uid, _not_canonical(row))
        if self._unsound is not None:
            # Read on only to tell how the links break, if they do: nothing from here on is vouched for.
            self.last_record, self.last_data, self.last_canonical = None, None, b""
            return True
        self.last_record = record
        self.last_data = data
        self.last_canonical = canonical
        self.last_seq = row.seq
        return True

    def finish(self, *, head_seq: int | None, head_hash: str | None) -> ChainReport:
        """The report, after comparing the last record with the chain-head row (None: the row is missing).

        Writers update the head in the same transaction as their inserts, so records removed from the end
        are noticed too. A record stored as other text than the canonical JSON its hash covers is the break
        unless the links break at it or before it (their account of an edit says more).
        """
        report = self._finish(head_seq=head_seq, head_hash=head_hash)
        unsound, brk = self._unsound, report.first_break
        if unsound is None or (brk is not None and brk.seq <= unsound.seq):
            return report
        return ChainReport(report.records, report.head_seq, report.head_hash, unsound, report.base_seq)

    def _finish(self, *, head_seq: int | None, head_hash: str | None) -> ChainReport:
        if self._suspect is not None:
            self._break = self._suspect.resolve()
        last_seq = self._expected_seq - 1
        if head_seq is None or head_hash is None:
            missing = Break(
                last_seq + 1,
                None,
                "the chain-head row (trtguard_chain_head, id 1) is missing: it was deleted, so records "
                "removed from the end of the log cannot be noticed; restore the log from a backup",
            )
            return ChainReport(self._count, last_seq, self._prev, self._break or missing, self._base_seq)
        if self._break is not None:
            return ChainReport(self._count, head_seq, head_hash, self._break, self._base_seq)
        if head_seq == last_seq and head_hash != self._prev and last_seq > self._base_seq:
            uid = self._previous[1] if self._previous is not None else None
            brk = Break(
                last_seq,
                uid,
                f"the last record's hash {self._prev[:16]}… is not the head's {head_hash[:16]}…: the record "
                "was changed and its hash recomputed (or records before it, with every hash after them)",
            )
            return ChainReport(self._count, head_seq, head_hash, brk, self._base_seq)
        if (head_seq, head_hash) != (last_seq, self._prev):
            brk = Break(
                last_seq + 1,
                None,
                f"the chain head says seq {head_seq} with hash {head_hash[:16]}…, but the last record is seq "
                f"{last_seq} with hash {self._prev[:16]}…: records at the end were removed",
            )
            return ChainReport(self._count, head_seq, head_hash, brk, self._base_seq)
        return ChainReport(self._count, head_seq, head_hash, None, self._base_seq)


def verify_rows(
    rows: Iterable[Row],
    *,
    head_seq: int | None,
    head_hash: str | None,
    base: tuple[int, str] | None = None,
    sink: ChainSink | None = None,
) -> ChainReport:
    """Check every link, hash and indexed column of ``rows`` (in ``seq`` order), then the chain head.

    ``base`` is the ``(seq, hash)`` of the newest pruned checkpoint: the chain starts after it. Each row
    that checks goes to ``sink`` (if given) as it checks; the report says whether the whole chain held.
    """
    verifier = ChainVerifier(records=builds_records(sink))
    if base is not None:
        verifier.start_after(*base)
    for row in rows:
        if not feed(verifier, row, sink):
            break
    return verifier.finish(head_seq=head_seq, head_hash=head_hash)


def builds_records(sink: ChainSink | None) -> bool:
    """Whether a chain check for ``sink`` builds each row's record (see :class:`DataSink`)."""
    return not isinstance(sink, DataSink) or sink.wants_records


def feed(verifier: ChainVerifier, row: Row, sink: ChainSink | None) -> bool:
    """``verifier.feed(row)``, then ``row`` to ``sink`` if it checked (a row under suspicion goes nowhere)."""
    if not verifier.feed(row):
        return False
    if sink is None or verifier.last_seq != row.seq:
        return True
    if isinstance(sink, DataSink) and verifier.last_data is not None:
        sink.take(row.seq, row.prev_hash, row.hash, verifier.last_data, verifier.last_canonical)
    elif verifier.last_record is not None:
        sink(StoredRecord(row.seq, verifier.last_record, row.prev_hash, row.hash), verifier.last_canonical)
    return True


@dataclass(slots=True)
class _Suspect:
    """Row ``seq`` is sound by itself, but its ``prev_hash`` (``links_to``) is not the hash of the record
    before it, seq ``before_seq`` (``before_hash``). Reading on tells which record is out of place:

    - a later row links to ``before_hash``: the record before is intact (its successor is still in the log,
      elsewhere), so records were reordered and row ``seq`` is the first out of place;
    - else the record before is not vouched for: it may have been changed after row ``seq`` was written and
      its own hash recomputed, or records after it were deleted and the later ones renumbered (nothing in
      the log tells the two apart); a later row with the hash ``links_to`` says records were moved as well.
    """

    seq: int
    uid: str | None
    links_to: str
    before_seq: int
    before_uid: str | None
    before_hash: str
    moved_from: int | None = None
    intact_before: int | None = None

    def look(self, row: Row) -> bool:
        """Look at a later row; False once it is decided."""
        if row.hash == self.links_to and self.moved_from is None:
            self.moved_from = row.seq
        if row.prev_hash == self.before_hash:
            self.intact_before = row.seq
        return self.intact_before is None

    def resolve(self) -> Break:
        """The break, once the later rows were looked at: the first record the chain does not vouch for."""
        if self.intact_before is not None:
            return Break(
                self.seq,
                self.uid,
                f"the record is out of place: the record that follows seq {self.before_seq} is now at seq "
                f"{self.intact_before}: records were reordered",
            )
        moved = (
            f"; seq {self.seq} belongs after the record now at seq {self.moved_from}: records were moved too"
            if self.moved_from is not None
            else ""
        )
        return Break(
            self.before_seq,
            self.before_uid,
            f"seq {self.seq} links to a hash {self.links_to[:16]}… other than this record's, though both "
            f"hashes recompute: the record was changed after seq {self.seq} was written and its hash "
            f"recomputed, or records after it were deleted and the later ones renumbered{moved}",
        )


_CHANGED: Final = "stored hash does not match the record's content: the record was changed"
#: What :func:`_check` says when a row is sound by itself but links to another hash than the record before.
_EDITED_BEFORE = "prev_hash is not the hash of the record before it, though its own hash recomputes"


def _check(
    row: Row, expected_seq: int, prev: str, shared: SharedParts, records: bool
) -> tuple[str | None, str | None, dict[str, Any] | None, DecisionRecord | None, bytes, bool]:
    """What is wrong with ``row`` (None: nothing), its uid, JSON, record (``records``: else None, where the
    JSON is one) and canonical JSON, and, for a row that checks, whether its stored text is exactly that
    canonical JSON (where it is kept in two parts, the text of each is the canonical JSON of what it holds,
    and they hold no key in common)."""
    joined = shared.checked(*row.parts) if row.parts is not None else None
    try:
        data, canonical = joined[:2] if joined is not None else _canonical_body(row.body)
    except DecisionLogError as error:
        return error.message, None, None, None, b"", False
    uid = data.get("uid") if isinstance(data.get("uid"), str) else None
    if row.seq != expected_seq:
        return (
            f"expected seq {expected_seq} next, found {row.seq}: records were removed before it",
            uid,
            None,
            None,
            b"",
            False,
        )
    if row.prev_hash != prev:
        if link_hash(row.prev_hash, canonical) == row.hash:
            return _EDITED_BEFORE, uid, None, None, b"", False
        return "prev_hash does not match the hash of the record before it", uid, None, None, b"", False
    if link_hash(prev, canonical) != row.hash:
        return _CHANGED, uid, None, None, b"", False
    record = None
    if records or not is_record(data):
        try:
            record = DecisionRecord.from_json(data)
        except DecisionLogError as error:
            return error.message, uid, None, None, b"", False
    try:  # every column as in the body (a time as format_time writes it): nothing more to tell apart
        same = _INDEXED(row.columns) == _INDEXED(data) and _FORMATTED_TIME.fullmatch(data["time"])
    except KeyError:  # a column not read (a row not from a store)
        same = None
    for column in () if same else INDEXED_NAMES:
        # The record's fields as to_json gives them: the body's own values (from_json checked their types),
        # but for a time not written as format_time writes it (building the whole JSON again costs more).
        stored = data[column]
        if column == "time" and not _FORMATTED_TIME.fullmatch(stored):
            stored = format_time(record.time if record is not None else parse_time(stored))
        value = row.columns.get(column)
        if isinstance(stored, bool):
            value = None if value is None else bool(value)
        if value != stored:
            return (
                f"column {column} ({value!r}) differs from the hashed record ({stored!r})",
                uid,
                None,
                None,
                b"",
                False,
            )
    if "api_group" in row.columns and row.columns["api_group"] != (
        group := _api_group(data["api_version"], data["kind"])
    ):
        return (
            f"column api_group ({row.columns['api_group']!r}) differs from the hashed record's API group "
            f"({group!r})",
            uid,
            None,
            None,
            b"",
            False,
        )
    if not row.framed:
        exact = False
    elif joined is not None and joined[2]:
        exact = True  # SharedParts.checked compared both texts with their canonical JSON
    elif row.parts is None:
        exact = canonical == row.body.encode()
    else:
        exact = _parts_exact(*row.parts, shared, data)
    return None, uid, data, record, canonical, exact


#: The indexed columns of a row (or fields of a record's JSON), in order.
_INDEXED: Final = operator.itemgetter(*INDEXED_NAMES)


@functools.lru_cache(maxsize=256)
def _api_group(api_version: str, kind: str) -> str:
    """:attr:`DecisionRecord.api_group` of a record of ``api_version`` and ``kind`` (a log holds a few)."""
    return DecisionRecord(
        uid="", operation="", kind=kind, api_version=api_version, allowed=False, reason=""
    ).api_group


#: A time as format_time writes it (a year of four digits: strftime writes no leading zero).
_FORMATTED_TIME: Final = re.compile(r"[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


def _canonical_body(body: str) -> tuple[dict[str, Any], bytes]:
    """The parsed body and its canonical JSON; raises :class:`DecisionLogError` for a body that is not a
    JSON object (as ``load_body``)."""
    try:
        data, plain = load_json(body)
    except (ValueError, RecursionError) as error:
        raise DecisionLogError(f"stored record is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise DecisionLogError("stored record is not a JSON object")
    try:
        return data, canonical_of(data, plain)
    except (ValueError, RecursionError, OverflowError) as error:
        # a lone surrogate, an integer or float RFC 8785 cannot write: no record trtguard wrote holds one
        raise DecisionLogError(f"stored record cannot be written as canonical JSON: {error}") from None


def _parts_exact(own: str, part: str, shared: SharedParts, data: Mapping[str, Any]) -> bool:
    """Whether the stored texts of a body's own part and of its shared part are each the canonical JSON of
    an object, the shared part holding the record's engines and images and the own part neither: what a
    store writes (``decisionlog._sql.link``). The shared part is checked once a pass (``shared``); ``data``:
    the values of the two, joined and parsed."""
    return shared.exact(own, part, data)


def _not_canonical(row: Row) -> str:
    """Why a row whose hash recomputes is still a break: its stored text is not the canonical JSON."""
    duplicate = next(
        (key for text in (row.parts or (row.body,)) if (key := _duplicate_key(text)) is not None), None
    )
    what = (
        f"the key {duplicate!r} appears twice in one object (JSON readers differ on which value counts)"
        if duplicate is not None
        else "the archived line holds other text around the record than trtguard writes"
        if not row.framed
        else "other text for the same values (whitespace, order of keys, escapes or numbers written "
        "otherwise, or a key in both the body and its shared part)"
    )
    return (
        f"the stored record is not the canonical JSON (RFC 8785) its hash covers: {what}; the record or its "
        "stored text was changed"
    )


def _duplicate_key(text: str) -> str | None:
    """The first key found twice in one object of ``text`` (None: none, or not JSON)."""
    return duplicate_key(text)
