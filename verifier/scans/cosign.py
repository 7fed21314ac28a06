"""The cosign vulnerability predicate (``https://cosign.sigstore.dev/attestation/vuln/v1``) and the scanner
results it carries: Trivy's JSON report (what ``trivy --format cosign-vuln`` writes), pip-audit's JSON
report, or a CycloneDX document.

The wrapper says the document is a vulnerability scan, and when: ``metadata.scanFinishedOn`` (else
``scanStartedOn``; Go's zero time ``0001-01-01T00:00:00Z`` counts as absent). ``scanner.db.version`` is free
text; where it is an RFC 3339 time it is taken as the time the vulnerability database was built.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifier.base import InputError, input_error_from_validation
from verifier.scans.cyclonedx import is_cyclonedx, read_cyclonedx
from verifier.scans.model import (
    Component,
    Rating,
    ScanDocument,
    Vulnerability,
    component_from,
    cvss_severity,
    severity_name,
    severity_unknowns,
)
from verifier.scans.times import parse_time

__all__ = ["read_cosign_vuln"]

#: Trivy's VendorSeverity numbers.
_TRIVY_SEVERITIES: Final = {1: "low", 2: "medium", 3: "high", 4: "critical"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, defer_build=True)


class _Db(_Model):
    uri: str | None = None
    version: str | None = None


class _Scanner(_Model):
    uri: str | None = None
    version: str | None = None
    db: _Db | None = None
    result: dict[str, Any]


class _Metadata(_Model):
    scan_started_on: str | None = Field(default=None, alias="scanStartedOn")
    scan_finished_on: str | None = Field(default=None, alias="scanFinishedOn")


class _Predicate(_Model):
    scanner: _Scanner
    metadata: _Metadata | None = None


# --- pip-audit's JSON report ---


class _PipAuditVuln(_Model):
    id: str
    aliases: list[str] | None = None


class _PipAuditDependency(_Model):
    name: str
    version: str | None = None
    vulns: list[_PipAuditVuln] | None = None
    skip_reason: str | None = None


class _PipAudit(_Model):
    dependencies: list[_PipAuditDependency]


# --- Trivy's JSON report (types.Report) ---


class _TrivyIdentifier(_Model):
    purl: str | None = Field(default=None, alias="PURL")


class _TrivyPackage(_Model):
    name: str = Field(alias="Name")
    version: str | None = Field(default=None, alias="Version")
    identifier: _TrivyIdentifier | None = Field(default=None, alias="Identifier")


class _TrivyCvss(_Model):
    v3_score: float | None = Field(default=None, alias="V3Score")
    v2_score: float | None = Field(default=None, alias="V2Score")


class _TrivyVulnerability(_Model):
    id: str = Field(alias="VulnerabilityID")
    vendor_ids: list[str] | None = Field(default=None, alias="VendorIDs")
    package: str = Field(alias="PkgName")
    identifier: _TrivyIdentifier | None = Field(default=None, alias="PkgIdentifier")
    installed: str | None = Field(default=None, alias="InstalledVersion")
    status: str | None = Field(default=None, alias="Status")
    severity: str | None = Field(default=None, alias="Severity")
    severity_source: str | None = Field(default=None, alias="SeveritySource")
    vendor_severity: dict[str, int] | None = Field(default=None, alias="VendorSeverity")
    cvss: dict[str, _TrivyCvss] | None = Field(default=None, alias="CVSS")


class _TrivyResult(_Model):
    target: str = Field(alias="Target")
    packages: list[_TrivyPackage] | None = Field(default=None, alias="Packages")
    vulnerabilities: list[_TrivyVulnerability] | None = Field(default=None, alias="Vulnerabilities")


class _Trivy(_Model):
    schema_version: int = Field(alias="SchemaVersion")
    results: list[_TrivyResult] | None = Field(default=None, alias="Results")


def read_cosign_vuln(data: Mapping[str, Any], source: str) -> ScanDocument:
    """A cosign vulnerability predicate as a :class:`ScanDocument`.

    Raises :class:`~verifier.base.InputError` for a predicate without a scanner result, or a result in a
    format trtguard does not read.
    """
    try:
        predicate = _Predicate.model_validate(data)
    except ValidationError as error:
        raise input_error_from_validation(error, source, what="the cosign vulnerability predicate") from None
    metadata = predicate.metadata or _Metadata()
    time_unknowns: list[str] = []
    when = _set(metadata.scan_finished_on) or _set(metadata.scan_started_on)
    scanned_at = parse_time(when, "metadata.scanFinishedOn", time_unknowns)
    result = predicate.scanner.result
    where = f"{source} scanner.result"
    if is_cyclonedx(result):
        document = read_cyclonedx(result, where, as_scan=True)
        if scanned_at is None and document.scanned_at is not None:
            scanned_at, time_unknowns = document.scanned_at, []
        # the wrapper's time is the scan's: the inner document's own time does not matter
        unknowns = [u for u in document.unknowns if "metadata.timestamp" not in u]
    elif "SchemaVersion" in result:
        document = _trivy(result, where)
        unknowns = list(document.unknowns)
    elif isinstance(result.get("dependencies"), list):
        document = _pip_audit(result, where)
        unknowns = list(document.unknowns)
    else:
        raise InputError(
            "the scanner result is neither a CycloneDX document, a Trivy JSON report nor a pip-audit JSON "
            "report",
            location=where,
            hint="attest the scanner's JSON output in one of those formats",
        )
    return ScanDocument(
        format="cosign-vuln",
        scanned_at=scanned_at,
        database_at=_database_time(predicate.scanner.db),
        components=document.components,
        vulnerabilities=document.vulnerabilities,
        skipped=document.skipped,
        scanner=predicate.scanner.uri or None,
        unknowns=tuple(time_unknowns + unknowns),
        is_scan=True,  # the predicate says it is one
    )


def _set(text: str | None) -> str | None:
    # Go's zero time.Time, which trivy and cosign write for a field they did not fill in
    return None if text is None or text.startswith("0001-01-01") else text


def _database_time(db: _Db | None) -> datetime | None:
    if db is None or not db.version:
        return None
    return parse_time(db.version, "scanner.db.version", [])


def _pip_audit(result: Mapping[str, Any], source: str) -> ScanDocument:
    try:
        report = _PipAudit.model_validate(result)
    except ValidationError as error:
        raise input_error_from_validation(error, source, what="the pip-audit report") from None
    unknowns: list[str] = []
    components: list[Component] = []
    vulnerabilities: list[Vulnerability] = []
    skipped: list[tuple[str, str]] = []
    for dependency in report.dependencies:
        component = component_from(dependency.name, dependency.version, None, ecosystem="pypi")
        if dependency.skip_reason is not None:
            skipped.append((component.name, dependency.skip_reason))
            continue
        components.append(component)
        vulnerabilities += [
            Vulnerability(id=v.id, aliases=tuple(v.aliases or ()), components=(component.name,))
            for v in dependency.vulns or []
        ]
    known = _complete(components, skipped, unknowns, "pip-audit")
    if known:
        unknowns += severity_unknowns(vulnerabilities)
    return ScanDocument(
        format="cosign-vuln",
        scanned_at=None,
        components=tuple(components),
        vulnerabilities=tuple(vulnerabilities) if known else None,
        skipped=tuple(skipped),
        unknowns=tuple(unknowns),
    )


def _trivy(result: Mapping[str, Any], source: str) -> ScanDocument:
    try:
        report = _Trivy.model_validate(result)
    except ValidationError as error:
        raise input_error_from_validation(error, source, what="the Trivy report") from None
    unknowns: list[str] = []
    results = report.results or []
    components = [
        component_from(p.name, p.version, p.identifier.purl if p.identifier else None)
        for r in results
        for p in r.packages or []
    ]
    vulnerabilities = [_trivy_vulnerability(v) for r in results for v in r.vulnerabilities or []]
    if not results:
        unknowns.append("the Trivy report has no results: it found nothing to audit")
    elif not components:
        unknowns.append("the Trivy report lists no packages (run trivy with --list-all-pkgs to record them)")
    if results:
        unknowns += severity_unknowns(vulnerabilities)
    return ScanDocument(
        format="cosign-vuln",
        scanned_at=None,
        components=tuple(components),
        vulnerabilities=tuple(vulnerabilities) if results else None,
        unknowns=tuple(unknowns),
    )


def _trivy_vulnerability(found: _TrivyVulnerability) -> Vulnerability:
    ratings = [Rating(severity=severity_name(found.severity), source=found.severity_source)]
    ratings += [
        Rating(severity=_TRIVY_SEVERITIES.get(level), source=vendor)
        for vendor, level in sorted((found.vendor_severity or {}).items())
    ]
    for vendor, cvss in sorted((found.cvss or {}).items()):
        if cvss.v3_score is not None:
            ratings.append(
                Rating(cvss_severity(cvss.v3_score, 3), score=cvss.v3_score, method="CVSSv3", source=vendor)
            )
    component = component_from(
        found.package, found.installed, found.identifier.purl if found.identifier else None
    )
    return Vulnerability(
        id=found.id,
        aliases=tuple(found.vendor_ids or ()),
        ratings=tuple(ratings),
        state=found.status,
        components=(component.name,),
    )


def _complete(
    components: list[Component], skipped: list[tuple[str, str]], unknowns: list[str], tool: str
) -> bool:
    """Whether the scan covered everything it lists: nothing skipped, and something audited."""
    if skipped:
        names = ", ".join(f"{name} ({reason})" for name, reason in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        unknowns.append(
            f"{tool} skipped {len(skipped)} package(s), so their vulnerabilities are unknown: {names}{more}"
        )
    if not components:
        unknowns.append(f"{tool} audited no package")
    return not skipped and bool(components)
