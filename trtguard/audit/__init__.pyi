from ._chain import ChainCheck as ChainCheck, check_chain as check_chain, follows as follows
from ._history import (
    HistoryEntry as HistoryEntry,
    ManifestComparison as ManifestComparison,
    compare_manifests as compare_manifests,
    history_json as history_json,
    last_carried as last_carried,
    not_delivered as not_delivered,
    not_delivered_json as not_delivered_json,
    recorded_objects as recorded_objects,
    replay as replay,
    signer_names as signer_names,
    workload_carried as workload_carried,
    workload_records as workload_records,
)
