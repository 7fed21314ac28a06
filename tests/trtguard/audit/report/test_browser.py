"""The evidence report in a real browser: Debian's chromium, headless, driven by Playwright.

Each page comes from a package made by the evidence tests' end-to-end flow. JavaScript stays enabled, so
that a hostile string that became script would run; every request is intercepted and recorded (only the
file itself may load); console messages and page errors are collected. A screenshot of each page is saved
in the test's output folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, sync_playwright

from tests.trtguard.audit.package.world import World
from tests.trtguard.audit.report.conftest import INVISIBLE, WRITTEN_OUT, hostile_strings
from trtguard.audit.report import write_report
from verifier.base._visible import hidden

CHROMIUM = Path("/usr/bin/chromium")

OpenReport = Callable[[Path, Path], "Opened"]


@dataclass
class Opened:
    """A page opened from a file, with what it tried to do."""

    page: Page
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return str(self.page.inner_text("body"))


@pytest.fixture(scope="module")
def browser(
    resnet_package: Path, hostile_package: Path, tampered_package: Path, fp16_package: Path
) -> Iterator[Browser]:
    # The packages are made first: they run asyncio, which cannot start inside Playwright's event loop.
    if not CHROMIUM.exists():
        reason = f"Debian's chromium is not installed at {CHROMIUM} (`make setup` installs APT_PACKAGES)"
        if os.environ.get("TRTGUARD_REQUIRE_CHROMIUM"):
            pytest.fail(reason)
        pytest.skip(reason)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def open_report(browser: Browser) -> Iterator[OpenReport]:
    contexts: list[BrowserContext] = []

    def open_file(path: Path, screenshot: Path) -> Opened:
        context = browser.new_context(java_script_enabled=True, viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page)
        url = path.resolve().as_uri()

        def route(request_route: Route) -> None:
            opened.requests.append(request_route.request.url)
            if request_route.request.url == url:
                request_route.continue_()
            else:
                request_route.abort()

        context.route("**/*", route)
        page.on("console", lambda message: opened.console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        page.goto(url, wait_until="load")
        page.screenshot(path=str(screenshot), full_page=True)
        return opened

    yield open_file
    for context in contexts:
        context.close()


def _assert_inert(opened: Opened, path: Path) -> None:
    assert opened.requests == [path.resolve().as_uri()], "nothing but the file itself may load"
    assert opened.console == [] and opened.errors == []
    assert opened.page.evaluate("typeof window.__pwned") == "undefined"


def test_a_verified_report_shows_the_key_facts(
    world: World, resnet_package: Path, tmp_path: Path, open_report: OpenReport
) -> None:
    report = tmp_path / "report.html"
    write_report(resnet_package, world.exporter.public_key(), report)

    opened = open_report(report, tmp_path / "report.png")

    _assert_inert(opened, report)
    assert (tmp_path / "report.png").stat().st_size > 10_000
    text = opened.text
    headings = opened.page.locator("h2").all_inner_texts()
    assert headings[0] == "Verification"  # the outcome comes first
    assert text.index("VERIFIED: every check of this package passed.") < text.index("What the package covers")
    for fact in (
        "every decision about workload prod/resnet",
        "DEMO-fp16",
        "DEMO-int8-calibrated",
        "alice@example.com",
        "TensorRTMajorUpgrade",
        "kubernetes-admin",
        "TensorRT 10.5.0.18, CUDA",
        "NVIDIA H200",
        "passed: 1 of 1 field check(s) passed",
        "no calibration evidence",
        "top1_acc",
        "Hash-chain proof",
    ):
        assert fact in text, fact
    assert opened.page.locator("figure.chart svg").count() == 1
    # A digest is shortened on screen but whole in the text and the title.
    digest = opened.page.locator("#engine-1 .digest").first
    full = world.engine_digests["fp16"]
    assert digest.inner_text() == full and digest.get_attribute("title") == full
    assert digest.bounding_box()["width"] < 200  # type: ignore[index]
    opened.page.emulate_media(media="print")
    assert digest.evaluate("e => getComputedStyle(e).maxWidth") == "none"  # printed whole
    # On a sheet's width (A4 at 96 dpi, less margins) nothing sticks out, and the page prints.
    opened.page.set_viewport_size({"width": 700, "height": 1000})
    assert opened.page.evaluate("document.documentElement.scrollWidth") <= 700
    opened.page.pdf(path=str(tmp_path / "report.pdf"), format="A4")
    assert (tmp_path / "report.pdf").read_bytes().startswith(b"%PDF")


def test_hostile_strings_stay_inert_in_the_browser(
    world: World, hostile_package: Path, tmp_path: Path, open_report: OpenReport
) -> None:
    report = tmp_path / "hostile.html"
    write_report(hostile_package, world.exporter.public_key(), report)

    opened = open_report(report, tmp_path / "hostile.png")

    _assert_inert(opened, report)
    assert "<script>window.__pwned = 'script'</script>" in opened.text
    assert opened.page.locator("body script, body img, body iframe").count() == 0
    # what the browser shows of invisible and line-breaking characters: written out, none of them left
    for name in INVISIBLE:
        assert WRITTEN_OUT[name] in opened.text, name
    strings = hostile_strings()
    assert not {c for name in INVISIBLE for c in strings[name] if hidden(c)} & set(opened.text)


def test_a_tampered_package_renders_red_and_unapproved(
    world: World, tampered_package: Path, tmp_path: Path, open_report: OpenReport
) -> None:
    report = tmp_path / "tampered.html"
    write_report(tampered_package, world.exporter.public_key(), report)

    opened = open_report(report, tmp_path / "tampered.png")

    _assert_inert(opened, report)
    banner = opened.page.locator(".banner")
    assert banner.count() == 1
    assert banner.inner_text().startswith("VERIFICATION FAILED: do not rely on this package.")
    red = banner.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).borderTopColor]")
    assert red == ["rgb(122, 0, 22)", "rgb(176, 0, 32)"]
    assert opened.page.locator(".verified, .status-pass, #timeline, #engines").count() == 0
    assert "VERIFIED:" not in opened.text


def test_the_harness_sees_script_and_requests(tmp_path: Path, open_report: OpenReport) -> None:
    # The control: a page without the report's policy that loads an image and runs a script is caught.
    page = tmp_path / "control.html"
    page.write_text(
        '<!DOCTYPE html><html lang="en"><body><img src="http://198.51.100.1/x.png" alt="">'
        "<script>window.__pwned = 1; console.log('ran')</script></body></html>"
    )

    opened = open_report(page, tmp_path / "control.png")

    assert opened.requests == [page.as_uri(), "http://198.51.100.1/x.png"]
    assert opened.page.evaluate("window.__pwned") == 1 and "log: ran" in opened.console


def test_the_first_screen_is_one_card_per_workload_with_whole_digests(
    world: World, resnet_package: Path, tmp_path: Path, open_report: OpenReport
) -> None:
    """Issue 28 item 10: without scrolling, the engine running now, its artifact and engine-file digests in
    full (a screenshot proves only what it shows), precision, toolchain digest, audit ID and approvers."""
    report = tmp_path / "report.html"
    write_report(resnet_package, world.exporter.public_key(), report)
    opened = open_report(report, tmp_path / "report-full.png")
    page = opened.page
    page.screenshot(path=str(tmp_path / "first-screen.png"))  # the viewport only: 1280×900
    assert (tmp_path / "first-screen.png").stat().st_size > 10_000
    headings = page.locator("h2").all_inner_texts()
    assert headings[:2] == ["Verification", "Running now"]
    cards = page.locator("#running article.card")
    assert cards.count() == 1  # one workload, one engine slot
    card = cards.first
    box = card.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900, box  # all of it on the first screen
    text = card.inner_text()
    assert text.startswith("prod/Pod/resnet engine engine"), text
    running = [name for name, digest in world.engine_digests.items() if digest in text]
    assert len(running) == 1, text
    name = running[0]
    assert world.engine_digests[name] in text and world.engine_files[name] in text
    for label in ("Precision", "Toolchain", "Audit ID", "Approvers", "nvcr.io/nvidia/tensorrt@sha256:"):
        assert label in text, label
    # Every value is drawn whole: nothing in the card is cut off (no ellipsis, no overflow).
    for value in card.locator("code.whole").all():
        assert value.evaluate("e => e.scrollWidth <= e.clientWidth + 1 && getComputedStyle(e).textOverflow")
        assert value.evaluate("e => getComputedStyle(e).userSelect") in ("all", "auto")
        value_box = value.bounding_box()
        assert value_box is not None and value_box["x"] + value_box["width"] <= 1280


def test_the_first_screen_shows_what_runs_now_when_the_selection_was_superseded(
    world: World, fp16_package: Path, tmp_path: Path, open_report: OpenReport
) -> None:
    """Attack 28 finding 3: a package selected by engine (fp16, seq 2 and 3) carries in its chain segment the
    INT8 admissions that replaced it; each card names the INT8 engine as running now and flags the selected
    fp16 admission as superseded, on the first screen."""
    report = tmp_path / "fp16.html"
    write_report(fp16_package, world.exporter.public_key(), report)
    opened = open_report(report, tmp_path / "fp16-full.png")
    page = opened.page
    page.screenshot(path=str(tmp_path / "fp16-first-screen.png"))
    _assert_inert(opened, report)
    cards = page.locator("#running article.card")
    assert cards.count() == 2  # prod/Pod/other and prod/Pod/resnet
    fp16, int8 = world.engine_digests["fp16"], world.engine_digests["int8-calibrated"]
    for index, (workload, seq) in enumerate((("prod/Pod/other", 9), ("prod/Pod/resnet", 7))):
        card = cards.nth(index)
        text = card.inner_text()
        assert text.startswith(f"{workload} engine engine"), text
        rows = {
            str(row.locator("th").inner_text()): str(row.locator("td").inner_text())
            for row in card.locator("tr").all()
        }
        assert int8 in rows["Engine artifact"] and fp16 not in rows["Engine artifact"], rows
        assert rows["Audit ID"] == "DEMO-int8-calibrated", rows
        assert rows["Admitted"].startswith(f"decision seq {seq},"), rows
        assert "not a selected decision" in rows["Admitted"], rows
        selected = rows["Selected admission (not what runs now)"]
        assert fp16 in selected and f"superseded at seq {seq} by " in selected and int8 in selected, selected
        # The selected engine's row is marked, and both it and the running engine are on the first screen.
        flagged = card.locator("tr.superseded")
        assert flagged.evaluate("e => getComputedStyle(e.cells[1]).backgroundColor") == "rgb(255, 244, 214)"
        for row in (flagged, card.locator("tr", has_text="Engine artifact")):
            box = row.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 900, box
