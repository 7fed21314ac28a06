"""trtguard/audit/report/_chart.py: matplotlib's SVG of accuracy over engine versions, checked script-free."""

from __future__ import annotations

import pytest

from trtguard.audit.report._chart import Point, accuracy_chart, checked_svg
from verifier.base._errors import VerificationError

POINTS = [
    Point(1, ("fp16",), {"top1_acc": 0.781, "top5_acc": 0.94}),
    Point(2, ("fp16", "int8"), {"top1_acc": 0.776}),
    Point(3, ("fp16", "int8"), {}),
]


def test_the_chart_is_inline_svg_with_text_and_no_script() -> None:
    svg = accuracy_chart(POINTS, title="Accuracy")

    assert svg is not None and svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<script" not in svg.lower() and "<?xml" not in svg and "<!DOCTYPE" not in svg
    # Text stays text (selectable, searchable), not glyph paths.
    for label in ("top1_acc", "top5_acc", "v2", "fp16+int8", "Accuracy"):
        assert label in svg
    assert checked_svg(svg) == svg
    assert accuracy_chart(POINTS, title="Accuracy") == svg  # reproducible: no date, fixed ids


def test_no_accuracy_means_no_chart() -> None:
    assert accuracy_chart([Point(1, ("fp16",), {})], title="Accuracy") is None


@pytest.mark.parametrize(
    ("svg", "problem"),
    [
        ('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "<script>"),
        ('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>', "event attribute onload"),
        (
            '<svg xmlns="http://www.w3.org/2000/svg" xmlns:x="http://www.w3.org/1999/xlink">'
            '<use x:href="https://198.51.100.1/a.svg#b"/></svg>',
            "links outside",
        ),
        ('<svg xmlns="http://www.w3.org/2000/svg"><rect fill="url(https://x/y)"/></svg>', "outside resource"),
        ('<svg xmlns="http://www.w3.org/2000/svg"><style>@import "x.css";</style></svg>', "style loads"),
        ('<svg xmlns="http://www.w3.org/2000/svg"><foreignObject/></svg>', "<foreignobject>"),
        ("<svg", "not well-formed"),
    ],
)
def test_anything_active_in_an_svg_rejects_it(svg: str, problem: str) -> None:
    with pytest.raises(VerificationError, match=problem):
        checked_svg(svg)
