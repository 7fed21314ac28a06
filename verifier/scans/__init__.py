"""SBOMs and vulnerability scans: the predicates trtguard reads, by predicate type, into one shape.

=====================================================  ===============================================
predicate type family                                  what the predicate is
=====================================================  ===============================================
``https://cyclonedx.org/bom`` (and ``.../bom/vN.N``)   a CycloneDX JSON document (SBOM, scan, VEX)
``https://spdx.dev/Document`` (and ``.../vN.N``)       an SPDX 2.2/2.3 JSON document (SBOM)
``https://cosign.sigstore.dev/attestation/vuln/vN``    cosign's vulnerability predicate around a Trivy,
(and without its scheme, as cosign < 1.3 wrote it)     pip-audit or CycloneDX result
=====================================================  ===============================================

Each row is a *family*: a rule naming any member judges the documents of every member
(:func:`same_predicate_type`), so that a rule on ``https://cyclonedx.org/bom`` sees a document attested as
``.../bom/v1.5``, and a rule on ``.../bom/v1.4`` does not miss a newer ``v1.6`` document with findings. A
member trtguard cannot read (SPDX 3) is "cannot tell", never left out.

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
        MAX_COMPONENTS,
        SEVERITY_ORDER,
        Component,
        ScanDocument,
        Vulnerability,
        canonical_id,
        component_from,
        normal_text,
    )

__all__ = [
    "COSIGN_VULN_PREDICATE_TYPE",
    "CYCLONEDX_PREDICATE_TYPE",
    "MAX_COMPONENTS",
    "SEVERITY_ORDER",
    "SPDX_PREDICATE_TYPE",
    "Component",
    "ScanDocument",
    "Vulnerability",
    "canonical_id",
    "component_from",
    "is_scan_predicate_type",
    "normal_text",
    "read_scan",
    "same_predicate_type",
    "scan_family",
]

CYCLONEDX_PREDICATE_TYPE: Final = "https://cyclonedx.org/bom"
SPDX_PREDICATE_TYPE: Final = "https://spdx.dev/Document"
COSIGN_VULN_PREDICATE_TYPE: Final = "https://cosign.sigstore.dev/attestation/vuln/v1"

_VERSION: Final = r"(/v[0-9]+(\.[0-9]+)*)?"
# The families, each an explicit base and an optional "/vN[.N...]" (cosign's always has one; cosign releases
# before 1.3 wrote it without its scheme).
_FAMILIES: Final = (
    ("cyclonedx", re.compile(r"https://cyclonedx\.org/bom" + _VERSION)),
    ("spdx", re.compile(r"https://spdx\.dev/Document" + _VERSION)),
    ("cosign-vuln", re.compile(r"(https://)?cosign\.sigstore\.dev/attestation/vuln/v[0-9]+(\.[0-9]+)*")),
)


def scan_family(predicate_type: str) -> str | None:
    """The SBOM or scan family of a predicate type (``cyclonedx``, ``spdx``, ``cosign-vuln``), or None."""
    for name, pattern in _FAMILIES:
        if pattern.fullmatch(predicate_type):
            return name
    return None


def is_scan_predicate_type(predicate_type: str) -> bool:
    """Whether :func:`read_scan` reads predicates of this type (a member of an SBOM or scan family)."""
    return scan_family(predicate_type) is not None


def same_predicate_type(wanted: str, found: str) -> bool:
    """Whether a document attested as ``found`` counts for a rule on ``wanted``: the same type, or members
    of one SBOM or scan family (``https://cyclonedx.org/bom`` and ``.../bom/v1.6``)."""
    if wanted == found:
        return True
    family = scan_family(wanted)
    return family is not None and scan_family(found) == family


def read_scan(predicate_type: str, predicate: Mapping[str, Any], source: str) -> ScanDocument:
    """The predicate of a statement of ``predicate_type`` as a :class:`ScanDocument`.

    Raises :class:`~verifier.base.InputError` when the type is not one trtguard reads or the predicate is
    not a document of that type.
    """
    # The readers are imported here: see the module's docstring.
    family = scan_family(predicate_type)
    if family == "cyclonedx":
        from verifier.scans._cyclonedx import read_cyclonedx  # noqa: PLC0415

        return read_cyclonedx(predicate, source)
    if family == "spdx":
        from verifier.scans._spdx import read_spdx  # noqa: PLC0415

        return read_spdx(predicate, source)
    if family == "cosign-vuln":
        from verifier.scans._cosign import read_cosign_vuln  # noqa: PLC0415

        return read_cosign_vuln(predicate, source)
    raise InputError(
        f"trtguard reads no SBOM or scan of predicate type {predicate_type}",
        location=source,
        hint=f"use {CYCLONEDX_PREDICATE_TYPE}, {SPDX_PREDICATE_TYPE} or {COSIGN_VULN_PREDICATE_TYPE}",
    )


_MODEL_NAMES: Final = frozenset(
    {
        "MAX_COMPONENTS",
        "SEVERITY_ORDER",
        "Component",
        "ScanDocument",
        "Vulnerability",
        "canonical_id",
        "component_from",
        "normal_text",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MODEL_NAMES:  # re-exported, loaded on first use
        from verifier.scans import model  # noqa: PLC0415

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
