"""Rendering a :class:`~trtguard.audit.report._view.ReportView` to one self-contained HTML page.

Jinja2 with autoescape on for every template and undefined names refused: everything out of a package is
untrusted text, escaped wherever it lands (element text and attribute values alike). The only markup that is
not escaped is the chart, which :mod:`trtguard.audit.report._chart` drew and checked, and the small spans the
filters below build with :class:`markupsafe.Markup` around escaped values. The page loads nothing: a strict
Content-Security-Policy (no script, no connection, styles inline, images only as ``data:``) is its first
element, and nothing from the package ever becomes a link.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from trtguard.audit.report._view import ReportView
from verifier.base import visible as shown

#: The page's policy: nothing may load or run; inline styles (the page's and the chart's) and data: images.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
)
_DIMENSION_UNKNOWN: Final = "?"
#: The controls the page keeps (whitespace in element text); every other invisible, reordering or
#: line-breaking code point is shown as ``<U+202E>`` (:mod:`verifier.base._visible`).
_PAGE_KEEPS: Final = "\t\n"


#: Most admitted changes, chain records and denials a page lists: the package holds every record, and a page
#: of a large one (100,000 records) stays one that a browser opens, and says where the rest are.
LISTED_ROWS: Final = 500


def render_html(view: ReportView) -> str:
    """The report page of ``view``."""
    environment = _environment()
    template = environment.get_template("report.html.j2")
    return template.render(view=view, csp=CONTENT_SECURITY_POLICY, listed=LISTED_ROWS)


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("trtguard.audit.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    environment.filters.update(
        digest=digest,
        reference=reference,
        size=size,
        shape=shape,
        when=when,
        listing=listing,
    )
    return environment


def visible(text: str) -> str:
    """``text`` with every invisible, reordering or line-breaking character but tab and newline written out
    as ``<U+XXXX>`` (:func:`verifier.base.visible`).

    Package text could otherwise hide or reverse what an auditor reads (a right-to-left override in a
    requester's name, "Trojan Source" style); escaping alone does not stop that.
    """
    return shown(text, keep=_PAGE_KEEPS)


def _finalize(value: object) -> object:
    """Applied by Jinja2 to every ``{{ … }}`` value before escaping; markup built here passes unchanged."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


def digest(value: object) -> Markup:
    """A digest shortened on screen (CSS), whole in the text (copy) and in the title (hover)."""
    text = visible(str(value))
    return Markup('<span class="digest" title="{0}">{0}</span>').format(text)


def reference(value: object) -> Markup:
    """An image or engine reference: the repository in full, its digest shortened as :func:`digest`."""
    text = visible(str(value))
    name, at, pinned = text.rpartition("@")
    if not at:
        return Markup('<span class="ref">{0}</span>').format(text)
    return Markup('<span class="ref" title="{0}">{1}@<span class="digest">{2}</span></span>').format(
        text, name, pinned
    )


def size(value: int | None) -> str:
    """Bytes in words: ``1.0 GiB (1073741824 bytes)``."""
    if value is None:
        return "not recorded"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit} ({value} bytes)"
    return f"{value} bytes"


def shape(dimensions: Sequence[int]) -> str:
    """``1x3x224x224`` (with a multiplication sign); a dynamic dimension (-1) shows as ``?``."""
    return "\u00d7".join(_DIMENSION_UNKNOWN if d < 0 else str(d) for d in dimensions) or "scalar"


def when(value: datetime | None) -> str:
    """A time in UTC to the second: ``2026-11-29 12:00:00 UTC``."""
    if value is None:
        return "not recorded"
    moment = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def listing(values: Sequence[object], empty: str = "none") -> str:
    """``a, b, c`` or ``empty``."""
    return ", ".join(str(value) for value in values) if values else empty
