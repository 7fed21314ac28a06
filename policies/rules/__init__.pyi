from ._change_control import CHANGE_CONTROL as CHANGE_CONTROL, CHANGE_CONTROL_KEPT as CHANGE_CONTROL_KEPT
from ._expressions import EXPRESSIONS as EXPRESSIONS
from ._findings import (
    EngineFamily as EngineFamily,
    Findings as Findings,
    ImageFamily as ImageFamily,
    RuleTable as RuleTable,
    WorkloadFamily as WorkloadFamily,
    unavailable as unavailable,
    violation as violation,
)
from ._gpu import GPU_COMPATIBILITY as GPU_COMPATIBILITY
from ._images import IMAGES as IMAGES
from ._manifest import BUILD_MANIFEST as BUILD_MANIFEST
from ._model import MODEL_RULES as MODEL_RULES
from ._requester import REQUESTER as REQUESTER
from ._toolchain import TOOLCHAIN as TOOLCHAIN
from ._verification import VERIFICATION as VERIFICATION
