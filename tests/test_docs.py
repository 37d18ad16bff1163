"""The README and the guides in docs/ link only to files that exist (anchors are not checked)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)  # fenced code blocks
CODE = re.compile(r"`[^`\n]*`")  # inline code spans
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target) and ![alt](target)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto: ...


def relative_links(page: Path) -> list[str]:
    """Link targets of a Markdown page that point into the repository, anchors and code left out."""
    text = CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    targets = [t.split("#", 1)[0] for t in LINK.findall(text) if not EXTERNAL.match(t)]
    return [t for t in targets if t]


def test_the_pages_are_found_and_have_links():
    assert len(PAGES) > 5
    assert relative_links(REPO / "README.md")


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_relative_link_points_to_an_existing_file(page):
    missing = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(REPO)}: {missing}"


def test_links_in_code_are_not_links_and_anchors_are_dropped(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](a.md#part) ![b](images/b.png) [c](https://x.org) [d](#here) `[e](e.md)`\n"
                    "```\n[f](f.md)\n```\n")
    assert relative_links(page) == ["a.md", "images/b.png"]
