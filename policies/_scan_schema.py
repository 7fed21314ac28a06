"""The policy models of the built-in scan and SBOM checks (``vulnerabilities``, ``components``), which
:class:`policies.schema.AttestationRule` holds; split from :mod:`policies.schema` for its size.

``policies/README.md`` and docs/scans.md document every field.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import Field, field_validator, model_validator

from policies._strict import StrictModel
from policies.results import Action
from verifier.scans import is_scan_predicate_type, scan_family

__all__ = [
    "VULNERABILITY_ID",
    "AllowedVulnerability",
    "ComponentRule",
    "DocumentKind",
    "Severity",
    "VulnerabilityRule",
    "expiry_time",
    "judged_document",
    "scan_rule_problem",
]

DocumentKind = Literal["sbom", "scan"]


Severity = Literal["critical", "high", "medium", "low", "info", "none"]
#: How an allow-list names a vulnerability: CVE, GHSA, PYSEC, OSV or any other ``PREFIX-ID``, in any case.
VULNERABILITY_ID = r"^\s*[A-Za-z][A-Za-z0-9]*-[A-Za-z0-9][A-Za-z0-9._:-]*\s*$"


class AllowedVulnerability(StrictModel):
    """A finding the policy admits: by id (any alias, any case), with why, until when."""

    id: str = Field(pattern=VULNERABILITY_ID, description="CVE-…, GHSA-…, PYSEC-…, OSV-…: any id or alias")
    reason: str = Field(min_length=1, description="why it is admitted (kept with the decision)")
    expires: str | None = Field(
        default=None,
        description="RFC 3339 time or date (YYYY-MM-DD: the start of that day, UTC); from then on the entry "
        "no longer matches",
    )

    @field_validator("expires")
    @classmethod
    def _a_time(cls, value: str | None) -> str | None:
        if value is not None:
            expiry_time(value)
        return value


def expiry_time(text: str) -> datetime:
    """An allow-list entry's ``expires``: an RFC 3339 time with a zone, or a date (its start, UTC)."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expires {text!r} is not an RFC 3339 time or a date (2026-12-31)") from None
    if moment.tzinfo is None:
        raise ValueError(f"expires {text!r} has no time zone (end it in Z or +HH:MM)")
    return moment


class VulnerabilityRule(StrictModel):
    """No affected finding above ``maxSeverity`` in the scan but those allow-listed; a finding whose
    severity cannot be told, and a scan that cannot tell (skipped packages, audited nothing), is
    ``unknown``."""

    max_severity: Severity = Field(description="the highest severity an affected finding may have")
    allow: list[AllowedVulnerability] = Field(default_factory=list)
    allow_from: str | None = Field(
        default=None,
        min_length=1,
        description="a YAML or JSON file (relative to this policy) holding more entries like `allow`'s",
    )
    unknown: Action | None = Field(
        default=None, description='what "cannot tell" does; absent: the policy\'s onIndeterminate'
    )


#: What marks a version specifier or range (PEP 440 ``<5.4``, ``==5.3``, ``~=``, npm ``^1.2``, a wildcard,
#: a list, ``name@version``): no package name holds one, and one written there would match nothing.
_RANGE: Final = re.compile(r"[<>=!~^*|,@\s]")
#: The same in a purl's version, but ``~`` and ``^``, which Debian and RPM versions hold (``1.0~rc1``).
_VERSION_RANGE: Final = re.compile(r"[<>=!*|,\s]")
#: purl types whose versions never hold ``~`` or ``^`` (those mark npm and Cargo ranges there).
_NO_TILDE_TYPES: Final = frozenset({"pypi", "npm", "maven", "cargo", "gem", "golang", "nuget", "composer"})


class ComponentRule(StrictModel):
    """Components the SBOM must list and must not list, by name in their ecosystem (docs/scans.md)."""

    required: list[str] = Field(
        default_factory=list, description="names (PEP 503 for PyPI, group:artifact for Maven) or purls"
    )
    banned: list[str] = Field(default_factory=list, description="names or purls, as `required`")
    unknown: Action | None = Field(
        default=None, description="what an SBOM that lists nothing does; absent: the policy's onIndeterminate"
    )

    @model_validator(mode="after")
    def _something(self) -> ComponentRule:
        if not self.required and not self.banned:
            raise ValueError("components needs `required` or `banned` names")
        for name in (*self.required, *self.banned):
            if not name.strip() or name != name.strip():
                raise ValueError(f"component name {name!r} is empty or has surrounding white space")
            if name.lower().startswith("pkg:"):
                _package_purl(name)
            elif _RANGE.search(name.lstrip("@")):  # an npm scope starts with "@"
                raise ValueError(
                    f"component {name!r}: a name cannot carry a version or a range; name the package (it "
                    "bans every version), or one exact version by purl (`pkg:pypi/pyyaml@5.3`); version "
                    "ranges are not supported"
                )
        return self


def _package_purl(text: str) -> None:
    """Refuse a purl that names no one package: not a purl, or one with qualifiers or a subpath (which a
    package's identity does not include: a ban on ``?arch=x86_64`` would read as a ban on every arch)."""
    # imported here: a policy without purls does not load the library (start-up time, issue 15)
    from packageurl import PackageURL  # noqa: PLC0415

    try:
        parsed = PackageURL.from_string(text)
    except ValueError as error:
        raise ValueError(f"component {text!r} is not a valid purl: {error}") from None
    if parsed.qualifiers or parsed.subpath:
        raise ValueError(
            f"component {text!r}: name a package by its purl's type, namespace, name and version; qualifiers "
            "and a subpath do not identify a package (leave them out)"
        )
    version = parsed.version or ""
    ranged = _VERSION_RANGE.search(version) or (
        parsed.type in _NO_TILDE_TYPES and re.search(r"[~^]", version)
    )
    if version.lower().startswith("vers:") or ranged:
        raise ValueError(
            f"component {text!r}: a purl's version is one exact version ({version!r} is a range, which "
            "would match no component); version ranges are not supported: name the package without a "
            "version to ban every version, or list each exact version"
        )


def judged_document(
    predicate_type: str,
    document: DocumentKind | None,
    vulnerabilities: VulnerabilityRule | None,
    components: ComponentRule | None,
) -> DocumentKind | None:
    """The document an attestation rule judges: ``document``, else what the predicate type or its checks
    say (cosign's vulnerability predicate and ``vulnerabilities``: a scan; SPDX and ``components``: an
    SBOM); None for a CycloneDX rule that says neither, or a type that is no SBOM or scan."""
    if document is not None:
        return document
    if not is_scan_predicate_type(predicate_type):
        return None
    family = scan_family(predicate_type)
    if family == "spdx":
        return "sbom"
    if family != "cyclonedx" or vulnerabilities is not None:  # a CycloneDX document can be either
        return "scan"
    return "sbom" if components is not None else None


def scan_rule_problem(
    predicate_type: str,
    document: DocumentKind | None,
    judged: DocumentKind | None,
    *,
    max_age: bool,
    vulnerabilities: bool,
    components: bool,
) -> None:
    """Raise ``ValueError`` for an attestation rule whose scan and SBOM checks cannot hold as written: a
    check on a type that is no SBOM or scan, vulnerabilities of an SBOM, and the naive ``maxAge`` on a
    CycloneDX type that could be either (a fresh SBOM would pass for a fresh scan)."""
    scans = is_scan_predicate_type(predicate_type)
    for key, given in (
        ("maxAge", max_age),
        ("document", document is not None),
        ("vulnerabilities", vulnerabilities),
        ("components", components),
    ):
        if given and not scans:
            what = "a time trtguard can read" if key == "maxAge" else "a document trtguard reads"
            raise ValueError(f"{key} needs {what}: {predicate_type} is no SBOM or scan")
    if document == "sbom" and vulnerabilities:
        raise ValueError("vulnerabilities are read from a scan: set `document: scan` (or leave it out)")
    family = scan_family(predicate_type)
    if family == "spdx" and (document == "scan" or vulnerabilities):
        raise ValueError(f"{predicate_type} is an SBOM (SPDX 2 has no vulnerabilities): no scan")
    if document == "sbom" and family == "cosign-vuln":
        raise ValueError(f"{predicate_type} is a vulnerability scan: `document: sbom` cannot hold")
    if max_age and judged is None:
        raise ValueError(
            f"maxAge on {predicate_type} could measure an SBOM (when it was made) or a vulnerability scan "
            "(when it ran, and its database): say which with `document: scan` (then an SBOM does not count "
            "as a scan) or `document: sbom`"
        )
