"""What checking an evidence package found: findings by topic, what the package cannot show, the report."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from verifier.base import TrtguardError

Status = Literal["pass", "fail", "note"]
Topic = Literal["package", "decisions", "selection", "anchors", "policy", "engines", "images"]
#: Order in which findings are reported.
TOPICS: Final[tuple[Topic, ...]] = (
    "package",
    "decisions",
    "selection",
    "anchors",
    "policy",
    "engines",
    "images",
)
#: Names listed in one finding (before "and N more").
LISTED: Final = 8


@dataclass(frozen=True, slots=True)
class Finding:
    """One outcome: a check that passed or failed, or a note about something the package cannot show."""

    status: Status
    topic: Topic
    message: str

    def to_json(self) -> dict[str, str]:
        """``{"status", "topic", "message"}``."""
        return {"status": self.status, "topic": self.topic, "message": self.message}


@dataclass(frozen=True, slots=True)
class EvidencePackageReport:
    """The outcome of :func:`trtguard.audit.package.verify_evidence_package`."""

    archive: str
    key_id: str
    findings: tuple[Finding, ...]
    proves: tuple[str, ...]
    does_not_prove: tuple[str, ...]
    selection: str | None = None
    exported_at: str | None = None
    #: SHA-256 of the archive file as read (the signature does not cover the archive's own bytes).
    archive_sha256: str | None = None

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not any(finding.status == "fail" for finding in self.findings)

    @property
    def failures(self) -> tuple[Finding, ...]:
        """The checks that failed."""
        return tuple(finding for finding in self.findings if finding.status == "fail")

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON object."""
        return {
            "archive": self.archive,
            "ok": self.ok,
            "key_id": self.key_id,
            "archive_sha256": self.archive_sha256,
            "selection": self.selection,
            "exported_at": self.exported_at,
            "findings": [finding.to_json() for finding in self.findings],
            "proves": list(self.proves),
            "does_not_prove": list(self.does_not_prove),
        }


class Findings:
    """The findings of the checks so far, in the order found, and ``limits``: what the package cannot show."""

    def __init__(self) -> None:
        self.items: list[Finding] = []
        self.limits: list[str] = []

    def ok(self, topic: Topic, message: str) -> None:
        """A check that passed."""
        self.items.append(Finding("pass", topic, message))

    def fail(self, topic: Topic, message: str) -> None:
        """A check that failed."""
        self.items.append(Finding("fail", topic, message))

    def note(self, topic: Topic, message: str) -> None:
        """Something the package cannot show."""
        self.items.append(Finding("note", topic, message))

    def failures(self, topic: Topic) -> list[Finding]:
        """The failed checks of ``topic``."""
        return [f for f in self.items if f.status == "fail" and f.topic == topic]

    def proven(self) -> list[Finding]:
        """The passed checks that count as proven: outside the seal, in topics where nothing failed."""
        failed = {finding.topic for finding in self.items if finding.status == "fail"}
        return [
            f for f in self.items if f.status == "pass" and f.topic != "package" and f.topic not in failed
        ]


def by_topic(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in :data:`TOPICS` order, and in the order found within a topic."""
    return sorted(findings, key=lambda finding: TOPICS.index(finding.topic))


def listed(items: Iterable[str]) -> str:
    """Up to eight names, then "and N more"."""
    names = list(items)
    shown = ", ".join(names[:LISTED])
    return shown + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


def error_text(error: BaseException) -> str:
    """A trtguard error's message, or any other exception's type and text."""
    return error.message if isinstance(error, TrtguardError) else f"{type(error).__name__}: {error}"
