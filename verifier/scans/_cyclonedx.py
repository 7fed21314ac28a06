"""CycloneDX JSON (1.2-1.7): components, and vulnerabilities with their ratings, aliases and VEX analysis.

A strict subset of the specification, read with pydantic: the fields trtguard reads must have the types the
schema gives them (a version that is a number, a rating that is a string, is an error), and every other
field is ignored, as the specification's own extension points (``properties``, newer fields) require.
docs/scans.md says why this is not ``cyclonedx-python-lib``.

What a document is (its role): a vulnerability scan only when it says so. A CycloneDX document that reports
no finding, whether its ``vulnerabilities`` list is empty or absent, is an SBOM: Trivy writes
``"vulnerabilities": []`` into every CycloneDX SBOM it makes without looking for vulnerabilities, and
pip-audit leaves the key out of a clean scan, so nothing in the document tells a clean scan from an SBOM.
Such a document counts as a scan only inside a wrapper that says it is one (the cosign vulnerability
predicate, :mod:`verifier.scans._cosign`), and ``as_scan`` says so. A document that reports findings is a
scan, unless every finding carries a VEX ``analysis`` that clears it (``not_affected``, ``false_positive``,
``resolved``): then it is a VEX document, statements about known vulnerabilities and not a scan of every
component. A finding analysed as ``exploitable`` or ``in_triage`` (or with no state) is reported as a scan
reports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import Field

from verifier.base import InputError
from verifier.scans._cvss import base_score_v3
from verifier.scans._lenient_model import LenientModel
from verifier.scans._times import parse_time
from verifier.scans.model import (
    MAX_COMPONENTS,
    NOT_AFFECTED_STATES,
    Component,
    DocumentRole,
    Rating,
    ScanDocument,
    Vulnerability,
    check_component_count,
    component_from,
    cvss_severity,
    highest,
    images_about,
    severity_name,
    severity_unknowns,
)

__all__ = ["is_cyclonedx", "read_cyclonedx"]

_CVSS_VERSIONS = {"CVSSv2": 2, "CVSSv3": 3, "CVSSv31": 3, "CVSSv4": 4}
# Trivy names each package's type in a property; these it lists in a scan without looking them up (its
# detector: "supported for SBOM, not for vulnerability scanning"), so their absence of findings says nothing.
_TRIVY_PACKAGE_TYPE = "aquasecurity:trivy:PkgType"
_TRIVY_SBOM_ONLY_TYPES = frozenset({"conda-pkg", "conda-environment"})
# A vector names its CVSS version ("CVSS:3.1/AV:N/..."); a v2 vector has no prefix.
_VECTOR_VERSION = re.compile(r"CVSS:([34])\.[0-9]+/")
# Trivy names the image a document describes in metadata.component's properties too (repo@sha256:...).
_TRIVY_REPO_DIGEST = "aquasecurity:trivy:RepoDigest"


class _Property(LenientModel):
    name: str
    value: str | None = None


class _Component(LenientModel):
    name: str
    group: str | None = None
    version: str | None = None
    purl: str | None = None
    bom_ref: str | None = Field(default=None, alias="bom-ref")
    components: list[_Component] | None = None
    properties: list[_Property] | None = None


class _Source(LenientModel):
    name: str | None = None
    url: str | None = None


class _Rating(LenientModel):
    source: _Source | None = None
    score: float | None = None
    severity: str | None = None
    method: str | None = None
    vector: str | None = None


class _Reference(LenientModel):
    id: str
    source: _Source | None = None


class _Analysis(LenientModel):
    state: str | None = None


class _Affects(LenientModel):
    ref: str


class _Vulnerability(LenientModel):
    id: str | None = None
    bom_ref: str | None = Field(default=None, alias="bom-ref")
    source: _Source | None = None
    ratings: list[_Rating] | None = None
    references: list[_Reference] | None = None
    analysis: _Analysis | None = None
    affects: list[_Affects] | None = None


class _Metadata(LenientModel):
    timestamp: str | None = None
    component: _Component | None = None
    """What the document describes (an image, an application); the components nested in it are the
    document's too (CycloneDX allows an inventory there as well as in ``components``)."""


class _Bom(LenientModel):
    spec_version: str = Field(alias="specVersion")
    metadata: _Metadata | None = None
    components: list[_Component] | None = None
    vulnerabilities: list[_Vulnerability] | None = None


def is_cyclonedx(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` says it is a CycloneDX document (``bomFormat: CycloneDX``)."""
    return data.get("bomFormat") == "CycloneDX"


def read_cyclonedx(data: Mapping[str, Any], source: str, *, as_scan: bool = False) -> ScanDocument:
    """A CycloneDX JSON document (``bomFormat: CycloneDX``) as a :class:`ScanDocument`.

    ``as_scan``: a wrapper says the document is a vulnerability scan, so a missing ``vulnerabilities``
    key means none were found. Raises :class:`~verifier.base.InputError` for a document that is not
    CycloneDX or whose fields have the wrong types.
    """
    if not is_cyclonedx(data):
        raise InputError(
            f"not a CycloneDX document (bomFormat is {data.get('bomFormat')!r})",
            location=source,
            hint="attest the scanner's CycloneDX JSON output as the predicate",
        )
    check_component_count(_count_components(data), source)  # before validating: see MAX_COMPONENTS
    bom = _Bom.read(data, source, "the CycloneDX document")
    unknowns: list[str] = []
    scanned_at = parse_time(bom.metadata.timestamp if bom.metadata else None, "metadata.timestamp", unknowns)
    by_ref: dict[str, Component] = {}
    components: list[Component] = []
    skipped: list[tuple[str, str]] = []
    described = bom.metadata.component if bom.metadata else None
    if described is not None and described.bom_ref is not None:  # findings may name it: not a component
        by_ref[described.bom_ref] = component_from(
            described.name, described.version, described.purl, group=described.group
        )
    listed = [*(bom.components or []), *(described.components or [] if described else [])]
    for raw in _flatten(listed):
        component = component_from(raw.name, raw.version, raw.purl, group=raw.group)
        components.append(component)
        if raw.bom_ref is not None:
            by_ref[raw.bom_ref] = component
        kind = next((p.value for p in raw.properties or [] if p.name == _TRIVY_PACKAGE_TYPE), None)
        if kind in _TRIVY_SBOM_ONLY_TYPES:
            skipped.append((component.name, f"Trivy has no vulnerability data for {kind} packages"))
    if not components:
        unknowns.append("the document lists no component (an empty BOM audits nothing)")
    vulnerabilities: tuple[Vulnerability, ...] | None = None
    found = bom.vulnerabilities or []
    role = _role(found, as_scan=as_scan)
    if role == "sbom":
        unknowns.append(
            "the document reports no finding, so it is an SBOM: a clean scan cannot be told from one (Trivy "
            "writes an empty 'vulnerabilities' list into an SBOM, pip-audit none into a clean scan); attest "
            "scans in a cosign vulnerability predicate"
        )
    elif role == "scan" and not components:
        unknowns.append("the scan lists no component, so it audited nothing")
    elif role == "scan" and skipped:
        names = ", ".join(name for name, _ in skipped[:3]) + (
            f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        )
        unknowns.append(
            f"the scan lists {len(skipped)} package(s) of a type Trivy has no vulnerability data for, so "
            f"their vulnerabilities are unknown: {names}"
        )
    else:
        vulnerabilities = tuple(_vulnerability(v, by_ref, index) for index, v in enumerate(found))
        if role == "vex":
            unknowns.append(
                "every finding carries a VEX analysis that clears it: it is a VEX document, not a scan of "
                "every component"
            )
        unknowns += severity_unknowns(vulnerabilities)
    return ScanDocument(
        format="cyclonedx",
        scanned_at=scanned_at,
        components=tuple(components),
        vulnerabilities=vulnerabilities,
        skipped=tuple(skipped) if role == "scan" else (),
        unknowns=tuple(unknowns),
        role=role,
        about=_about(described),
    )


def _about(described: _Component | None) -> tuple[str, ...]:
    """The image digests ``metadata.component`` names (:func:`~verifier.scans.model.images_about`): its
    purl and ``bom-ref``, Trivy's RepoDigest property, and syft's ``name``/``version`` of a container."""
    if described is None:
        return ()
    named: list[object] = [p.value for p in described.properties or [] if p.name == _TRIVY_REPO_DIGEST]
    named += [described.purl, described.bom_ref, described.name, described.version]
    return images_about(named)


def _role(found: list[_Vulnerability], *, as_scan: bool) -> DocumentRole:
    """What the document is: see the module's docstring."""
    if as_scan:
        return "scan"
    if not found:
        return "sbom"
    # Only analyses that clear a finding make a VEX document: one saying a finding is exploitable, in
    # triage, or giving no state reports it as a scan does, and must not let an older scan be judged instead.
    cleared = all(v.analysis is not None and v.analysis.state in NOT_AFFECTED_STATES for v in found)
    return "vex" if cleared else "scan"


def _count_components(data: Mapping[str, Any]) -> int:
    """The components the raw document lists, nested ones and those of ``metadata.component`` included,
    counted up to just past :data:`MAX_COMPONENTS` (what is not a list or an object is left to validation)."""
    metadata = data.get("metadata")
    described = metadata.get("component") if isinstance(metadata, Mapping) else None
    pending = [
        data.get("components"),
        described.get("components") if isinstance(described, Mapping) else None,
    ]
    count = 0
    while pending:
        items = pending.pop()
        if not isinstance(items, list):
            continue
        count += len(items)
        if count > MAX_COMPONENTS:
            break
        pending += [item.get("components") for item in items if isinstance(item, Mapping)]
    return count


def _flatten(components: list[_Component]) -> Iterator[_Component]:
    for component in components:
        yield component
        yield from _flatten(component.components or [])


def _vulnerability(found: _Vulnerability, by_ref: Mapping[str, Component], index: int) -> Vulnerability:
    ratings = tuple(_rating(r) for r in found.ratings or [])
    names = [by_ref[a.ref].name for a in found.affects or [] if a.ref in by_ref]
    return Vulnerability(
        id=found.id or found.bom_ref or f"vulnerabilities[{index}]",
        aliases=tuple(r.id for r in found.references or []),
        ratings=ratings,
        state=found.analysis.state if found.analysis is not None else None,
        components=tuple(dict.fromkeys(names)),
    )


def _rating(found: _Rating) -> Rating:
    # The rating says the highest of its word and its score's band: a "low" with a CVSS score of 9.8 (Red Hat
    # writes its own severity beside NVD's score) is critical, as a "critical" with a score of 2.0 is.
    version = _CVSS_VERSIONS.get(found.method or "") or _vector_version(found.vector)
    score = found.score
    undecided = False
    if score is None and found.vector:
        # a vector without a score: v3's base score is computed from it; any other cannot tell (a finding
        # rated "low" by one source and by a 9.8 vector alone by another must not read as low)
        score = base_score_v3(found.vector) if version == 3 else None
        undecided = score is None
    band = cvss_severity(score, version) if score is not None and version is not None else None
    severity = highest(severity_name(found.severity), band)
    return Rating(
        severity=severity,
        score=found.score,
        method=found.method,
        source=found.source.name if found.source is not None else None,
        undecided=undecided,
    )


def _vector_version(vector: str | None) -> int | None:
    found = _VECTOR_VERSION.match(vector or "")
    return int(found.group(1)) if found else None
