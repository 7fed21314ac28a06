"""SQL text shared by both stores; only the parameter placeholder differs (``?`` or ``%s``)."""

from __future__ import annotations

from typing import Final

from webhook.decisionlog.record import format_time
from webhook.decisionlog.store import RecordQuery

ROW_COLUMNS: Final = (
    "seq, body, prev_hash, hash, record_id, time, uid, operation, kind, namespace, name, allowed, dry_run,"
    " policy_revision"
)
INSERT_COLUMNS: Final = (
    "seq, record_id, time, uid, operation, kind, namespace, name, allowed, dry_run, policy_revision, body,"
    " prev_hash, hash"
)


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
    sql += " ORDER BY seq DESC" if query.newest_first else " ORDER BY seq"
    if query.limit is not None:
        sql += f" LIMIT {placeholder}"
        params.append(query.limit)
    return sql, params


def insert(placeholder: str) -> str:
    """``INSERT`` of one row in :data:`INSERT_COLUMNS` order."""
    marks = ", ".join([placeholder] * 14)
    return f"INSERT INTO trtguard_decisions ({INSERT_COLUMNS}) VALUES ({marks})"  # noqa: S608 - fixed text
