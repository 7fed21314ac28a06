"""The report's chart: accuracy and precisions over an engine's versions, as inline SVG without script.

Drawn with matplotlib's SVG backend on a figure of its own (no pyplot state, no browser runtime). Text is
kept as SVG text (selectable, small) and the labels are made here from numbers, precision names and metric
names (pattern-checked by the manifest model), never from free text out of the package. The SVG is then
checked element by element: anything that could run or load something (a script, a foreign object, an
event attribute, a link or style pointing outside the document) rejects the chart instead of reaching the
page.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from xml.etree import ElementTree

from verifier.base import VerificationError

_FORBIDDEN_TAGS: Final = frozenset({"script", "foreignobject", "iframe", "object", "embed", "a", "image"})
_EXTERNAL: Final = re.compile(r"url\(\s*['\"]?(?!#)", re.IGNORECASE)
_PROLOGUE: Final = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Point:
    """One engine version: its number, its precisions and its accuracy figures by metric."""

    version: int
    precisions: tuple[str, ...]
    accuracy: dict[str, float]


def accuracy_chart(points: Sequence[Point], *, title: str) -> str | None:
    """The SVG of accuracy by metric over ``points``; ``None`` when no version records an accuracy."""
    metrics = sorted({metric for point in points for metric in point.accuracy})
    if not metrics:
        return None
    # Imported here: matplotlib takes a noticeable time to load and only a report needs it.
    from matplotlib import rc_context  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "trtguard-report", "font.size": 9}):
        figure = Figure(figsize=(7.0, 2.8), layout="constrained")
        axes = figure.subplots()
        xs = [point.version for point in points]
        for metric, marker in zip(metrics, "osD^v<>", strict=False):
            values = [point.accuracy.get(metric) for point in points]
            shown = [(x, y) for x, y in zip(xs, values, strict=True) if y is not None]
            axes.plot(
                [x for x, _ in shown], [y for _, y in shown], marker=marker, linewidth=1.5, label=metric
            )
        axes.set_xticks(xs, [f"v{p.version}\n{'+'.join(p.precisions) or '?'}" for p in points])
        axes.set_xlabel("engine version and precisions")
        axes.set_ylabel("accuracy")
        axes.set_title(title)
        axes.grid(True, linewidth=0.4, alpha=0.6)
        axes.legend(loc="best", frameon=False)
        output = io.StringIO()
        figure.savefig(output, format="svg", metadata={"Date": None, "Creator": None})
    return checked_svg(output.getvalue())


def checked_svg(text: str) -> str:
    """``text`` (an SVG document) without its XML prologue, after checking that nothing in it is active.

    Raises :class:`VerificationError` for a script, a foreign object, a link, an ``on…`` attribute, or a
    reference or style that points outside the document.
    """
    svg = _PROLOGUE.sub("", text, count=1)
    try:
        # matplotlib's own output, drawn from numbers and fixed labels: no entity tricks to defuse here.
        root = ElementTree.fromstring(svg)  # noqa: S314
    except ElementTree.ParseError as error:
        raise VerificationError(
            f"the chart is not well-formed SVG: {error}", location="report chart"
        ) from None
    for element in root.iter():
        tag = element.tag.rsplit("}", 1)[-1].lower()
        if tag in _FORBIDDEN_TAGS:
            raise VerificationError(f"the chart holds a <{tag}> element", location="report chart")
        for name, value in element.attrib.items():
            local = name.rsplit("}", 1)[-1].lower()
            if local.startswith("on"):
                raise VerificationError(
                    f"the chart holds an event attribute {local}", location="report chart"
                )
            if local == "href" and not value.startswith("#"):
                raise VerificationError("the chart links outside itself", location="report chart")
            if _EXTERNAL.search(value):
                raise VerificationError("the chart refers to an outside resource", location="report chart")
        if tag == "style" and (_EXTERNAL.search(element.text or "") or "@import" in (element.text or "")):
            raise VerificationError("the chart's style loads an outside resource", location="report chart")
    return svg
