"""SQL text shared by both stores; only the parameter placeholder differs (``?`` or ``%s``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from decisionlog._body_json import SHARED_KEYS as _SHARED_KEYS
from decisionlog._body_json import NotText, SharedParts, canonical_object
from decisionlog._chain import Row
from decisionlog._errors import DecisionLogError
from decisionlog._record import (
    DERIVED_COLUMNS,
    INDEXED_NAMES,
    DecisionRecord,
    StoredRecord,
    format_time,
    link_hash,
    load_body,
)
from decisionlog._store import RecordQuery
from decisionlog._stored import stored_form

#: Parts of a record kept once in ``trtguard_shared`` and referenced from each record that holds them.
SHARED_KEYS: Final = _SHARED_KEYS
#: Below this many bytes of canonical JSON the parts stay in the body: a reference would not save space.
MIN_SHARED_BYTES: Final = 160
#: What a SELECT returns: chain fields, indexed columns, then the shared part (see :func:`chain_row`).
ROW_COLUMNS: Final = ", ".join(
    (
        "seq",
        "body",
        "prev_hash",
        "hash",
        *INDEXED_NAMES,
        *DERIVED_COLUMNS,
        "(SELECT content FROM trtguard_shared WHERE ref = shared_ref)",
    )
)
INSERT_COLUMNS: Final = ", ".join(
    ("seq", *INDEXED_NAMES, *DERIVED_COLUMNS, "body", "prev_hash", "hash", "shared_ref")
)
#: Stores one shared part (``ref``, ``content``); one already there stays as it is.
INSERT_SHARED: Final = (
    "INSERT INTO trtguard_shared (ref, content) VALUES ({p}, {p}) ON CONFLICT (ref) DO NOTHING"
)
#: Shared parts' refs by their content, for the parts linked last: a workload's next admission repeats its
#: images and engines, whose SHA-256 (as much hashing as the record's own link) is then looked up instead.
#: A ref depends on the content alone, so every store and thread may use it; bounded in entries and bytes.
_REFS: Final[dict[bytes, str]] = {}
_REFS_MAX: Final = 128
_REF_MAX_BYTES: Final = 32 * 1024
#: Most shared-part refs a writer remembers as stored (:class:`KnownParts`).
_PARTS_KNOWN: Final = 4096


@dataclass(slots=True)
class KnownParts:
    """Refs of the shared parts one writer's connection committed, and the chain head it left.

    Those are not inserted again (``trtguard_shared`` is never deleted from). The file can still change
    under the connection, a backup restored into it or another writer appending, and then parts it
    remembers may be missing: when a batch finds another head than the one this connection left, the refs
    are forgotten and every part of the batch is inserted (one already there stays as it is).
    """

    refs: set[str] = field(default_factory=set)
    head: tuple[int, str] | None = None

    def unknown(self, shared: dict[str, tuple[str, str]], head: tuple[int, str]) -> list[tuple[str, str]]:
        """The parts of ``shared`` to insert in a batch that found the chain at ``head``."""
        if head != self.head:
            self.refs.clear()
        return [part for ref, part in shared.items() if ref not in self.refs]

    def committed(self, inserted: Iterable[tuple[str, str]], head: tuple[int, str]) -> None:
        """After a COMMIT that left the chain at ``head``: the parts it inserted are stored."""
        if len(self.refs) >= _PARTS_KNOWN:
            self.refs.clear()  # a bound on memory: a part forgotten is only inserted once more (DO NOTHING)
        self.refs.update(ref for ref, _ in inserted)
        self.head = head


def select(query: RecordQuery, placeholder: str) -> tuple[str, list[object]]:
    """``SELECT`` of :data:`ROW_COLUMNS` for ``query`` with its parameters."""
    clauses: list[str] = []
    params: list[object] = []
    for column, value in (
        ("namespace", query.namespace),
        ("name", query.name),
        ("kind", query.kind),
        ("api_group", query.group),
        ("uid", query.uid),
        ("allowed", query.allowed),
        ("dry_run", query.dry_run),
    ):
        if value is not None:
            clauses.append(f"{column} = {placeholder}")
            params.append(value)
    if query.since is not None:
        clauses.append(f"time >= {placeholder}")
        params.append(format_time(query.since))
    if query.until is not None:
        clauses.append(f"time < {placeholder}")
        params.append(format_time(query.until))
    if query.after_seq is not None:
        clauses.append(f"seq > {placeholder}")
        params.append(query.after_seq)
    if query.before_seq is not None:
        clauses.append(f"seq < {placeholder}")
        params.append(query.before_seq)
    if query.older_than is not None:
        moment, seq = format_time(query.older_than[0]), query.older_than[1]
        clauses.append(f"(time < {placeholder} OR (time = {placeholder} AND seq < {placeholder}))")
        params += [moment, moment, seq]
    sql = f"SELECT {ROW_COLUMNS} FROM trtguard_decisions"  # noqa: S608 - only fixed column names are formatted in
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    order = "time {0}, seq {0}" if query.by_time else "seq {0}"
    sql += " ORDER BY " + order.format("DESC" if query.newest_first else "ASC")
    if query.limit is not None or query.offset is not None:
        # LIMIT -1 (SQLite) and LIMIT ALL (PostgreSQL) differ; a limit of 2^62 means "no limit" in both.
        sql += f" LIMIT {placeholder} OFFSET {placeholder}"
        params += [query.limit if query.limit is not None else 2**62, query.offset or 0]
    return sql, params


def insert(placeholder: str) -> str:
    """``INSERT`` of one row in :data:`INSERT_COLUMNS` order."""
    marks = ", ".join([placeholder] * (len(INDEXED_NAMES) + len(DERIVED_COLUMNS) + 5))
    return f"INSERT INTO trtguard_decisions ({INSERT_COLUMNS}) VALUES ({marks})"  # noqa: S608 - fixed text


def link(
    record: DecisionRecord, seq: int, prev: str
) -> tuple[tuple[object, ...], tuple[str, str] | None, StoredRecord]:
    """The :func:`insert` values for ``record`` as number ``seq`` after hash ``prev``, the shared part to
    store first (``(ref, content)`` for :data:`INSERT_SHARED`, or None), and what is stored.

    What is stored is :func:`storable` of ``record``: no content of a request can make the write fail.
    """
    # One encoding of each member: the hashed body, the body without its shared part, and that part.
    record, data, (body, rest, content) = stored_form(record, SHARED_KEYS)
    digest = link_hash(prev, body)
    shared: tuple[str, str] | None = None
    if len(content) >= MIN_SHARED_BYTES:
        # 128 bits of SHA-256 name the part; were two parts ever to collide, the records would not verify
        # (the hash covers the content), so a collision could only be noticed, never go unseen.
        shared = (_shared_ref(content), content.decode())
        body = rest
    values = (
        seq,
        *(data[name] for name in INDEXED_NAMES),
        record.api_group,
        body.decode(),
        prev,
        digest,
        shared and shared[0],
    )
    return values, shared, StoredRecord(seq, record, prev, digest)


def _shared_ref(content: bytes) -> str:
    """The first 128 bits of the SHA-256 of ``content``, in hex: the ref of a shared part."""
    ref = _REFS.get(content)
    if ref is None:
        ref = hashlib.sha256(content).hexdigest()[:32]
        if len(content) <= _REF_MAX_BYTES:
            if len(_REFS) >= _REFS_MAX:
                _REFS.clear()  # not evicting one by one: clear() is one step for threads sharing the dict
            _REFS[content] = ref
    return ref


def _whole_body(body: str, shared: str | None) -> str:
    """The stored body with its shared part put back: both are JSON objects, so the texts join."""
    if shared is None:
        return body
    return body[:-1] + "," + shared[1:] if body.endswith("}") and shared.startswith("{") else body


def stored_record(row: Sequence[Any], shared: SharedParts | None = None) -> StoredRecord:
    """A :data:`ROW_COLUMNS` row read back as a record, with the text it was read from; ``shared``: the
    shared parts of the rows read so far, so that each is parsed (and kept) once."""
    body, part = _text(row[1], row[0]), None if row[-1] is None else _text(row[-1], row[0])
    data = shared.load(body, part) if shared is not None and part is not None else None
    if data is None:
        data = load_body(_whole_body(body, part))
    if shared is not None and part is not None:
        part = shared.text(part)
    return StoredRecord(row[0], DecisionRecord.from_json(data), row[2], row[3], (body, part))


def chain_row(row: Sequence[Any]) -> Row:
    """A :data:`ROW_COLUMNS` row as the chain verifier reads it (the body whole again, and its parts)."""
    columns = dict(zip(_COLUMN_NAMES, row[4:-1], strict=True))
    body, part = row[1], row[-1]
    if type(body) is not str or (part is not None and type(part) is not str):
        # Not text (a BLOB): a break at this row, named (NotText), not a reader's TypeError.
        return Row(row[0], NotText(), row[2], row[3], columns)
    parts = None if part is None else (body, part)
    return Row(row[0], _whole_body(body, part), row[2], row[3], columns, parts)


def _text(value: Any, seq: int) -> str:
    """A stored body or shared part as text: a BLOB (SQLite) of UTF-8 decoded, as :class:`NotText`."""
    if isinstance(value, str):
        return value
    try:
        return NotText(bytes(value).decode())
    except (TypeError, ValueError):
        raise DecisionLogError(
            f"record seq {seq} is stored as a {type(value).__name__} that is not UTF-8 text",
            location="trtguard_decisions",
        ) from None


_COLUMN_NAMES: Final = (*INDEXED_NAMES, *DERIVED_COLUMNS)


#: The newest pruned checkpoint's ``statement``: the live chain starts after its ``last_seq``.
PRUNED_BASE: Final = "SELECT statement FROM trtguard_checkpoints WHERE pruned ORDER BY last_seq DESC LIMIT 1"


def pruned_base(rows: Sequence[Any]) -> tuple[int, str] | None:
    """``(last_seq, head_hash)`` of the :data:`PRUNED_BASE` row, if any.

    Only its numbers are taken here; whether the operator signed it is ``trtguard audit verify --key``'s
    question.
    """
    if not rows:
        return None
    statement = canonical_object(
        rows[0][0], what="the stored statement of the newest pruned checkpoint", where="trtguard_checkpoints"
    )
    seq, head = statement.get("last_seq"), statement.get("head_hash")
    if not isinstance(seq, int) or not isinstance(head, str):
        raise DecisionLogError("a stored checkpoint is malformed", location="trtguard_checkpoints")
    return seq, head


def carried_rows(
    namespace: str | None,
    name: str | None,
    through_seq: int,
    placeholder: str,
    *,
    group: str | None = None,
    kind: str | None = None,
) -> tuple[str, list[object]]:
    """``SELECT namespace, api_group, kind, name, content`` of the carried state at checkpoint
    ``through_seq`` (each workload's newest row at or before it): of one workload (API group, kind,
    namespace and name), of every workload of a namespace and name (no group or kind given), or of all."""
    p = placeholder
    # Only fixed column names and the placeholder are formatted in.
    newest = (
        "c.through_seq = (SELECT MAX(m.through_seq) FROM trtguard_carried m WHERE m.namespace = c.namespace"  # noqa: S608
        " AND m.api_group = c.api_group AND m.kind = c.kind AND m.name = c.name"
        f" AND m.through_seq <= {p})"
    )
    clauses = [newest]
    params: list[object] = [through_seq]
    for column, value in (("namespace", namespace), ("name", name), ("api_group", group), ("kind", kind)):
        if value is not None:
            clauses.append(f"c.{column} = {p}")
            params.append(value)
    sql = "SELECT c.namespace, c.api_group, c.kind, c.name, c.content FROM trtguard_carried c WHERE "
    sql += " AND ".join(clauses)
    return sql + " ORDER BY c.namespace, c.api_group, c.kind, c.name", params


#: Whether an admission (by ``record_id``, :func:`carried_pattern`) is carried forward: an undelivered record
#: may follow its allow after rotation pruned it, and must still be written (docs/decision-log-storage.md).
CARRIED_ADMISSION: Final = "SELECT 1 FROM trtguard_carried WHERE content LIKE {p} LIMIT 1"


def carried_pattern(record_id: str) -> str:
    """The LIKE pattern of an admission ``record_id`` in a carried row (ids are hex: nothing to escape)."""
    if not all(c in "0123456789abcdef" for c in record_id):
        return "\x00"  # matches nothing: not an id this log wrote
    return f'%"record_id":"{record_id}"%'


#: The newest pruned checkpoint's ``last_seq`` (0 when nothing was pruned): where lookups read the state.
CARRIED_BASE: Final = "SELECT COALESCE(MAX(last_seq), 0) FROM trtguard_checkpoints WHERE pruned"
#: Whether the carried state through a checkpoint is stored (``last_seq`` as the one parameter).
CARRIED_STORED: Final = "SELECT 1 FROM trtguard_carried_checkpoints WHERE last_seq = {p}"
#: Deletes the rows a newer row of the same workload at or before a checkpoint replaces (its ``last_seq``
#: twice): run when that checkpoint is pruned, they can no longer be looked up.
CARRIED_SUPERSEDED: Final = (
    "DELETE FROM trtguard_carried WHERE through_seq < {p} AND EXISTS (SELECT 1 FROM trtguard_carried n"
    " WHERE n.namespace = trtguard_carried.namespace AND n.api_group = trtguard_carried.api_group"
    " AND n.kind = trtguard_carried.kind"
    " AND n.name = trtguard_carried.name AND n.through_seq > trtguard_carried.through_seq"
    " AND n.through_seq <= {p})"
)
