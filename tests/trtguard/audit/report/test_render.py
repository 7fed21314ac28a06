"""trtguard/audit/report/_render.py and its templates: a self-contained, escaped, accessible page; a failed
package renders as failed; hostile strings out of a real package stay text."""

from __future__ import annotations

import dataclasses
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.trtguard.audit.package.world import World
from tests.trtguard.audit.report.conftest import INVISIBLE, WRITTEN_OUT, hostile_strings
from trtguard.audit.report import CONTENT_SECURITY_POLICY, build_view, render_html, write_report
from trtguard.audit.report._render import visible
from verifier.base._errors import InputError
from verifier.base._visible import hidden

#: Every element a report may contain: the page's own and those of matplotlib's SVG.
ALLOWED_TAGS = frozenset(
    {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "header",
        "main",
        "section",
        "article",
        "h1",
        "h2",
        "h3",
        "p",
        "div",
        "span",
        "strong",
        "code",
        "pre",
        "br",
        "ul",
        "li",
        "table",
        "caption",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "figure",
        "figcaption",
        "a",
        "svg",
        "g",
        "defs",
        "path",
        "clippath",
        "use",
        "text",
        "rect",
        "metadata",
        "rdf:rdf",
        "ns2:work",
        "dc:type",
        "dc:format",
        "ns4:work",
        "cc:work",
        "dc:title",
    }
)


class Page(HTMLParser):
    """The elements, attributes and text of a page."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def tags(self) -> Counter[str]:
        return Counter(tag for tag, _ in self.elements)

    def with_class(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.elements if name in (attrs.get("class") or "").split()]


def test_the_page_is_self_contained_strict_and_accessible(world: World, resnet_package: Path) -> None:
    page = Page(render_html(build_view(resnet_package, world.exporter.public_key())))

    tag, attrs = page.elements[2]  # html, head, then the policy before anything else
    assert (tag, attrs.get("http-equiv"), attrs.get("content")) == (
        "meta",
        "Content-Security-Policy",
        CONTENT_SECURITY_POLICY,
    )
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "script-src" not in CONTENT_SECURITY_POLICY
    assert page.elements[0] == ("html", {"lang": "en"})
    assert not {"script", "link", "img", "iframe", "object", "embed", "base", "form"} & set(page.tags)
    for _, attrs in page.elements:
        assert not any(name.startswith("on") for name in attrs)
        for name in ("href", "src", "xlink:href", "action"):
            assert (attrs.get(name) or "#").startswith("#"), attrs
    style = "".join(page.text)
    assert "@media print" in style and "@import" not in style and "url(" not in style
    assert page.tags["h1"] == 1 and page.tags["h2"] >= 7
    headers = [attrs for tag, attrs in page.elements if tag == "th"]
    assert headers and all(attrs.get("scope") in ("col", "row", "rowgroup") for attrs in headers)
    assert page.tags["svg"] == 1


def test_a_failed_package_is_red_and_shows_nothing_that_looks_approved(
    world: World, tampered_package: Path
) -> None:
    html = render_html(build_view(tampered_package, world.exporter.public_key()))
    page = Page(html)
    text = " ".join("".join(page.text).split())

    assert "VERIFICATION FAILED: do not rely on this package." in text
    assert page.with_class("failed") and page.with_class("failures")
    assert not page.with_class("verified") and not page.with_class("status-pass")
    assert "VERIFIED" not in text.replace("VERIFICATION FAILED", "")
    assert not {"✓", "✔", "☑", "✅"} & set(text)
    # Neither the timeline, the engines nor the policies of an unverified package are shown.
    sections = {attrs.get("id") for tag, attrs in page.elements if tag == "section"}
    assert sections == {"verification"}
    assert "Timeline" not in text and "admitted" not in text.lower()
    assert "<title>FAILED evidence package" in html


def test_hostile_strings_from_a_real_package_stay_text(world: World, hostile_package: Path) -> None:
    view = build_view(hostile_package, world.exporter.public_key())
    assert view.verified
    html = render_html(view)
    page = Page(html)
    text = "".join(page.text)

    assert set(page.tags) <= ALLOWED_TAGS, set(page.tags) - ALLOWED_TAGS
    assert page.tags["svg"] == 1 and page.tags["style"] == 2  # the page's and the chart's
    for _, attrs in page.elements:
        assert not any(name.startswith("on") for name in attrs), attrs
        assert not any((value or "").lstrip().lower().startswith("javascript:") for value in attrs.values())
    strings = hostile_strings()
    for name in ("script", "attribute_break", "single_quote_break", "svg_onload", "template_syntax"):
        assert visible(strings[name]) in text, name  # shown as written, as text
    assert "javascript:window.__pwned='url'" in text and "@import" in text
    # Characters that reorder or hide text are written out instead.
    assert "\u202e" not in html and "\u200b" not in html
    assert "admin<U+202E>gpj.exe<U+202C>" in text and "alice<U+200B>@example.com" in text
    # tag characters, line and paragraph separators, NEL, a soft hyphen, variation selectors, a Hangul filler
    # and an escape sequence in the requester's groups: written out too, none left in the page
    for name in INVISIBLE:
        assert WRITTEN_OUT[name] in text, name
    raw = {c for name in INVISIBLE for c in strings[name] if hidden(c)}
    assert not raw & set(html), sorted(f"U+{ord(c):04X}" for c in raw & set(html))


def test_write_report_refuses_to_overwrite(world: World, resnet_package: Path, tmp_path: Path) -> None:
    output = tmp_path / "report.html"
    view = write_report(resnet_package, world.exporter.public_key(), output)
    assert view.verified and output.read_text().startswith("<!DOCTYPE html>")

    with pytest.raises(InputError, match="already exists"):
        write_report(resnet_package, world.exporter.public_key(), output)
    write_report(resnet_package, world.exporter.public_key(), output, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_hostile_strings_in_build_records_verifications_and_approvals_stay_text(
    world: World, resnet_package: Path
) -> None:
    # The signed attestations of a package are untrusted too: a build manifest's free-text fields, a GPU
    # verification's failed check and an approval's comment, replaced here in a real package's view.
    view = build_view(resnet_package, world.exporter.public_key())
    assert view.contents is not None
    s = hostile_strings()
    engine = view.contents.engines[1]  # the calibrated INT8 engine
    manifest = engine.builds[0].manifest
    assert manifest.calibration is not None and manifest.calibration.dataset is not None
    dataset = manifest.calibration.dataset.model_copy(
        update={"name": s["script"], "uri": s["javascript_url"], "sampling": s["attribute_break"]}
    )
    hostile_manifest = manifest.model_copy(
        update={
            "audit_id": s["svg_onload"],
            "onnx": manifest.onnx.model_copy(update={"name": s["single_quote_break"]}),
            "calibration": manifest.calibration.model_copy(update={"dataset": dataset}),
        }
    )
    fp16 = view.contents.engines[0]
    verification = fp16.verifications[0]
    failed = verification.checks[0].model_copy(update={"status": "fail", "detail": s["style_import"]})
    approval = fp16.approvals[0].model_copy(
        update={"comment": s["bidi_override"], "reference": s["javascript_url"], "approver": s["script"]}
    )
    engines = (
        dataclasses.replace(
            fp16,
            verifications=(verification.model_copy(update={"checks": [failed], "result": "fail"}),),
            approvals=(approval,),
        ),
        dataclasses.replace(
            engine, builds=(dataclasses.replace(engine.builds[0], manifest=hostile_manifest),)
        ),
        *view.contents.engines[2:],
    )
    hostile = dataclasses.replace(view, contents=dataclasses.replace(view.contents, engines=engines))

    html = render_html(hostile)
    page = Page(html)
    text = "".join(page.text)

    assert not {"script", "img", "link", "iframe", "object"} & set(page.tags)
    for _, attrs in page.elements:
        assert not any(name.startswith("on") for name in attrs), attrs
        assert not any((value or "").lstrip().lower().startswith("javascript:") for value in attrs.values())
    for name in ("script", "javascript_url", "attribute_break", "svg_onload", "single_quote_break"):
        assert visible(s[name]) in text, name
    assert "admin<U+202E>gpj.exe<U+202C>" in text and "\u202e" not in html
    assert "GPU verification: FAILED" in text


def test_a_large_package_lists_a_bounded_number_of_records_and_says_where_the_rest_are(
    world: World, resnet_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = build_view(resnet_package, world.exporter.public_key())
    assert view.contents is not None
    carried, denied = len(view.contents.decisions.chain), len(view.contents.decisions.denials)
    assert carried > 2 and denied >= 1
    whole = render_html(view)
    assert whole.count('<table class="chain">') == 1 and "are listed;" not in whole
    monkeypatch.setattr("trtguard.audit.report._render.LISTED_ROWS", 1)
    page = render_html(view)
    chain = page[
        page.index('<table class="chain">') : page.index("</table>", page.index('<table class="chain">'))
    ]
    assert chain.count('<th scope="row">') == 1  # one record listed, of the records carried
    assert f"The first 1 of the {carried} records carried are listed" in page
    assert ("of the " + str(denied) + " denials are listed" in page) == (denied > 1)
    admitted = len(view.contents.decisions.admissions)
    assert ("of the " + str(admitted) + " admitted changes are listed" in page) == (admitted > 1)
