"""SQL text shared by both stores; only the parameter placeholder differs (``?`` or ``%s``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from webhook.decisionlog.chain import Row
from webhook.decisionlog.errors import DecisionLogError
from webhook.decisionlog.record import (
    INDEXED_NAMES,
    DecisionRecord,
    StoredRecord,
    canonical_json,
    format_time,
    link_hash,
    load_body,
    storable,
)
from webhook.decisionlog.store import RecordQuery

#: What a SELECT returns: the chain fields first, then the indexed columns (see :func:`chain_row`).
ROW_COLUMNS: Final = ", ".join(("seq", "body", "prev_hash", "hash", *INDEXED_NAMES))
INSERT_COLUMNS: Final = ", ".join(("seq", *INDEXED_NAMES, "body", "prev_hash", "hash"))


def select(query: RecordQuery, placeholder: str) -> tuple[str, list[object]]:
    """``SELECT`` of :data:`ROW_COLUMNS` for ``query`` with its parameters."""
    clauses: list[str] = []
    params: list[object] = []
    for column, value in (
        ("namespace", query.namespace),
        ("name", query.name),
        ("kind", query.kind),
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
    marks = ", ".join([placeholder] * (len(INDEXED_NAMES) + 4))
    return f"INSERT INTO trtguard_decisions ({INSERT_COLUMNS}) VALUES ({marks})"  # noqa: S608 - fixed text


def link(record: DecisionRecord, seq: int, prev: str) -> tuple[tuple[object, ...], StoredRecord]:
    """The :func:`insert` values for ``record`` as number ``seq`` after hash ``prev``, and what is stored.

    What is stored is :func:`storable` of ``record``: no content of a request can make the write fail.
    """
    record = storable(record)
    data = record.to_json()
    body = canonical_json(data)
    digest = link_hash(prev, body)
    values = (seq, *(data[name] for name in INDEXED_NAMES), body.decode(), prev, digest)
    return values, StoredRecord(seq, record, prev, digest)


def stored_record(row: Sequence[Any]) -> StoredRecord:
    """A :data:`ROW_COLUMNS` row read back as a record."""
    return StoredRecord(row[0], DecisionRecord.from_json(load_body(row[1])), row[2], row[3])


def chain_row(row: Sequence[Any]) -> Row:
    """A :data:`ROW_COLUMNS` row as the chain verifier reads it."""
    return Row(row[0], row[1], row[2], row[3], dict(zip(INDEXED_NAMES, row[4:], strict=True)))


#: The newest pruned checkpoint's ``statement``: the live chain starts after its ``last_seq``.
PRUNED_BASE: Final = "SELECT statement FROM trtguard_checkpoints WHERE pruned ORDER BY last_seq DESC LIMIT 1"


def pruned_base(rows: Sequence[Any]) -> tuple[int, str] | None:
    """``(last_seq, head_hash)`` of the :data:`PRUNED_BASE` row, if any.

    Only its numbers are taken here; whether the operator signed it is ``trtguard audit verify --key``'s
    question.
    """
    if not rows:
        return None
    statement = load_body(rows[0][0])
    seq, head = statement.get("last_seq"), statement.get("head_hash")
    if not isinstance(seq, int) or not isinstance(head, str):
        raise DecisionLogError("a stored checkpoint is malformed", location="trtguard_checkpoints")
    return seq, head
