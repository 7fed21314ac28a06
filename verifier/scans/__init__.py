"""SBOMs and vulnerability scans: the predicates trtguard reads, by predicate type, into one shape.

=====================================================  ===============================================
predicate type                                         what the predicate is
=====================================================  ===============================================
``https://cyclonedx.org/bom`` (and ``.../bom/v1.N``)   a CycloneDX JSON document (SBOM, scan, VEX)
``https://spdx.dev/Document`` (and ``.../v2.2|v2.3``)  an SPDX 2.2/2.3 JSON document (SBOM)
``https://cosign.sigstore.dev/attestation/vuln/v1``    cosign's vulnerability predicate around a Trivy,
                                                       pip-audit or CycloneDX result
=====================================================  ===============================================

The statement around them may be in-toto v1 or v0.1 (cosign still writes v0.1); the caller verifies it.
:func:`read_scan` reads the predicate into a :class:`~verifier.scans.model.ScanDocument`; docs/scans.md
describes the shape and what each format contributes to it.

The readers (and the document model) load with the first scan read: a check that meets no SBOM or scan does
not import them (start-up time, issue 15).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from verifier.base import InputError

if TYPE_CHECKING:
    from verifier.scans.model import (
        SEVERITY_ORDER,
        Component,
        ScanDocument,
        Vulnerability,
        canonical_id,
        component_from,
    )

__all__ = [
    "COSIGN_VULN_PREDICATE_TYPE",
    "CYCLONEDX_PREDICATE_TYPE",
    "SEVERITY_ORDER",
    "SPDX_PREDICATE_TYPE",
    "Component",
    "ScanDocument",
    "Vulnerability",
    "canonical_id",
    "component_from",
    "is_scan_predicate_type",
    "read_scan",
]

CYCLONEDX_PREDICATE_TYPE: Final = "https://cyclonedx.org/bom"
SPDX_PREDICATE_TYPE: Final = "https://spdx.dev/Document"
COSIGN_VULN_PREDICATE_TYPE: Final = "https://cosign.sigstore.dev/attestation/vuln/v1"

_CYCLONEDX: Final = re.compile(r"https://cyclonedx\.org/bom(/v1\.[0-9]+)?")
_SPDX: Final = re.compile(r"https://spdx\.dev/Document(/v2\.[23])?")
# cosign releases before 1.3 wrote the type without its scheme
_COSIGN_VULN: Final = frozenset({COSIGN_VULN_PREDICATE_TYPE, "cosign.sigstore.dev/attestation/vuln/v1"})


def is_scan_predicate_type(predicate_type: str) -> bool:
    """Whether :func:`read_scan` reads predicates of this type."""
    return bool(
        _CYCLONEDX.fullmatch(predicate_type)
        or _SPDX.fullmatch(predicate_type)
        or predicate_type in _COSIGN_VULN
    )


def read_scan(predicate_type: str, predicate: Mapping[str, Any], source: str) -> ScanDocument:
    """The predicate of a statement of ``predicate_type`` as a :class:`ScanDocument`.

    Raises :class:`~verifier.base.InputError` when the type is not one trtguard reads or the predicate is
    not a document of that type.
    """
    # The readers are imported here: see the module's docstring.
    if _CYCLONEDX.fullmatch(predicate_type):
        from verifier.scans.cyclonedx import read_cyclonedx  # noqa: PLC0415

        return read_cyclonedx(predicate, source)
    if _SPDX.fullmatch(predicate_type):
        from verifier.scans.spdx import read_spdx  # noqa: PLC0415

        return read_spdx(predicate, source)
    if predicate_type in _COSIGN_VULN:
        from verifier.scans.cosign import read_cosign_vuln  # noqa: PLC0415

        return read_cosign_vuln(predicate, source)
    raise InputError(
        f"trtguard reads no SBOM or scan of predicate type {predicate_type}",
        location=source,
        hint=f"use {CYCLONEDX_PREDICATE_TYPE}, {SPDX_PREDICATE_TYPE} or {COSIGN_VULN_PREDICATE_TYPE}",
    )


_MODEL_NAMES: Final = frozenset(
    {"SEVERITY_ORDER", "Component", "ScanDocument", "Vulnerability", "canonical_id", "component_from"}
)


def __getattr__(name: str) -> Any:
    if name in _MODEL_NAMES:  # re-exported, loaded on first use
        from verifier.scans import model  # noqa: PLC0415

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
