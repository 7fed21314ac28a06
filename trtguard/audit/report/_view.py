"""What one report shows: the package's verification, then (only when it verified) what the package holds.

:func:`build_view` reads the archive once with the package's own limits, runs the package verifier over
those members, and reads the contents only when every check passed: a package that fails verification
yields a view with its findings and nothing else, so that no content of it can look approved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trtguard.audit.package.archive import ArchiveLimits, read_archive
from trtguard.audit.package.contents import (
    INDEX,
    SIGNATURE,
    EvidencePackagePredicate,
    parse_index,
    parse_predicate,
)
from trtguard.audit.package.verify import Anchor, EvidencePackageReport, PackageVerifier
from trtguard.audit.report._chart import Point, accuracy_chart
from trtguard.audit.report._decisions import Decisions, read_decisions, read_records
from trtguard.audit.report._engines import EngineView, RunningEngine, read_engines, running_now
from verifier.base import hash_file
from verifier.crypto import Envelope, PublicKey, statement_from_envelope

#: Policy file contents shown in full up to this many characters each (then cut, and said so).
POLICY_TEXT_LIMIT = 20_000


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """One file of the policy snapshot: its path in the package, its SHA-256 and its text."""

    path: str
    sha256: str
    text: str
    cut: bool


@dataclass(frozen=True, slots=True)
class Contents:
    """What a verified package holds, ready to render."""

    predicate: EvidencePackagePredicate
    decisions: Decisions
    engines: tuple[EngineView, ...]
    policy_files: tuple[PolicyFile, ...]
    chart_svg: str | None
    chart_problem: str | None
    #: The first screen: one card per engine each workload runs now.
    running: tuple[RunningEngine, ...] = ()


@dataclass(frozen=True, slots=True)
class ReportView:
    """The verification report, and the contents when the package verified (``None`` otherwise)."""

    verification: EvidencePackageReport
    contents: Contents | None
    generated_at: datetime
    archive_name: str

    @property
    def verified(self) -> bool:
        """True when every check of the package passed."""
        return self.verification.ok and self.contents is not None


def build_view(
    archive: Path,
    key: PublicKey,
    *,
    anchors: Sequence[Anchor] = (),
    limits: ArchiveLimits | None = None,
    now: datetime | None = None,
) -> ReportView:
    """Verify the package at ``archive`` with ``key`` and read what it holds when it verified.

    Raises what :func:`trtguard.audit.package.verify_evidence_package` raises for a file that is no
    package or cannot be read safely; a package whose checks fail gives a view without contents.
    """
    members = read_archive(archive, limits or ArchiveLimits())
    digest = hash_file(archive).sha256
    report = PackageVerifier(str(archive), members, key, archive_sha256=digest).run(anchors)
    contents = _contents(members) if report.ok else None
    return ReportView(report, contents, now or datetime.now(UTC), archive.name)


def _contents(members: Mapping[str, bytes]) -> Contents:
    statement = statement_from_envelope(Envelope.from_json(members[SIGNATURE], location=SIGNATURE))
    predicate = parse_predicate(statement.predicate)
    records = read_records(members[predicate.log.file])
    decisions = read_decisions(records, predicate.selection.records)
    engines = read_engines(predicate.engines, members, decisions.admissions)
    chart_svg, chart_problem = _chart(engines)
    return Contents(
        predicate=predicate,
        decisions=decisions,
        engines=tuple(engines),
        policy_files=tuple(_policy_files(members)),
        chart_svg=chart_svg,
        chart_problem=chart_problem,
        running=tuple(running_now(decisions.in_force, engines)),
    )


def _chart(engines: Sequence[EngineView]) -> tuple[str | None, str | None]:
    points = [
        Point(
            version=engine.version,
            precisions=tuple(engine.builds[0].precisions),
            accuracy={metric.metric: metric.value for metric in engine.builds[0].manifest.accuracy},
        )
        for engine in engines
        if engine.builds
    ]
    if not points:
        return None, "no engine in the package carries a build manifest"
    svg = accuracy_chart(points, title="Accuracy by engine version (build manifests)")
    return (svg, None) if svg is not None else (None, "no build manifest records an accuracy figure")


def _policy_files(members: Mapping[str, bytes]) -> list[PolicyFile]:
    index = {entry.path: entry.sha256 for entry in parse_index(members[INDEX]).files}
    files = []
    for path in sorted(name for name in members if name.startswith("policies/")):
        text = members[path].decode("utf-8", errors="replace")
        files.append(
            PolicyFile(path, index.get(path, ""), text[:POLICY_TEXT_LIMIT], len(text) > POLICY_TEXT_LIMIT)
        )
    return files
