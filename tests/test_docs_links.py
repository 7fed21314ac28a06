"""The repository's documentation stands on its own: every relative link resolves to a file inside the
repository, and so does every ``….md`` path the design pages name (attack 28 finding 6f:
docs/ARCHITECTURE.md pointed to ``../shared/DESIGN.md``, outside it). Other pages may name another
project's files (cel-spec's ``doc/langdef.md``) in code spans."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

PAGES = sorted({*REPO.glob("docs/**/*.md"), REPO / "README.md", REPO / "policies" / "README.md"})
DESIGN_PAGES = (REPO / "docs" / "ARCHITECTURE.md", REPO / "docs" / "DESIGN.md")
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
_MD_PATH = re.compile(r"`(?P<target>[\w./-]+\.md)`")


def _inside(page: Path, target: str) -> bool:
    """Whether ``target`` (relative to the page, else to the repository root) is a file of the repository."""
    path = target.split("#", 1)[0]
    for base in (page.parent, REPO):
        resolved = (base / path).resolve()
        if resolved.is_relative_to(REPO) and resolved.is_file():
            return True
    return False


def test_every_link_and_page_path_resolves_inside_the_repository() -> None:
    outside = []
    for page in PAGES:
        text = page.read_text()
        targets = [m["target"] for m in _LINK.finditer(text) if not re.match(r"[a-z]+:|#", m["target"])]
        if page in DESIGN_PAGES:
            targets += [m["target"] for m in _MD_PATH.finditer(text)]
        outside += [f"{page.relative_to(REPO)}: {target}" for target in targets if not _inside(page, target)]
    assert outside == []


def test_the_architecture_page_names_the_design_in_the_repository() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    assert "[DESIGN.md](DESIGN.md)" in text and "../shared" not in text
