"""Everything that checks an artifact against a claim.

OCI references and registries, cosign-compatible keys and signatures, DSSE/in-toto attestations, engine
build manifests and TensorRT engine files. This package knows nothing about admission.

The front door of the modules directly in ``verifier/`` (lazy: a name loads its module on first use), so far
the choice of evidence a command line makes (:func:`evidence_source`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifier.evidence_choice import evidence_source

#: Where each public name lives.
_HOMES: dict[str, str] = {
    "evidence_source": "verifier.evidence_choice",
}

__all__ = [
    "evidence_source",
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
