"""The policy rules, one module per rule family, each exposing one rule of the rule contract
(:mod:`policies.rules._findings`); :mod:`policies.evaluator` applies them from one ordered table.

- :mod:`~policies.rules._requester`: ``spec.requester`` (who may deploy), a workload rule;
- :mod:`~policies.rules._images`: ``spec.images`` (allowed images, ``requireDigest``, ``digests``,
  ``signatures``, ``attestations`` with :mod:`~policies.rules._attestations`), an image rule;
- :mod:`~policies.rules._manifest`: ``models.buildManifest`` (the signed build manifest, ``maxAge``, signed
  inputs), the first engine rule: the ones over the manifest read the manifest it verified;
- :mod:`~policies.rules._model`: ``models.rules`` ``precisions``, ``int8RequiresCalibration``,
  ``minAccuracy``, ``pluginsAllowed``;
- :mod:`~policies.rules._expressions`: ``models.rules.expressions`` (CEL);
- :mod:`~policies.rules._toolchain`: ``models.rules.toolchain`` (``allowed``, ``sameAsRuntimeImage``);
- :mod:`~policies.rules._gpu`: ``models.rules.gpuCompatibility``;
- :mod:`~policies.rules._change_control`: ``spec.changeControl`` (baselines, gated changes, approvals), and
  the
  confirmation of the engines an UPDATE kept, a workload rule run once the engines are judged;
- :mod:`~policies.rules._verification`: ``models.verification`` (GPU verification attestations).

:mod:`~policies.rules._findings` says how violations are worded and what a rule is; the state of one
evaluation, and the subjects rules judge, are :mod:`policies.evaluation`'s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.rules._change_control import CHANGE_CONTROL, CHANGE_CONTROL_KEPT
    from policies.rules._expressions import EXPRESSIONS
    from policies.rules._findings import (
        EngineFamily,
        Findings,
        ImageFamily,
        RuleTable,
        WorkloadFamily,
        unavailable,
        violation,
    )
    from policies.rules._gpu import GPU_COMPATIBILITY
    from policies.rules._images import IMAGES
    from policies.rules._manifest import BUILD_MANIFEST
    from policies.rules._model import MODEL_RULES
    from policies.rules._requester import REQUESTER
    from policies.rules._toolchain import TOOLCHAIN
    from policies.rules._verification import VERIFICATION

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("CHANGE_CONTROL", "CHANGE_CONTROL_KEPT"), "policies.rules._change_control"),
    "EXPRESSIONS": "policies.rules._expressions",
    **dict.fromkeys(
        (
            "EngineFamily",
            "Findings",
            "ImageFamily",
            "RuleTable",
            "WorkloadFamily",
            "unavailable",
            "violation",
        ),
        "policies.rules._findings",
    ),
    "GPU_COMPATIBILITY": "policies.rules._gpu",
    "IMAGES": "policies.rules._images",
    "BUILD_MANIFEST": "policies.rules._manifest",
    "MODEL_RULES": "policies.rules._model",
    "REQUESTER": "policies.rules._requester",
    "TOOLCHAIN": "policies.rules._toolchain",
    "VERIFICATION": "policies.rules._verification",
}

__all__ = [
    "BUILD_MANIFEST",
    "CHANGE_CONTROL",
    "CHANGE_CONTROL_KEPT",
    "EXPRESSIONS",
    "GPU_COMPATIBILITY",
    "IMAGES",
    "MODEL_RULES",
    "REQUESTER",
    "TOOLCHAIN",
    "VERIFICATION",
    "EngineFamily",
    "Findings",
    "ImageFamily",
    "RuleTable",
    "WorkloadFamily",
    "unavailable",
    "violation",
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
