from ._archive import (
    archive_segments as archive_segments,
    verify_archive as verify_archive,
    verify_segment as verify_segment,
)
from ._backup import backup_sqlite as backup_sqlite
from ._body_json import (
    canonical_of as canonical_of,
    duplicate_key as duplicate_key,
    load_json as load_json,
    stored_exact as stored_exact,
)
from ._carried import (
    KEPT as KEPT,
    MAX_MODELS as MAX_MODELS,
    Carried as Carried,
    CarriedAdmission as CarriedAdmission,
    carried_engines as carried_engines,
    confirmed_engines as confirmed_engines,
    model_key as model_key,
)
from ._chain import Break as Break, ChainReport as ChainReport, ChainSink as ChainSink, DataSink as DataSink
from ._checkpoints import (
    Checkpoint as Checkpoint,
    read_checkpoint_file as read_checkpoint_file,
    write_checkpoint_file as write_checkpoint_file,
)
from ._errors import DecisionLogError as DecisionLogError, DecisionLogUnavailable as DecisionLogUnavailable
from ._open import open_store as open_store
from ._postgres import PostgresOptions as PostgresOptions, PostgresStore as PostgresStore
from ._record import (
    GENESIS_HASH as GENESIS_HASH,
    DecisionRecord as DecisionRecord,
    StoredRecord as StoredRecord,
    canonical_json as canonical_json,
    chain_hash as chain_hash,
    format_time as format_time,
    link_hash as link_hash,
)
from ._record_schema import decision_json_schema as decision_json_schema
from ._segments import Ledger as Ledger, SealedSegment as SealedSegment, carried_problems as carried_problems
from ._spool import SpoolingStore as SpoolingStore
from ._sqlite import SQLiteStore as SQLiteStore
from ._store import (
    AppendReceipt as AppendReceipt,
    DecisionStore as DecisionStore,
    RecordQuery as RecordQuery,
    redact as redact,
)
from ._stored import engines_left_out as engines_left_out
from ._undelivered import original_id as original_id
