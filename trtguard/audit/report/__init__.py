"""``trtguard evidence report``: one self-contained HTML page an auditor reads, from a verified package.

:func:`write_report` verifies the package first (with the package verifier of
:mod:`trtguard.audit.package`) and puts the outcome at the top of the page. Only a package whose every check
passed has its contents rendered: what it covers, the timeline of admitted engine and image changes with
their change kinds, audit IDs, approvers and requesters, each engine's build record in words with its GPU
verification, a chart of accuracy over the engine versions, the denials, the policy snapshot and the
hash-chain proof. A package that fails renders a red page with the failed checks and nothing else of it.

The page loads nothing and runs nothing (docs/evidence-report.md): all package content is escaped by the
templates, the chart is script-free SVG, and a Content-Security-Policy forbids scripts and requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from trtguard.audit.package.archive import ArchiveLimits
from trtguard.audit.package.verify import Anchor
from trtguard.audit.report._render import CONTENT_SECURITY_POLICY, render_html
from trtguard.audit.report._view import ReportView, build_view
from verifier.base import InputError
from verifier.crypto import PublicKey

__all__ = ["CONTENT_SECURITY_POLICY", "ReportView", "build_view", "render_html", "write_report"]


def write_report(
    archive: Path,
    key: PublicKey,
    output: Path,
    *,
    anchors: Sequence[Anchor] = (),
    limits: ArchiveLimits | None = None,
    overwrite: bool = False,
    now: datetime | None = None,
) -> ReportView:
    """Verify ``archive`` with ``key`` and write its report page to ``output``; returns what was rendered.

    The page is written whether or not the package verified (a failed one says so); callers check
    ``view.verified``. Raises :class:`InputError` when ``output`` exists and ``overwrite`` is False or
    cannot be written, and
    what :func:`trtguard.audit.package.verify_evidence_package` raises for a file that is no package.
    """
    if output.exists() and not overwrite:
        raise InputError(
            "the report file already exists", location=str(output), hint="choose another name or pass --force"
        )
    view = build_view(archive, key, anchors=anchors, limits=limits, now=now)
    page = render_html(view)
    partial = output.with_name(output.name + ".partial")
    try:
        partial.write_text(page, encoding="utf-8")
        partial.replace(output)
    except OSError as error:  # a missing folder, OUT naming a folder, a full disk: one line, no partial page
        partial.unlink(missing_ok=True)
        raise InputError(f"cannot write the report: {error.strerror}", location=str(output)) from None
    return view
