"""Screenshot an evidence report in headless Debian chromium: the README's docs/images/evidence-report.png.

Usage: ``python scripts/report_screenshot.py REPORT.html OUTPUT.png [HEIGHT]`` after ``make demo``
(whose last lines name the report). The page is opened as the tests open it, JavaScript on and every request
but the file's refused; the top HEIGHT pixels (default 1700) of a 1300-pixel-wide window are kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Route, sync_playwright

CHROMIUM = "/usr/bin/chromium"


def main(argv: list[str]) -> int:
    """Write the screenshot; 2 on a usage error."""
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    report, output = Path(argv[0]).resolve(), Path(argv[1])
    height = int(argv[2]) if len(argv) == 3 else 1700
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": height}, device_scale_factor=1)

        def only_the_file(route: Route) -> None:
            if route.request.url == report.as_uri():
                route.continue_()
            else:
                route.abort()

        page.route("**/*", only_the_file)
        page.goto(report.as_uri(), wait_until="load")
        page.screenshot(path=str(output), full_page=False)
        browser.close()
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
