"""The one shape every SBOM and vulnerability scan is read into, whatever format it came in.

Policies judge this shape (``scan`` in CEL, see docs/scans.md), never a format's own fields, so that the
differences between formats and scanners are settled here once:

* severities are normalised (``MODERATE`` and ``medium`` are one severity) and every rating counts, not
  the first: :attr:`Vulnerability.severity` is the highest of them;
* a vulnerability's ids include its aliases (CVE, GHSA, PYSEC, OSV), in one canonical case;
* VEX analysis decides :attr:`Vulnerability.affected`;
* component names are normalised per ecosystem (``PyYAML`` and ``pyyaml`` are one name; surrounding white
  space, case and Unicode compatibility forms never make two names), and each component also has the name
  its ecosystem gives it (:attr:`Component.package`: ``group:artifact`` for Maven), which is what a list of
  banned or allowed packages matches;
* each document has a :attr:`ScanDocument.role`: an SBOM, a vulnerability scan (only when it says it is
  one) or a VEX document, so that a rule judges the newest document of the role it needs;
* what a document cannot tell is left out (a severity no rating gives, the vulnerabilities of a scan that
  skipped packages or audited nothing, the components of an empty BOM) and said in :attr:`ScanDocument.
  unknowns`, so that a rule reading it cannot pass on it (the evaluator turns that into ``onError``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from packageurl import PackageURL

from verifier.base import InputError, hidden

__all__ = [
    "MAX_COMPONENTS",
    "SEVERITY_ORDER",
    "Component",
    "DocumentRole",
    "Rating",
    "ScanDocument",
    "ScanFormat",
    "Vulnerability",
    "canonical_id",
    "check_component_count",
    "component_from",
    "cvss_severity",
    "highest",
    "images_about",
    "normal_text",
    "severity_name",
    "severity_unknowns",
]

#: Components (packages) one document may list for trtguard to read it: past it the document is unreadable
#: evidence, which a rule cannot tell from (never passes). Well above the SBOMs of real images (thousands of
#: packages), it is counted in the raw JSON before a component is built, so that reading a huge document
#: costs a count rather than seconds of validation (attack 35 E3: 550,000 components, 6 s).
MAX_COMPONENTS: Final = 100_000

ScanFormat = Literal["cyclonedx", "spdx", "cosign-vuln"]
#: What a document is for the rules (docs/scans.md, "What counts as scan evidence"): an ``sbom`` lists
#: components; a ``scan`` says a scanner looked for vulnerabilities; a ``vex`` states the analysis of known
#: vulnerabilities (neither an inventory nor a scan of everything).
DocumentRole = Literal["sbom", "scan", "vex"]

#: Normalised severities, lowest first.
SEVERITY_ORDER: Final = ("none", "info", "low", "medium", "high", "critical")
# The words scanners and advisory databases use, each mapped to one normalised severity. Anything else
# ("unknown", "unspecified", "", a word not listed) gives no severity: the document cannot tell.
_SEVERITY_WORDS: Final = {
    "critical": "critical",
    "high": "high",
    "important": "high",  # Red Hat
    "medium": "medium",
    "moderate": "medium",  # GitHub advisories, Red Hat
    "low": "low",
    "negligible": "low",  # Debian, Ubuntu
    "minor": "low",
    "info": "info",
    "informational": "info",
    "none": "none",
}
#: VEX analysis states under which the component is not exposed to the vulnerability.
NOT_AFFECTED_STATES: Final = frozenset(
    {"not_affected", "false_positive", "resolved", "resolved_with_pedigree"}
)
_PEP503: Final = re.compile(r"[-_.]+")
# purl types whose namespace is the distribution that ships the package (the purl specification's
# "vendor": debian, ubuntu, fedora, alpine, arch), not a part of the package's name.
_VENDOR_NAMESPACES: Final = frozenset({"deb", "rpm", "apk", "alpm"})
_ID_PREFIX: Final = re.compile(r"^([A-Za-z][A-Za-z0-9]*)-(.+)$")
_IMAGE_DIGEST: Final = re.compile(r"(?:^|@)(sha256:[0-9a-f]{64})$", re.IGNORECASE)
_DIGEST_LIKE: Final = re.compile(r"sha[0-9]+:", re.IGNORECASE)
#: purl types of container images, whose version is the image's digest.
_IMAGE_PURL_TYPES: Final = frozenset({"oci", "docker"})


def severity_name(text: object) -> str | None:
    """The normalised severity a word names (``MODERATE`` → ``medium``), or None when it names none."""
    if not isinstance(text, str):
        return None
    return _SEVERITY_WORDS.get(text.strip().lower())


def cvss_severity(score: float, version: int) -> str | None:
    """The qualitative severity of a CVSS base score: v3 and v4 bands, or v2's (which has no critical)."""
    if not 0 <= score <= 10:
        return None
    if version == 2:
        return "low" if score < 4 else "medium" if score < 7 else "high"
    if score == 0:
        return "none"
    return "low" if score < 4 else "medium" if score < 7 else "high" if score < 9 else "critical"


def highest(*severities: str | None) -> str | None:
    """The highest of normalised severities (None where none is given)."""
    known = [s for s in severities if s is not None]
    return max(known, key=SEVERITY_ORDER.index) if known else None


def canonical_id(text: str) -> str:
    """A vulnerability id in one case: the prefix upper case, the rest lower case.

    ``cve-2020-14343`` → ``CVE-2020-14343``, ``GHSA-8Q59-Q68H-6HV4`` → ``GHSA-8q59-q68h-6hv4`` (GitHub's
    form), ``pysec-2021-142`` → ``PYSEC-2021-142``. An id without a ``PREFIX-`` is kept as written.
    """
    text = text.strip()
    found = _ID_PREFIX.match(text)
    return f"{found.group(1).upper()}-{found.group(2).lower()}" if found else text


def images_about(named: Iterable[object]) -> tuple[str, ...]:
    """The image digests a document's content names (:attr:`ScanDocument.about`), each once: of each text,
    the ``sha256:<hex>`` (in lower case) a reference (``repo@sha256:<hex>``), a bare digest or a container
    image's purl (``pkg:oci/…@sha256%3A…``, ``pkg:docker/…``) names. A text that names a digest otherwise
    (``sha512:``, text after it) is kept as it is: it names no subject, so the document cannot be this
    image's; a text that names none counts for nothing."""
    found: list[str] = []
    for written in named:
        if not isinstance(written, str):
            continue
        text = written.strip()
        if text[:4].lower() == "pkg:":
            text = _image_purl_version(text) or ""
        digest = _IMAGE_DIGEST.search(text)
        if digest is not None:
            found.append(digest.group(1).lower())
        elif _DIGEST_LIKE.search(text):
            found.append(text)
    return tuple(dict.fromkeys(found))


def _image_purl_version(purl: str) -> str | None:
    try:
        parsed = PackageURL.from_string(purl)
    except ValueError:
        return purl  # kept whole: a digest in it still says which image it is about
    return parsed.version if parsed.type.lower() in _IMAGE_PURL_TYPES else None


@dataclass(frozen=True, slots=True)
class Component:
    """One package the document lists."""

    name: str
    """Normalised: PEP 503 for Python packages, otherwise the purl's name (or the written name) in lower
    case; for namespaced ecosystems ``namespace/name``."""
    raw_name: str
    package: str
    """The name the package has in its ecosystem, in lower case, from the purl where there is one: PEP 503
    for PyPI, ``group:artifact`` for Maven, ``@scope/name`` for npm, the package's name without the
    distribution for Debian, RPM, Alpine and Arch packages (``pkg:deb/debian/openssl`` is ``openssl``),
    ``namespace/name`` elsewhere (a Go module path); without a purl, :attr:`name`."""
    version: str | None = None
    purl: str | None = None
    ecosystem: str | None = None
    """The purl type (``pypi``, ``npm``, ``deb``, ...) when the document gives a purl."""

    def to_json(self) -> dict[str, Any]:
        """The component as CEL sees it (absent fields left out)."""
        data: dict[str, Any] = {"name": self.name, "raw_name": self.raw_name, "package": self.package}
        for key in ("version", "purl", "ecosystem"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


def component_from(
    name: str,
    version: str | None,
    purl: str | None,
    *,
    ecosystem: str | None = None,
    group: str | None = None,
) -> Component:
    """A :class:`Component` with its name normalised from the purl, or from ``name`` (and CycloneDX's
    ``group``: a Maven groupId, an npm scope) in ``ecosystem``.

    A purl that does not parse is ignored (the written name is used): it is a label, not evidence.
    """
    parsed: PackageURL | None = None
    if purl:
        try:
            parsed = PackageURL.from_string(purl.strip())
        except ValueError:
            parsed = None
    kind: str | None
    namespace: str | None
    if parsed is not None:
        kind, namespace, artifact = parsed.type, parsed.namespace, parsed.name
        canonical = parsed.to_string()
    else:
        kind, namespace, artifact, canonical = ecosystem, group, name, None
    namespace = normal_text(namespace) or None
    normal = _normal(kind, f"{namespace}/{artifact}" if namespace else artifact)
    package = normal
    if namespace:
        if kind in _VENDOR_NAMESPACES:
            package = _normal(kind, artifact)
        elif kind == "maven" or (kind is None and not namespace.startswith("@")):
            # Maven's group:artifact; CycloneDX's `group` without a purl is a Maven groupId but for an npm
            # scope (written with its "@"), which stays `@scope/name`.
            package = f"{namespace}:{_normal(kind, artifact)}"
    return Component(
        name=normal,
        raw_name=name,
        package=package,
        version=unicodedata.normalize("NFKC", version).strip()
        if version and version.strip()
        else (parsed.version if parsed is not None else None),
        purl=canonical,
        ecosystem=kind,
    )


def check_component_count(count: int, source: str) -> None:
    """Raise :class:`~verifier.base.InputError` when a document at ``source`` lists ``count`` components,
    more than :data:`MAX_COMPONENTS`."""
    if count > MAX_COMPONENTS:
        raise InputError(
            f"the document lists more than {MAX_COMPONENTS} components, the most trtguard reads",
            location=source,
            hint="attest an SBOM of the image alone (one entry per package)",
        )


def listed_count(items: object) -> int:
    """How many entries ``items`` has when it is a JSON list (0 otherwise: the reader refuses its type)."""
    return len(items) if isinstance(items, list) else 0


def normal_text(text: str | None) -> str:
    """``text`` compared as a name is: NFKC (compatibility forms such as full-width letters are their plain
    letters), without invisible code points (a soft hyphen, a zero-width space: :func:`verifier.base.hidden`)
    or surrounding white space, in lower case; ``""`` for None."""
    normal = unicodedata.normalize("NFKC", text or "").strip()
    if not normal.isascii():
        normal = "".join(character for character in normal if not hidden(character))
    return normal.lower()


def _normal(kind: str | None, name: str) -> str:
    text = normal_text(name)
    return _PEP503.sub("-", text) if kind == "pypi" else text


@dataclass(frozen=True, slots=True)
class Rating:
    """One rating of a vulnerability: a severity (normalised, or None), a score, who gave it."""

    severity: str | None
    score: float | None = None
    method: str | None = None
    source: str | None = None
    undecided: bool = False
    """It gives a CVSS vector trtguard cannot score (not v3, or not a valid one) and no score: its severity
    cannot be told, so the finding's cannot either (but where another rating says critical)."""

    def to_json(self) -> dict[str, Any]:
        """The rating as CEL sees it."""
        data: dict[str, Any] = {}
        for key in ("severity", "score", "method", "source"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


@dataclass(frozen=True, slots=True)
class Vulnerability:
    """One finding: a vulnerability in one or more components."""

    id: str
    aliases: tuple[str, ...] = ()
    ratings: tuple[Rating, ...] = ()
    state: str | None = None
    """VEX analysis state (``not_affected``, ``in_triage``, ...) where the document gives one."""
    components: tuple[str, ...] = ()
    """Normalised names of the components it is reported in."""
    advisories: tuple[str, ...] = ()
    """Vendor advisories that cover it (Trivy's ``VendorIDs``: DSA, RHSA, USN, ALAS): one advisory covers
    many vulnerabilities, so these are no aliases and an allow-list entry never matches them."""

    @property
    def ids(self) -> tuple[str, ...]:
        """The id and every alias, canonical (:func:`canonical_id`), each once, the id first."""
        return tuple(dict.fromkeys(canonical_id(i) for i in (self.id, *self.aliases) if i.strip()))

    @property
    def severities(self) -> tuple[str, ...]:
        """Every severity a rating gives, highest first, each once; none when a rating cannot be scored
        (:attr:`Rating.undecided`) and no rating says ``critical``: the highest cannot be told."""
        known = {r.severity for r in self.ratings if r.severity is not None}
        if "critical" not in known and any(r.undecided for r in self.ratings):
            return ()
        return tuple(s for s in reversed(SEVERITY_ORDER) if s in known)

    @property
    def undecided(self) -> bool:
        """Whether its severity cannot be told because a rating gives a vector trtguard cannot score."""
        return not self.severities and any(r.undecided for r in self.ratings)

    @property
    def affected(self) -> bool:
        """False only when a VEX analysis says the component is not exposed (not affected, a false
        positive, resolved); no analysis, ``in_triage`` and ``exploitable`` count as affected."""
        return self.state not in NOT_AFFECTED_STATES

    def to_json(self) -> dict[str, Any]:
        """The vulnerability as CEL sees it; ``severity`` and ``severities`` only where a rating gives one."""
        data: dict[str, Any] = {
            "id": canonical_id(self.id),
            "ids": list(self.ids),
            "affected": self.affected,
            "ratings": [r.to_json() for r in self.ratings],
            "components": list(self.components),
        }
        if self.severities:
            data["severity"] = self.severities[0]
            data["severities"] = list(self.severities)
        if self.state is not None:
            data["state"] = self.state
        if self.advisories:
            data["advisories"] = list(self.advisories)
        return data


@dataclass(frozen=True, slots=True)
class ScanDocument:
    """An SBOM or vulnerability scan, read into the shape policies judge."""

    format: ScanFormat
    scanned_at: datetime | None
    """When the document was made: the scan time, or the SBOM's creation time."""
    database_at: datetime | None = None
    """When the vulnerability database the scanner used was built, where the document says."""
    components: tuple[Component, ...] = ()
    vulnerabilities: tuple[Vulnerability, ...] | None = None
    """None when the document is not a vulnerability scan, or cannot tell (see :attr:`unknowns`)."""
    skipped: tuple[tuple[str, str], ...] = ()
    """(component, reason) of every package the scanner says it did not audit."""
    scanner: str | None = None
    unknowns: tuple[str, ...] = field(default=())
    """What the document cannot tell, in words: why a field CEL might read is absent."""
    absent: tuple[tuple[str, str], ...] = ()
    """(field, why) of optional fields of the ``scan`` variable left out though the document has something
    in their place (a database version that is no time): the reason a condition reading one cannot tell."""
    about: tuple[str, ...] = ()
    """The image digests (``sha256:<hex>``) the document's own content says it describes (Trivy's
    ``RepoDigests``, a CycloneDX ``metadata.component`` that is an OCI image); empty when it names none. A
    document about another image than its statement's subject is refused
    (:func:`verifier.verification.verify_predicate`)."""
    role: DocumentRole = "sbom"
    """What the document is (:data:`DocumentRole`): a ``scan`` only when it says it is one (cosign's
    vulnerability predicate, or a CycloneDX document reporting a finding no VEX analysis clears), whether or
    not it can tell what it found; a CycloneDX document whose every finding an analysis clears (not
    affected, a false positive, resolved) is ``vex``."""

    @property
    def is_scan(self) -> bool:
        """Whether the document says it is a vulnerability scan."""
        return self.role == "scan"

    @property
    def freshness(self) -> datetime | None:
        """The time a ``maxAge`` is measured from: the older of the scan and its database, when known."""
        times = [t for t in (self.scanned_at, self.database_at) if t is not None]
        return min(times) if self.scanned_at is not None else None

    def to_json(self) -> dict[str, Any]:
        """The ``scan`` variable of attestation conditions (docs/scans.md); what is unknown is absent."""
        data: dict[str, Any] = {
            "format": self.format,
            "skipped": [{"name": name, "reason": reason} for name, reason in self.skipped],
        }
        if self.scanner is not None:
            data["scanner"] = self.scanner
        if self.scanned_at is not None:
            data["scanned_at"] = _rfc3339(self.scanned_at)
        if self.database_at is not None:
            data["database_at"] = _rfc3339(self.database_at)
        if self.components:
            data["components"] = [c.to_json() for c in self.components]
        if self.vulnerabilities is not None:
            data["vulnerabilities"] = [v.to_json() for v in self.vulnerabilities]
        return data


def severity_unknowns(vulnerabilities: Iterable[Vulnerability]) -> list[str]:
    """What a list of findings cannot tell about severities: one line naming those without any."""
    found = list(vulnerabilities)
    undecided = [canonical_id(v.id) for v in found if v.undecided]
    lines = (
        [
            f"the highest severity of {', '.join(undecided[:5])}{' and more' if len(undecided) > 5 else ''} "
            "cannot be told: a rating gives a CVSS vector without a score, not one of v3 to compute it from"
        ]
        if undecided
        else []
    )
    missing = [canonical_id(v.id) for v in found if not v.severities and not v.undecided]
    if not missing:
        return lines
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return [f"no rating gives a severity for {shown}", *lines]


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
