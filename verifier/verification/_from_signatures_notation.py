"""Names of ``verifier.signatures.notation`` (an eager door) for this room's stub (docs/ARCHITECTURE.md)."""

from verifier.signatures.notation import (
    NotationPolicy,
    NotationTrust,
    StoreType,
    load_certificates,
    load_notation_config,
    parse_identities,
)

__all__ = [
    "NotationPolicy",
    "NotationTrust",
    "StoreType",
    "load_certificates",
    "load_notation_config",
    "parse_identities",
]
