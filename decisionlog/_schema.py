"""Schema migrations shared by the SQLite and PostgreSQL stores.

Both dialects get the same tables and columns; only trigger syntax differs. A migration is applied once, in a
transaction, and recorded in ``trtguard_schema_migrations``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from decisionlog._errors import DecisionLogError
from policies.identity import MOVED_TO_APPS

Dialect = Literal["sqlite", "postgresql"]

SELECT_VERSION: Final = "SELECT COALESCE(MAX(version), 0) FROM trtguard_schema_migrations"
INSERT_VERSION: Final = (
    "INSERT INTO trtguard_schema_migrations (version, description, applied_at) VALUES ({p}, {p}, {p})"
)

CREATE_MIGRATIONS_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS trtguard_schema_migrations ("
    " version INTEGER PRIMARY KEY,"
    " description TEXT NOT NULL,"
    " applied_at TEXT NOT NULL)"
)


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step, written out for each dialect."""

    version: int
    description: str
    sqlite: tuple[str, ...]
    postgresql: tuple[str, ...]

    def statements(self, dialect: Dialect) -> tuple[str, ...]:
        """The SQL statements of this step for ``dialect``."""
        return self.sqlite if dialect == "sqlite" else self.postgresql


_DECISIONS = (
    "CREATE TABLE trtguard_decisions ("
    " seq BIGINT PRIMARY KEY,"
    " record_id TEXT NOT NULL UNIQUE,"
    " time TEXT NOT NULL,"
    " uid TEXT NOT NULL,"
    " operation TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " namespace TEXT,"
    " name TEXT,"
    " allowed BOOLEAN NOT NULL,"
    " dry_run BOOLEAN NOT NULL,"
    " policy_revision TEXT,"
    " body TEXT NOT NULL,"
    " prev_hash TEXT NOT NULL,"
    " hash TEXT NOT NULL UNIQUE)"
)
_INDEXES = (
    "CREATE INDEX trtguard_decisions_workload ON trtguard_decisions (namespace, name, seq)",
    "CREATE INDEX trtguard_decisions_uid ON trtguard_decisions (uid)",
    "CREATE INDEX trtguard_decisions_time ON trtguard_decisions (time)",
)
_SQLITE_NO_UPDATE: Final = (
    "CREATE TRIGGER trtguard_decisions_no_update BEFORE UPDATE ON trtguard_decisions"
    " BEGIN SELECT RAISE(ABORT, 'trtguard_decisions is append-only'); END"
)
#: PostgreSQL's append-only trigger once pruning exists (deletions are guarded row by row).
_PG_APPEND_ONLY: Final = (
    "CREATE TRIGGER trtguard_decisions_append_only BEFORE UPDATE OR TRUNCATE"
    " ON trtguard_decisions FOR EACH STATEMENT EXECUTE FUNCTION trtguard_append_only()"
)
# One row that every writer locks: it serialises appends from several replicas into one chain.
_HEAD = (
    "CREATE TABLE trtguard_chain_head ("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " seq BIGINT NOT NULL,"
    " hash TEXT NOT NULL)",
    # The genesis prev_hash (GENESIS_HASH): 64 zeros.
    "INSERT INTO trtguard_chain_head (id, seq, hash)"
    " VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000')",
)

_VERSION_1: Final = (
    Migration(
        version=1,
        description="decisions, chain head, append-only triggers",
        sqlite=(
            _DECISIONS,
            *_INDEXES,
            *_HEAD,
            _SQLITE_NO_UPDATE,
            "CREATE TRIGGER trtguard_decisions_no_delete BEFORE DELETE ON trtguard_decisions"
            " BEGIN SELECT RAISE(ABORT, 'trtguard_decisions is append-only'); END",
        ),
        postgresql=(
            _DECISIONS,
            *_INDEXES,
            *_HEAD,
            "CREATE FUNCTION trtguard_append_only() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'trtguard_decisions is append-only'; END $$",
            "CREATE TRIGGER trtguard_decisions_append_only BEFORE UPDATE OR DELETE OR TRUNCATE"
            " ON trtguard_decisions FOR EACH STATEMENT EXECUTE FUNCTION trtguard_append_only()",
        ),
    ),
)

# Sealed segments (decisionlog/_segments.py): one row per signed checkpoint. Records may be deleted
# only up to the last checkpoint whose segment was archived (``archive_sha256`` set): the controlled path of
# `trtguard audit prune`. A checkpoint row is never deleted; its statement and signature never change; its
# archive is recorded once, and ``pruned`` only ever turns true.
_CHECKPOINTS = (
    "CREATE TABLE trtguard_checkpoints ("
    " last_seq BIGINT PRIMARY KEY,"
    " statement TEXT NOT NULL,"
    " signature TEXT NOT NULL,"
    " archive TEXT,"
    " archive_sha256 TEXT,"
    " pruned BOOLEAN NOT NULL DEFAULT FALSE)"
)
# Parts shared between records (``_sql.SHARED_KEYS``), by the first 128 bits of their SHA-256. Never deleted:
# they grow with the distinct evidence, not with the decisions (docs/decision-log-storage.md).
_SHARED = (
    "CREATE TABLE trtguard_shared (ref TEXT PRIMARY KEY, content TEXT NOT NULL)",
    "ALTER TABLE trtguard_decisions ADD COLUMN shared_ref TEXT",
)
_ARCHIVED_THROUGH = (
    "(SELECT COALESCE(MAX(last_seq), 0) FROM trtguard_checkpoints WHERE archive_sha256 IS NOT NULL)"
)
_CHECKPOINT_CHANGED = (
    "NEW.last_seq <> OLD.last_seq OR NEW.statement <> OLD.statement OR NEW.signature <> OLD.signature"
    " OR (OLD.archive_sha256 IS NOT NULL AND (NEW.archive IS DISTINCT FROM OLD.archive"
    " OR NEW.archive_sha256 IS DISTINCT FROM OLD.archive_sha256))"
    " OR (OLD.pruned AND NOT NEW.pruned)"
)

#: Change control's "last admitted engine" pages through a workload's records by decision time
#: (spool-shipped records land late): without it every page sorts all of the workload's records.
_WORKLOAD_BY_TIME: Final = (
    "CREATE INDEX trtguard_decisions_workload_time ON trtguard_decisions (namespace, name, time, seq)"
)

_MIGRATIONS_2: Final = (
    *_VERSION_1,
    Migration(
        version=2,
        description=(
            "shared record parts; workloads by decision time; sealed segments: signed checkpoints;"
            " pruning of archived segments"
        ),
        sqlite=(
            *_SHARED,
            _WORKLOAD_BY_TIME,
            "CREATE TRIGGER trtguard_shared_no_update BEFORE UPDATE ON trtguard_shared"
            " BEGIN SELECT RAISE(ABORT, 'trtguard_shared is append-only'); END",
            "CREATE TRIGGER trtguard_shared_no_delete BEFORE DELETE ON trtguard_shared"
            " BEGIN SELECT RAISE(ABORT, 'trtguard_shared is append-only'); END",
            _CHECKPOINTS,
            "DROP TRIGGER trtguard_decisions_no_delete",
            "CREATE TRIGGER trtguard_decisions_no_delete BEFORE DELETE ON trtguard_decisions"
            f" WHEN OLD.seq > {_ARCHIVED_THROUGH}"
            " BEGIN SELECT RAISE(ABORT, 'trtguard_decisions is append-only: only records of archived sealed"
            " segments can be pruned (trtguard audit prune)'); END",
            "CREATE TRIGGER trtguard_checkpoints_no_delete BEFORE DELETE ON trtguard_checkpoints"
            " BEGIN SELECT RAISE(ABORT, 'trtguard_checkpoints is append-only'); END",
            "CREATE TRIGGER trtguard_checkpoints_no_update BEFORE UPDATE ON trtguard_checkpoints"
            # SQLite spells IS DISTINCT FROM as IS NOT.
            f" WHEN {_CHECKPOINT_CHANGED.replace('IS DISTINCT FROM', 'IS NOT')}"
            " BEGIN SELECT RAISE(ABORT, 'trtguard_checkpoints is append-only'); END",
        ),
        postgresql=(
            *_SHARED,
            _WORKLOAD_BY_TIME,
            "CREATE FUNCTION trtguard_shared_append_only() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'trtguard_shared is append-only'; END $$",
            "CREATE TRIGGER trtguard_shared_append_only BEFORE UPDATE OR DELETE OR TRUNCATE"
            " ON trtguard_shared FOR EACH STATEMENT EXECUTE FUNCTION trtguard_shared_append_only()",
            _CHECKPOINTS,
            "DROP TRIGGER trtguard_decisions_append_only ON trtguard_decisions",
            _PG_APPEND_ONLY,
            "CREATE FUNCTION trtguard_prune_archived_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF OLD.seq > {_ARCHIVED_THROUGH} THEN RAISE EXCEPTION"
            " 'trtguard_decisions is append-only: only records of archived sealed segments can be pruned"
            " (trtguard audit prune)'; END IF; RETURN OLD; END $$",
            "CREATE TRIGGER trtguard_decisions_prune_archived_only BEFORE DELETE ON trtguard_decisions"
            " FOR EACH ROW EXECUTE FUNCTION trtguard_prune_archived_only()",
            "CREATE FUNCTION trtguard_checkpoints_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF TG_OP <> 'UPDATE' THEN RAISE EXCEPTION 'trtguard_checkpoints is append-only'; END IF;"
            f" IF {_CHECKPOINT_CHANGED} THEN"
            " RAISE EXCEPTION 'trtguard_checkpoints is append-only'; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER trtguard_checkpoints_guard BEFORE UPDATE OR DELETE ON trtguard_checkpoints"
            " FOR EACH ROW EXECUTE FUNCTION trtguard_checkpoints_guard()",
            "CREATE TRIGGER trtguard_checkpoints_no_truncate BEFORE TRUNCATE ON trtguard_checkpoints"
            " FOR EACH STATEMENT EXECUTE FUNCTION trtguard_checkpoints_guard()",
        ),
    ),
)

# What rotation carries forward (decisionlog/_carried.py): for each checkpoint, the workloads whose
# last admissions its segment changed (``content`` NULL: the workload has no entry from there on); the state
# at a checkpoint is each workload's newest row at or before it. ``trtguard_carried_checkpoints`` names the
# checkpoints whose state is stored. A row belongs to a checkpoint; none is ever changed; a row may be deleted
# only once a newer row of the same workload at or before the newest pruned checkpoint replaces it (pruning's
# clean-up), so no state a lookup can reach is dropped. Checkpoints marked are never unmarked.
_CARRIED = (
    "CREATE TABLE trtguard_carried ("
    " namespace TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " through_seq BIGINT NOT NULL,"
    " content TEXT,"
    " PRIMARY KEY (namespace, kind, name, through_seq))",
    "CREATE TABLE trtguard_carried_checkpoints (last_seq BIGINT PRIMARY KEY)",
)
_PRUNED_THROUGH = "(SELECT COALESCE(MAX(last_seq), 0) FROM trtguard_checkpoints WHERE pruned)"
_NOT_A_CHECKPOINT = "NOT EXISTS (SELECT 1 FROM trtguard_checkpoints WHERE last_seq = NEW.{column})"
_NOT_SUPERSEDED = (
    "NOT EXISTS (SELECT 1 FROM trtguard_carried n WHERE n.namespace = OLD.namespace AND n.kind = OLD.kind"  # noqa: S608
    f" AND n.name = OLD.name AND n.through_seq > OLD.through_seq AND n.through_seq <= {_PRUNED_THROUGH})"
)
_CARRIED_APPEND_ONLY = "trtguard_carried is append-only: rows are replaced only by pruning"

_VERSION_3: Final = Migration(
    version=3,
    description="carried state of change control: each workload's last admissions, per sealed checkpoint",
    sqlite=(
        *_CARRIED,
        "CREATE TRIGGER trtguard_carried_no_update BEFORE UPDATE ON trtguard_carried"
        f" BEGIN SELECT RAISE(ABORT, '{_CARRIED_APPEND_ONLY}'); END",
        "CREATE TRIGGER trtguard_carried_checkpoint BEFORE INSERT ON trtguard_carried"
        f" WHEN {_NOT_A_CHECKPOINT.format(column='through_seq')}"
        " BEGIN SELECT RAISE(ABORT, 'a carried row belongs to a stored checkpoint'); END",
        "CREATE TRIGGER trtguard_carried_no_delete BEFORE DELETE ON trtguard_carried"
        f" WHEN {_NOT_SUPERSEDED}"
        f" BEGIN SELECT RAISE(ABORT, '{_CARRIED_APPEND_ONLY}'); END",
        "CREATE TRIGGER trtguard_carried_checkpoints_known BEFORE INSERT ON trtguard_carried_checkpoints"
        f" WHEN {_NOT_A_CHECKPOINT.format(column='last_seq')}"
        " BEGIN SELECT RAISE(ABORT, 'a carried row belongs to a stored checkpoint'); END",
        "CREATE TRIGGER trtguard_carried_checkpoints_no_update BEFORE UPDATE ON trtguard_carried_checkpoints"
        " BEGIN SELECT RAISE(ABORT, 'trtguard_carried_checkpoints is append-only'); END",
        "CREATE TRIGGER trtguard_carried_checkpoints_no_delete BEFORE DELETE ON trtguard_carried_checkpoints"
        " BEGIN SELECT RAISE(ABORT, 'trtguard_carried_checkpoints is append-only'); END",
    ),
    postgresql=(
        *_CARRIED,
        "CREATE FUNCTION trtguard_carried_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF TG_OP = 'INSERT' THEN"
        f" IF {_NOT_A_CHECKPOINT.format(column='through_seq')} THEN"
        " RAISE EXCEPTION 'a carried row belongs to a stored checkpoint'; END IF; RETURN NEW; END IF;"
        f" IF TG_OP = 'DELETE' AND NOT {_NOT_SUPERSEDED} THEN RETURN OLD; END IF;"
        f" RAISE EXCEPTION '{_CARRIED_APPEND_ONLY}'; END $$",
        "CREATE TRIGGER trtguard_carried_guard BEFORE INSERT OR UPDATE OR DELETE ON trtguard_carried"
        " FOR EACH ROW EXECUTE FUNCTION trtguard_carried_guard()",
        "CREATE TRIGGER trtguard_carried_no_truncate BEFORE TRUNCATE ON trtguard_carried"
        " FOR EACH STATEMENT EXECUTE FUNCTION trtguard_carried_guard()",
        "CREATE FUNCTION trtguard_carried_checkpoints_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF TG_OP = 'INSERT' AND NOT {_NOT_A_CHECKPOINT.format(column='last_seq')} THEN RETURN NEW; END IF;"
        " RAISE EXCEPTION 'trtguard_carried_checkpoints is append-only, for stored checkpoints'; END $$",
        "CREATE TRIGGER trtguard_carried_checkpoints_guard BEFORE INSERT OR UPDATE OR DELETE"
        " ON trtguard_carried_checkpoints FOR EACH ROW EXECUTE FUNCTION trtguard_carried_checkpoints_guard()",
        "CREATE TRIGGER trtguard_carried_checkpoints_no_truncate BEFORE TRUNCATE"
        " ON trtguard_carried_checkpoints FOR EACH STATEMENT"
        " EXECUTE FUNCTION trtguard_carried_checkpoints_guard()",
    ),
)


# Workloads are identified by API group, kind, namespace and name (policies.identity): a Volcano Job is not
# a batch/v1 Job. ``api_group`` is derived from each record's ``api_version`` and ``kind`` (the chain check
# holds it to the body); records written before get theirs here, from their bodies: the part of
# ``api_version`` before its last ``/`` (nothing without one), ``apps`` for the kinds ``extensions`` served.
# A row without one is never stored: PostgreSQL derives it for a replica of an older trtguard still writing
# during a rolling upgrade, SQLite (one writer, the chart recreates it) refuses the row. The carried state
# was keyed by (namespace, kind, name): it is dropped with the marks of the checkpoints it was stored for,
# and rebuilt from the records by the next `audit seal` (docs/decision-log-storage.md, "Upgrading").
def _api_group(dialect: Dialect, body: str, kind: str) -> str:
    """The SQL expression of a record's ``api_group`` from its stored ``body`` and ``kind`` columns."""
    if dialect == "sqlite":
        version = f"json_extract({body}, '$.api_version')"
        through_slash = f"rtrim({version}, replace({version}, '/', ''))"  # up to and including the last '/'
        group = f"substr({through_slash}, 1, length({through_slash}) - 1)"
    else:
        group = f"COALESCE(substring(({body}::json ->> 'api_version') from '^(.*)/'), '')"
    moved = ", ".join(f"'{name}'" for name in sorted(MOVED_TO_APPS))
    return f"CASE WHEN ({group}) = 'extensions' AND {kind} IN ({moved}) THEN 'apps' ELSE ({group}) END"


_WORKLOAD_BY_IDENTITY: Final = (
    "DROP INDEX trtguard_decisions_workload_time",
    "CREATE INDEX trtguard_decisions_workload_time"
    " ON trtguard_decisions (namespace, name, kind, api_group, time, seq)",
)
_CARRIED_4 = (
    "DROP TABLE trtguard_carried",
    "DROP TABLE trtguard_carried_checkpoints",
    "CREATE TABLE trtguard_carried ("
    " namespace TEXT NOT NULL,"
    " api_group TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " through_seq BIGINT NOT NULL,"
    " content TEXT,"
    " PRIMARY KEY (namespace, api_group, kind, name, through_seq))",
    _CARRIED[1],
)


def _carried_triggers(dialect: Dialect) -> tuple[str, ...]:
    """Migration 3's triggers on the tables of migration 4 (``api_group`` in the key)."""
    supersede = _NOT_SUPERSEDED.replace(
        "n.kind = OLD.kind", "n.api_group = OLD.api_group AND n.kind = OLD.kind"
    )
    return tuple(
        statement.replace(_NOT_SUPERSEDED, supersede).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
        for statement in _VERSION_3.statements(dialect)[len(_CARRIED) :]
    )


_VERSION_4: Final = Migration(
    version=4,
    description="workloads by API group: api_group of each record; carried state by API group, rebuilt",
    sqlite=(
        "ALTER TABLE trtguard_decisions ADD COLUMN api_group TEXT",
        "DROP TRIGGER trtguard_decisions_no_update",
        f"UPDATE trtguard_decisions SET api_group = {_api_group('sqlite', 'body', 'kind')}",  # noqa: S608 - fixed text
        _SQLITE_NO_UPDATE,
        "CREATE TRIGGER trtguard_decisions_api_group BEFORE INSERT ON trtguard_decisions"
        " WHEN NEW.api_group IS NULL BEGIN SELECT RAISE(ABORT, 'a record needs its api_group: it was written"
        " by a trtguard older than the schema of this decision log (4); upgrade it'); END",
        *_WORKLOAD_BY_IDENTITY,
        *_CARRIED_4,
        *_carried_triggers("sqlite"),
    ),
    postgresql=(
        "ALTER TABLE trtguard_decisions ADD COLUMN api_group TEXT",
        "DROP TRIGGER trtguard_decisions_append_only ON trtguard_decisions",
        f"UPDATE trtguard_decisions SET api_group = {_api_group('postgresql', 'body', 'kind')}",  # noqa: S608
        _PG_APPEND_ONLY,
        "ALTER TABLE trtguard_decisions ALTER COLUMN api_group SET NOT NULL",
        "CREATE FUNCTION trtguard_decisions_api_group() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF NEW.api_group IS NULL THEN NEW.api_group := {_api_group('postgresql', 'NEW.body', 'NEW.kind')};"
        " END IF; RETURN NEW; END $$",
        "CREATE TRIGGER trtguard_decisions_api_group BEFORE INSERT ON trtguard_decisions"
        " FOR EACH ROW EXECUTE FUNCTION trtguard_decisions_api_group()",
        *_WORKLOAD_BY_IDENTITY,
        *_CARRIED_4,
        *_carried_triggers("postgresql"),
    ),
)

# No table changes: the version keeps an older trtguard from writing or rotating a log whose records name the
# change-control policies that confirmed each engine (``confirmed_by``). Its fold would carry those records
# without them, as legacy admissions that count for every policy (docs/decision-log-storage.md, Upgrading).
_VERSION_5: Final = Migration(
    version=5,
    description="engines name the change-control policies that confirmed them; the carried state keeps them",
    sqlite=(),
    postgresql=(),
)

# No table changes: the version keeps an older trtguard from writing or rotating a log whose engines name
# their ONNX model (``model``). Its fold would keep only each policy's newest admissions, not the last of
# each model, and sign another state than this version's (docs/decision-log-storage.md, Upgrading).
_VERSION_6: Final = Migration(
    version=6,
    description="engines name their ONNX model; the carried state keeps each policy's last build of each",
    sqlite=(),
    postgresql=(),
)

# No table changes: the version keeps an older trtguard from writing or rotating a log whose engines name
# each confirming policy's own model and manifest (``confirmed``). Its fold would keep each policy's builds
# by the one ``model`` the first policy judged, and sign another state than this version's
# (docs/decision-log-storage.md, Upgrading).
_VERSION_7: Final = Migration(
    version=7,
    description="engines name each confirming policy's model and manifest; the carried state keeps them",
    sqlite=(),
    postgresql=(),
)

# Version 1's look-up of a workload's records (namespace, name, seq) has the prefix of version 4's (namespace,
# name, kind, api_group, time, seq): every reader that filters by namespace and name is served by the latter
# (sorting the rows of one workload by seq after), and every record written keeps one index less up to date
# (of the nine B-trees a commit of one record writes a page of). Dropping it is the whole step, on SQLite.
# PostgreSQL keeps it: DROP INDEX takes an ACCESS EXCLUSIVE lock on trtguard_decisions, which waits for every
# open reader (`audit verify` reads the table in one transaction) while every replica's INSERT queues behind
# it (attack 37a, beside a 20 s read: an older replica's writes failed for most of the 20 s, one in a
# deadlock). CONCURRENTLY cannot run in the migration's transaction, under its lock. The cost: each commit
# there keeps writing one B-tree page more.
_VERSION_8: Final = Migration(
    version=8,
    description="workloads looked up by identity and time only: SQLite drops the one by namespace, name, seq",
    sqlite=("DROP INDEX trtguard_decisions_workload",),
    postgresql=(),
)

MIGRATIONS: Final = (*_MIGRATIONS_2, _VERSION_3, _VERSION_4, _VERSION_5, _VERSION_6, _VERSION_7, _VERSION_8)

LATEST_VERSION: Final = MIGRATIONS[-1].version


#: Milliseconds a PostgreSQL migration's statements may take: one may rewrite every record (schema 4 fills in
#: api_group) or index them, far longer than a statement of the write path may take. They run once, under
#: the migration lock.
MIGRATION_TIMEOUT_MS: Final = 30 * 60 * 1000
#: Arbitrary constant naming trtguard's advisory lock for schema migrations on PostgreSQL.
MIGRATION_LOCK_KEY: Final = 0x7472_7467_7561_7264 & 0x7FFF_FFFF_FFFF_FFFF
#: Takes that lock inside a transaction: replicas and commands starting together must not race on CREATE.
PG_MIGRATION_LOCK: Final = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"


def steps(applied: int, dialect: Dialect, *, where: str) -> list[tuple[str, tuple[object, ...]]]:
    """What migrating a store of schema ``applied`` runs, in one transaction: each pending migration's
    statements and its row in ``trtguard_schema_migrations`` (statement, parameters; placeholders ``?``)."""
    found: list[tuple[str, tuple[object, ...]]] = []
    migrations = pending(applied, where=where)
    if migrations and dialect == "postgresql":
        found.append((f"SET LOCAL statement_timeout = {MIGRATION_TIMEOUT_MS}", ()))
    for migration in migrations:
        found += [(statement, ()) for statement in migration.statements(dialect)]
        found.append(
            (
                INSERT_VERSION.format(p="?"),
                (migration.version, migration.description, datetime.now(UTC).isoformat()),
            )
        )
    return found


def require_current(applied: int, *, where: str) -> None:
    """Raise unless the store's schema is this program's: what a reader that never migrates may read."""
    pending(applied, where=where)
    if applied < LATEST_VERSION:
        raise DecisionLogError(
            f"this decision log's schema (version {applied}) is older than this trtguard's "
            f"({LATEST_VERSION}), and a reader does not migrate it",
            location=where,
            hint="run `trtguard audit seal` (or start `trtguard serve`) of this version on it once: either "
            "migrates the schema (docs/decision-log-storage.md, Upgrading)",
        )


def pending(applied: int, *, where: str) -> tuple[Migration, ...]:
    """Migrations after version ``applied``; raises when the store is newer than this program."""
    if applied > LATEST_VERSION:
        raise DecisionLogError(
            f"decision log schema version {applied} is newer than this trtguard knows ({LATEST_VERSION})",
            location=where,
            hint="upgrade trtguard on every replica that writes to this decision log",
        )
    return tuple(m for m in MIGRATIONS if m.version > applied)
