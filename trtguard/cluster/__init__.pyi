from ._api import (
    ClusterSettings as ClusterSettings,
    KubeApi as KubeApi,
    Listed as Listed,
    connect as connect,
    resource_path as resource_path,
)
from ._audit import (
    Audit as Audit,
    ListedKind as ListedKind,
    apply_reports as apply_reports,
    judge as judge,
    list_workloads as list_workloads,
    outcome as outcome,
    served_kinds as served_kinds,
)
from ._errors import ApiError as ApiError, AuditTimeout as AuditTimeout
