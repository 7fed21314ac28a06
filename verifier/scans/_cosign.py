"""The cosign vulnerability predicate (``https://cosign.sigstore.dev/attestation/vuln/v1``) and the scanner
results it carries: Trivy's JSON report (what ``trivy --format cosign-vuln`` writes), pip-audit's JSON
report, or a CycloneDX document.

The wrapper says the document is a vulnerability scan, and when: ``metadata.scanFinishedOn`` (else
``scanStartedOn``; Go's zero time ``0001-01-01T00:00:00Z`` counts as absent). ``scanner.db.version`` is free
text; where it is an RFC 3339 time it is taken as the time the vulnerability database was built.

What the result inside cannot tell is never a clean scan (docs/scans.md): a pip-audit dependency that was
skipped, or that has no ``vulns`` list; a Trivy report with no package results (it did not look for
vulnerabilities: ``--scanners secret``), a result of a package type Trivy has no vulnerability data for
(conda: Trivy writes the same result as for a clean one), an operating system Trivy found but did not scan
(unsupported: no OS result) or whose distribution no longer publishes security data (``EOSL``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from pydantic import Field

from verifier.base import InputError
from verifier.scans._cvss import base_score_v3
from verifier.scans._cyclonedx import is_cyclonedx, read_cyclonedx
from verifier.scans._lenient_model import LenientModel
from verifier.scans._times import parse_time
from verifier.scans.model import (
    Component,
    Rating,
    ScanDocument,
    Vulnerability,
    check_component_count,
    component_from,
    cvss_severity,
    images_about,
    listed_count,
    severity_name,
    severity_unknowns,
)

__all__ = ["read_cosign_vuln"]

#: Scanner flags that leave findings out of a report, by scanner (read from ``scanner.uri``; Trivy's when it
#: names none of the others), so that a report made with one cannot tell what is vulnerable. A configuration
#: file (``--config``) may set any of them.
_FILTERING_FLAGS: Final = {
    "pip-audit": frozenset({"--ignore-vuln"}),
    "grype": frozenset({"--only-fixed", "--only-notfixed", "--ignore-states", "--exclude", "--config", "-c"}),
    "trivy": frozenset(
        {
            "--ignore-unfixed", "--ignore-status", "--ignorefile", "--ignore-policy", "--skip-dirs",
            "--skip-files", "--vex", "--pkg-types", "--vuln-type", "--pkg-relationships", "--config", "-c",
        }
    ),
}  # fmt: skip
#: Flags that are switches: ``--ignore-unfixed=false`` leaves nothing out.
_SWITCHES: Final = frozenset({"--ignore-unfixed", "--only-fixed", "--only-notfixed"})
#: Trivy's ``--severity`` (``-s``); its default names every severity, UNKNOWN included.
_SEVERITY_FLAGS: Final = frozenset({"--severity", "-s"})
_EVERY_SEVERITY: Final = frozenset({"UNKNOWN", "LOW", "MEDIUM", "HIGH", "CRITICAL"})
#: Trivy's VendorSeverity numbers.
_TRIVY_SEVERITIES: Final = {1: "low", 2: "medium", 3: "high", 4: "critical"}
#: Trivy's result classes that carry vulnerabilities (others: config, secret, license, custom).
_TRIVY_PACKAGE_CLASSES: Final = frozenset({"os-pkgs", "lang-pkgs"})
#: The language package types Trivy looks up in its vulnerability database (its detector's list,
#: pkg/detector/library/driver.go); for any other type (conda-pkg, conda-environment, a type added after
#: this list) it writes a result with no findings that reads like a clean one.
TRIVY_SCANNED_LANGUAGE_TYPES: Final = frozenset(
    {
        "bundler", "gemspec", "rustbinary", "cargo", "composer", "composer-vendor", "gobinary", "gomod",
        "jar", "pom", "gradle", "sbt", "npm", "yarn", "pnpm", "bun", "node-pkg", "javascript", "nuget",
        "dotnet-core", "packages-props", "pipenv", "poetry", "pip", "python-pkg", "uv", "pylock", "pub",
        "hex", "conan", "swift", "cocoapods", "bitnami", "kubernetes", "julia",
    }
)  # fmt: skip


class _Db(LenientModel):
    uri: str | None = None
    version: str | None = None


class _Scanner(LenientModel):
    uri: str | None = None
    version: str | None = None
    db: _Db | None = None
    result: dict[str, Any]


class _Metadata(LenientModel):
    scan_started_on: str | None = Field(default=None, alias="scanStartedOn")
    scan_finished_on: str | None = Field(default=None, alias="scanFinishedOn")


class _Invocation(LenientModel):
    parameters: Any = None
    """Free-form in cosign's predicate (``interface{}``); a list of the scanner's flags is what is read."""


class _Predicate(LenientModel):
    invocation: _Invocation | None = None
    scanner: _Scanner
    metadata: _Metadata | None = None


# --- pip-audit's JSON report ---


class _PipAuditVuln(LenientModel):
    id: str
    aliases: list[str] | None = None


class _PipAuditDependency(LenientModel):
    name: str
    version: str | None = None
    vulns: list[_PipAuditVuln] | None = None
    """Absent (not an empty list): the dependency's findings are not recorded."""
    skip_reason: str | None = None


class _PipAudit(LenientModel):
    dependencies: list[_PipAuditDependency]


# --- Trivy's JSON report (types.Report) ---


class _TrivyIdentifier(LenientModel):
    purl: str | None = Field(default=None, alias="PURL")


class _TrivyPackage(LenientModel):
    name: str = Field(alias="Name")
    version: str | None = Field(default=None, alias="Version")
    identifier: _TrivyIdentifier | None = Field(default=None, alias="Identifier")


class _TrivyCvss(LenientModel):
    v40_score: float | None = Field(default=None, alias="V40Score")
    v3_score: float | None = Field(default=None, alias="V3Score")
    v2_score: float | None = Field(default=None, alias="V2Score")
    v40_vector: str | None = Field(default=None, alias="V40Vector")
    v3_vector: str | None = Field(default=None, alias="V3Vector")
    v2_vector: str | None = Field(default=None, alias="V2Vector")


class _TrivyVulnerability(LenientModel):
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


class _TrivyResult(LenientModel):
    target: str = Field(alias="Target")
    result_class: str | None = Field(default=None, alias="Class")
    type: str | None = Field(default=None, alias="Type")
    packages: list[_TrivyPackage] | None = Field(default=None, alias="Packages")
    vulnerabilities: list[_TrivyVulnerability] | None = Field(default=None, alias="Vulnerabilities")


class _TrivyOs(LenientModel):
    family: str | None = Field(default=None, alias="Family")
    name: str | None = Field(default=None, alias="Name")
    eosl: bool = Field(default=False, alias="EOSL")


class _TrivyMetadata(LenientModel):
    os: _TrivyOs | None = Field(default=None, alias="OS")
    repo_digests: list[str] | None = Field(default=None, alias="RepoDigests")


class _Trivy(LenientModel):
    schema_version: int = Field(alias="SchemaVersion")
    artifact_name: str | None = Field(default=None, alias="ArtifactName")
    metadata: _TrivyMetadata | None = Field(default=None, alias="Metadata")
    results: list[_TrivyResult] | None = Field(default=None, alias="Results")


def read_cosign_vuln(data: Mapping[str, Any], source: str) -> ScanDocument:
    """A cosign vulnerability predicate as a :class:`ScanDocument`.

    Raises :class:`~verifier.base.InputError` for a predicate without a scanner result, or a result in a
    format trtguard does not read.
    """
    predicate = _Predicate.read(data, source, "the cosign vulnerability predicate")
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
    database_at, absent = _database_time(predicate.scanner.db)
    filters = _filtering_flags(
        predicate.invocation.parameters if predicate.invocation else None, predicate.scanner.uri
    )
    if filters:
        unknowns.append(
            f"the scanner ran with {', '.join(filters)}, which leave findings out of the report, so it "
            "cannot tell what is vulnerable (scan without filters, and allow findings in the policy instead)"
        )
    return ScanDocument(
        format="cosign-vuln",
        scanned_at=scanned_at,
        database_at=database_at,
        absent=absent,
        components=document.components,
        vulnerabilities=None if filters else document.vulnerabilities,
        skipped=document.skipped,
        scanner=predicate.scanner.uri or None,
        unknowns=tuple(time_unknowns + unknowns),
        role="scan",  # the predicate says it is one
        about=document.about,
    )


def _filtering_flags(parameters: object, scanner: str | None) -> list[str]:
    """The flags among the scanner's ``parameters`` that leave findings out (:data:`_FILTERING_FLAGS` of the
    ``scanner``, a Trivy ``--severity`` that names fewer than every severity), each once in the order given.

    ``parameters`` is free-form in cosign's predicate: a list of words or one string (split at white space),
    or nothing; anything else cannot be read, so it counts as a filter."""
    if parameters is None:
        return []
    if isinstance(parameters, str):
        parameters = [parameters]
    if not isinstance(parameters, list) or not all(isinstance(p, str) for p in parameters):
        return ["invocation.parameters that are not a list of flags"]
    uri = (scanner or "").lower()
    tool = next((name for name in ("pip-audit", "grype") if name in uri), "trivy")
    words = [word for p in parameters for word in p.split()]
    found: list[str] = []
    for index, word in enumerate(words):
        flag, has_value, value = word.partition("=")
        if tool == "trivy" and flag.startswith("-s") and not flag.startswith("--") and len(flag) > 2:
            flag, has_value, value = "-s", True, flag[2:]  # -sCRITICAL
        if flag in _FILTERING_FLAGS[tool]:
            if not (flag in _SWITCHES and has_value and value.strip().lower() in {"false", "0"}):
                found.append(flag)
        elif tool == "trivy" and flag in _SEVERITY_FLAGS:
            if not has_value:
                value = words[index + 1] if index + 1 < len(words) else ""
            named = {v.strip().upper() for v in value.split(",")}
            if not named >= _EVERY_SEVERITY:
                found.append(f"{flag} {value}".strip())
    return list(dict.fromkeys(found))


def _set(text: str | None) -> str | None:
    # Go's zero time.Time, which trivy and cosign write for a field they did not fill in
    return None if text is None or text.startswith("0001-01-01") else text


def _database_time(db: _Db | None) -> tuple[datetime | None, tuple[tuple[str, str], ...]]:
    """When the vulnerability database was built, or why that cannot be told (``scan.database_at``
    absent: a condition reading it cannot tell, docs/scans.md)."""
    if db is None or not db.version:
        return None, (("database_at", "the scan does not say when its vulnerability database was built"),)
    built = parse_time(db.version, "scanner.db.version", [])
    if built is None:
        why = f"scanner.db.version {db.version!r} is no RFC 3339 date, so the database's age is unknown"
        return None, (("database_at", why),)
    return built, ()


def _pip_audit(result: Mapping[str, Any], source: str) -> ScanDocument:
    check_component_count(listed_count(result.get("dependencies")), source)  # before validating
    report = _PipAudit.read(result, source, "the pip-audit report")
    unknowns: list[str] = []
    components: list[Component] = []
    vulnerabilities: list[Vulnerability] = []
    skipped: list[tuple[str, str]] = []
    for dependency in report.dependencies:
        component = component_from(dependency.name, dependency.version, None, ecosystem="pypi")
        if dependency.skip_reason is not None:
            skipped.append((component.name, dependency.skip_reason))
            continue
        if dependency.vulns is None:  # pip-audit writes "vulns": [] for a dependency it audited clean
            skipped.append((component.name, "the report records no findings list for it ('vulns')"))
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
    results = result.get("Results")
    packages = (
        [r.get("Packages") for r in results if isinstance(r, Mapping)] if isinstance(results, list) else []
    )
    check_component_count(sum(map(listed_count, packages)), source)  # before validating: MAX_COMPONENTS
    report = _Trivy.read(result, source, "the Trivy report")
    unknowns: list[str] = []
    results = report.results or []
    scanned = [r for r in results if r.result_class in _TRIVY_PACKAGE_CLASSES]
    components = [
        component_from(p.name, p.version, p.identifier.purl if p.identifier else None)
        for r in scanned
        for p in r.packages or []
    ]
    vulnerabilities = [_trivy_vulnerability(v) for r in scanned for v in r.vulnerabilities or []]
    told = _trivy_told(report, scanned, unknowns)
    if told and not components:
        # a note only: the findings are judged, but components rules have nothing to read
        unknowns.append("the Trivy report lists no packages (run trivy with --list-all-pkgs to record them)")
    if told:
        unknowns += severity_unknowns(vulnerabilities)
    named = [report.artifact_name, *(report.metadata.repo_digests or [] if report.metadata else [])]
    return ScanDocument(
        format="cosign-vuln",
        scanned_at=None,
        components=tuple(components),
        vulnerabilities=tuple(vulnerabilities) if told else None,
        skipped=tuple(
            (r.target, f"Trivy has no vulnerability data for {r.type or 'its'} packages")
            for r in scanned
            if r.result_class == "lang-pkgs" and r.type not in TRIVY_SCANNED_LANGUAGE_TYPES
        ),
        unknowns=tuple(unknowns),
        # Metadata.ImageID is the image's config digest, never a manifest's: it names nothing a subject can be
        about=images_about(named),
    )


def _trivy_told(report: _Trivy, scanned: list[_TrivyResult], unknowns: list[str]) -> bool:
    """Whether the Trivy report tells what is vulnerable in every package result; why not, in ``unknowns``.

    Trivy leaves ``Vulnerabilities`` out of a result it found nothing in, and writes the very same result
    for packages it did not look up (see the module's docstring): only what the report says it scanned
    counts, and anything else is "cannot tell".
    """
    if not report.results:
        unknowns.append("the Trivy report has no results: it found nothing to audit")
        return False
    if not scanned:
        classes = sorted({r.result_class or "?" for r in report.results})
        unknowns.append(
            f"the Trivy report has no package results (only {', '.join(classes)}): it did not look for "
            "vulnerabilities (run trivy with --scanners vuln)"
        )
        return False
    told = True
    unscanned = sorted(
        {f"{r.target} ({r.type or 'no type'})" for r in scanned if r.result_class == "lang-pkgs"}
        - {f"{r.target} ({r.type})" for r in scanned if r.type in TRIVY_SCANNED_LANGUAGE_TYPES}
    )
    if unscanned:
        unknowns.append(
            f"Trivy has no vulnerability data for the packages of {', '.join(unscanned[:3])}"
            f"{f' and {len(unscanned) - 3} more' if len(unscanned) > 3 else ''}, so their vulnerabilities "
            "are unknown (it writes such a result as it writes a clean one)"
        )
        told = False
    system = report.metadata.os if report.metadata is not None else None
    if system is not None and system.family not in (None, "", "none"):
        named = f"{system.family} {system.name or ''}".strip()
        if not any(r.result_class == "os-pkgs" for r in scanned):
            unknowns.append(
                f"Trivy found the operating system {named} but no OS package result: it did not scan the OS "
                "packages (an OS it has no vulnerability data for)"
            )
            told = False
        elif system.eosl:
            unknowns.append(
                f"the operating system {named} is end of service life (EOSL): its distribution publishes no "
                "more security data, so the findings for its packages are incomplete"
            )
            told = False
    return told


def _trivy_vulnerability(found: _TrivyVulnerability) -> Vulnerability:
    ratings = [Rating(severity=severity_name(found.severity), source=found.severity_source)]
    ratings += [
        Rating(severity=_TRIVY_SEVERITIES.get(level), source=vendor)
        for vendor, level in sorted((found.vendor_severity or {}).items())
    ]
    # every score counts, each in its version's bands: the highest any rating says is the severity; a vector
    # without a score is scored where it is v3, and cannot tell otherwise (as in CycloneDX ratings)
    for vendor, cvss in sorted((found.cvss or {}).items()):
        for given, vector, version, method in (
            (cvss.v40_score, cvss.v40_vector, 4, "CVSSv4"),
            (cvss.v3_score, cvss.v3_vector, 3, "CVSSv3"),
            (cvss.v2_score, cvss.v2_vector, 2, "CVSSv2"),
        ):
            score = given
            if score is None and vector:
                score = base_score_v3(vector) if version == 3 else None
                if score is None:
                    ratings.append(Rating(None, method=method, source=vendor, undecided=True))
                    continue
            if score is not None:
                ratings.append(
                    Rating(cvss_severity(score, version), score=score, method=method, source=vendor)
                )
    component = component_from(
        found.package, found.installed, found.identifier.purl if found.identifier else None
    )
    return Vulnerability(
        id=found.id,
        ratings=tuple(ratings),
        state=found.status,
        components=(component.name,),
        advisories=tuple(found.vendor_ids or ()),
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
