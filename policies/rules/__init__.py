"""The policy rules, one module per rule family, each exposing one rule of the rule contract
(:mod:`policies.rules.findings`); :mod:`policies.evaluator` applies them from one ordered table.

- :mod:`~policies.rules.requester`: ``spec.requester`` (who may deploy), a workload rule;
- :mod:`~policies.rules.images`: ``spec.images`` (allowed images, ``requireDigest``, ``digests``,
  ``signatures``, ``attestations`` with :mod:`~policies.rules.attestations`), an image rule;
- :mod:`~policies.rules.manifest`: ``models.buildManifest`` (the signed build manifest, ``maxAge``, signed
  inputs), the first engine rule: the ones over the manifest read the manifest it verified;
- :mod:`~policies.rules.model`: ``models.rules`` ``precisions``, ``int8RequiresCalibration``,
  ``minAccuracy``, ``pluginsAllowed``;
- :mod:`~policies.rules.expressions`: ``models.rules.expressions`` (CEL);
- :mod:`~policies.rules.toolchain`: ``models.rules.toolchain`` (``allowed``, ``sameAsRuntimeImage``);
- :mod:`~policies.rules.gpu`: ``models.rules.gpuCompatibility``;
- :mod:`~policies.rules.change_control`: ``spec.changeControl`` (baselines, gated changes, approvals), and the
  confirmation of the engines an UPDATE kept, a workload rule run once the engines are judged;
- :mod:`~policies.rules.verification`: ``models.verification`` (GPU verification attestations).

:mod:`~policies.rules.findings` says how violations are worded and what a rule is; the state of one
evaluation, and the subjects rules judge, are :mod:`policies.evaluation`'s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.rules.change_control import CHANGE_CONTROL, CHANGE_CONTROL_KEPT
    from policies.rules.expressions import EXPRESSIONS
    from policies.rules.findings import (
        EngineFamily,
        Findings,
        ImageFamily,
        RuleTable,
        WorkloadFamily,
        unavailable,
        violation,
    )
    from policies.rules.gpu import GPU_COMPATIBILITY
    from policies.rules.images import IMAGES
    from policies.rules.manifest import BUILD_MANIFEST
    from policies.rules.model import MODEL_RULES
    from policies.rules.requester import REQUESTER
    from policies.rules.toolchain import TOOLCHAIN
    from policies.rules.verification import VERIFICATION

#: Where each public name lives.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("CHANGE_CONTROL", "CHANGE_CONTROL_KEPT"), "policies.rules.change_control"),
    "EXPRESSIONS": "policies.rules.expressions",
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
        "policies.rules.findings",
    ),
    "GPU_COMPATIBILITY": "policies.rules.gpu",
    "IMAGES": "policies.rules.images",
    "BUILD_MANIFEST": "policies.rules.manifest",
    "MODEL_RULES": "policies.rules.model",
    "REQUESTER": "policies.rules.requester",
    "TOOLCHAIN": "policies.rules.toolchain",
    "VERIFICATION": "policies.rules.verification",
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
