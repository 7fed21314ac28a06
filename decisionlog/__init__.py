"""The append-only, hash-chained decision log: SQLite by default, PostgreSQL for several replicas.

Every admission decision is written here before the answer leaves the webhook. ``open_store(url)`` gives a
:class:`DecisionStore`; ``trtguard audit`` reads and verifies it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decisionlog._archive import archive_segments, verify_archive, verify_segment
    from decisionlog._backup import backup_sqlite
    from decisionlog._carried import (
        KEPT,
        MAX_MODELS,
        Carried,
        CarriedAdmission,
        carried_engines,
        confirmed_engines,
        model_key,
    )
    from decisionlog._chain import Break, ChainReport, ChainSink, canonical_of, load_json
    from decisionlog._checkpoints import Checkpoint, read_checkpoint_file, write_checkpoint_file
    from decisionlog._errors import DecisionLogError, DecisionLogUnavailable
    from decisionlog._open import open_store
    from decisionlog._postgres import PostgresOptions, PostgresStore
    from decisionlog._record import (
        GENESIS_HASH,
        DecisionRecord,
        StoredRecord,
        canonical_json,
        chain_hash,
        format_time,
        link_hash,
    )
    from decisionlog._record_schema import decision_json_schema
    from decisionlog._segments import Ledger, SealedSegment, carried_problems
    from decisionlog._spool import SpoolingStore
    from decisionlog._sqlite import SQLiteStore
    from decisionlog._store import AppendReceipt, DecisionStore, RecordQuery, redact
    from decisionlog._stored import engines_left_out
    from decisionlog._undelivered import original_id

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("archive_segments", "verify_archive", "verify_segment"), "decisionlog._archive"),
    "backup_sqlite": "decisionlog._backup",
    **dict.fromkeys(
        (
            "KEPT",
            "MAX_MODELS",
            "Carried",
            "CarriedAdmission",
            "carried_engines",
            "confirmed_engines",
            "model_key",
        ),
        "decisionlog._carried",
    ),
    **dict.fromkeys(("Break", "ChainReport", "ChainSink", "canonical_of", "load_json"), "decisionlog._chain"),
    **dict.fromkeys(
        ("Checkpoint", "read_checkpoint_file", "write_checkpoint_file"), "decisionlog._checkpoints"
    ),
    **dict.fromkeys(("DecisionLogError", "DecisionLogUnavailable"), "decisionlog._errors"),
    "open_store": "decisionlog._open",
    **dict.fromkeys(("PostgresOptions", "PostgresStore"), "decisionlog._postgres"),
    **dict.fromkeys(
        (
            "GENESIS_HASH",
            "DecisionRecord",
            "StoredRecord",
            "canonical_json",
            "chain_hash",
            "format_time",
            "link_hash",
        ),
        "decisionlog._record",
    ),
    "decision_json_schema": "decisionlog._record_schema",
    **dict.fromkeys(("Ledger", "SealedSegment", "carried_problems"), "decisionlog._segments"),
    "SpoolingStore": "decisionlog._spool",
    "SQLiteStore": "decisionlog._sqlite",
    "engines_left_out": "decisionlog._stored",
    **dict.fromkeys(("AppendReceipt", "DecisionStore", "RecordQuery", "redact"), "decisionlog._store"),
    "original_id": "decisionlog._undelivered",
}

__all__ = [
    "GENESIS_HASH",
    "KEPT",
    "MAX_MODELS",
    "AppendReceipt",
    "Break",
    "Carried",
    "CarriedAdmission",
    "ChainReport",
    "ChainSink",
    "Checkpoint",
    "DecisionLogError",
    "DecisionLogUnavailable",
    "DecisionRecord",
    "DecisionStore",
    "Ledger",
    "PostgresOptions",
    "PostgresStore",
    "RecordQuery",
    "SQLiteStore",
    "SealedSegment",
    "SpoolingStore",
    "StoredRecord",
    "archive_segments",
    "backup_sqlite",
    "canonical_json",
    "canonical_of",
    "carried_engines",
    "carried_problems",
    "chain_hash",
    "confirmed_engines",
    "decision_json_schema",
    "engines_left_out",
    "format_time",
    "link_hash",
    "load_json",
    "model_key",
    "open_store",
    "original_id",
    "read_checkpoint_file",
    "redact",
    "verify_archive",
    "verify_segment",
    "write_checkpoint_file",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
