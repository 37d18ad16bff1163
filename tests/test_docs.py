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


# --- blocks marked runnable run as shown and print what the page says --------------------------------------------

MARK = "<!-- runnable: its output follows -->"
BLOCK = re.compile(r"^(`{3,})([\w-]*)[ \t]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)


def runnable_blocks(page: Path) -> list[tuple[str, str, str]]:
    """``(language, code, expected output)`` for each block after the mark: the next fenced block is its output."""
    text = page.read_text(encoding="utf-8")
    found = []
    for part in text.split(MARK)[1:]:
        blocks = BLOCK.findall(part)
        assert len(blocks) >= 2, f"{page.name}: a runnable block without its output block after it"
        (_, language, code), (_, _, output) = blocks[0], blocks[1]
        found.append((language, code, output))
    return found


RUNNABLE = [(page, i, block) for page in PAGES for i, block in enumerate(runnable_blocks(page))]


def test_some_blocks_are_marked_runnable():
    assert RUNNABLE


@pytest.mark.parametrize("page, number, block", RUNNABLE,
                         ids=[f"{p.relative_to(REPO).as_posix()}#{i}" for p, i, _ in RUNNABLE])
def test_a_runnable_block_prints_what_the_page_says(page, number, block):
    import subprocess
    import sys

    language, code, expected = block
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-c", code]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == expected.strip(), f"{page.name} block {number} prints otherwise"


def test_the_marked_block_and_its_output_are_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"text\n{MARK}\n```python\nprint(1)\n```\n\nprints:\n\n```\n1\n```\n```sh\nnot marked\n```\n")
    assert runnable_blocks(page) == [("python", "print(1)\n", "1\n")]


# --- links into the glossary land on one of its terms ------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped but - and _, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def test_every_glossary_link_names_a_term():
    glossary = (REPO / "docs" / "glossary.md").read_text(encoding="utf-8")
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", glossary, re.MULTILINE)}
    wrong = [(page.name, anchor) for page in PAGES
             for anchor in re.findall(r"glossary\.md#([\w\-]+)", page.read_text(encoding="utf-8"))
             if anchor not in anchors]
    assert not wrong
