"""The README and the guides in docs/: links to files that exist (anchors are not checked), blocks marked runnable
that print what the page says, and figures between markers that bench/docs_figures.py measures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.docs_figures import (
    KNOWN,
    MARK,
    Figure,
    data_environment,
    excerpt,
    figure_names,
    matches,
    run_block,
    runnable_blocks,
    with_figures,
    with_outputs,
)

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
#
# A fenced block after ``<!-- runnable: its output follows -->`` is run as typed (``python`` blocks with this
# interpreter, the others with ``bash -c``, ``python`` on PATH being this interpreter), in a fresh temporary folder
# that links to the repository's files and keeps what the block writes; the next fenced block is its output, stdout
# and stderr together. Before comparing, the output is normalised as bench/docs_figures.py says: the temporary
# folder prints as FOLDER, the home folder as ~, a run id (32 hex digits) as RUN_ID, no line keeps trailing spaces.
# ``python -m bench.docs_figures --write`` writes today's outputs into the pages. A block marked ``runnable on
# scifact`` runs on the local SciFact copy (``RANKSCOPE_SCIFACT``, else ../shared/datasets/scifact), in the slow suite;
# an output with ``...`` lines is an excerpt (bench/docs_figures.py says how it is read).

RUNNABLE = [pytest.param(page, i, block, id=f"{page.relative_to(REPO).as_posix()}#{i}",
                         marks=[pytest.mark.slow] if block.needs else [])
            for page in PAGES for i, block in enumerate(runnable_blocks(page.read_text(encoding="utf-8"), page.name))]


def test_some_blocks_are_marked_runnable():
    assert len(RUNNABLE) >= 8
    assert any(block.needs == "scifact" for _, _, block in (param.values for param in RUNNABLE))


@pytest.mark.parametrize("page, number, block", RUNNABLE)
def test_a_runnable_block_prints_what_the_page_says(page, number, block):
    env = data_environment(block.needs)
    if env is None:
        pytest.skip(f"{block.needs} not found: set RANKSCOPE_{str(block.needs).upper()} to a BEIR-layout copy")
    printed = run_block(block.language, block.code, env=env)
    assert matches(block.expected, printed), (
        f"{page.name} block {number} prints otherwise (python -m bench.docs_figures --write rewrites it):\n{printed}")


def test_the_marked_block_and_its_output_are_found_and_rewritten():
    text = f"text\n{MARK}\n```python\nprint(1)\n```\n\nprints:\n\n```\n0\n```\n```sh\nnot marked\n```\n"
    [block] = runnable_blocks(text)
    assert (block.language, block.code, block.expected) == ("python", "print(1)\n", "0\n")
    assert with_outputs(text, [block], ["1"]) == text.replace("```\n0\n```", "```\n1\n```")
    with pytest.raises(ValueError, match="without its output block"):
        runnable_blocks(f"{MARK}\n```sh\ntrue\n```\n")


def test_an_excerpt_matches_the_lines_it_shows_in_order_and_is_rewritten_in_its_shape():
    shown = "head\n...\nmetric  0.62\n...\nlast line\n"
    assert matches(shown, "head\nx\nmetric  0.62\ny\nz\nlast line")
    assert matches(shown, "head\nmetric  0.62\nlast line")  # "..." may stand for no line
    assert not matches(shown, "head\nx\nmetric  0.63\nlast line")  # a figure 0.0001 off
    assert not matches(shown, "x\nhead\nmetric  0.62\nlast line")  # the first line starts the output
    assert not matches(shown, "head\nlast line\nmetric  0.62\nlast line\nmore")  # the last ends it
    assert not matches("a\nb", "a\nb\nc") and matches("a\nb\n", "a\nb")  # no "...": the whole output
    assert excerpt(shown, "head\nx\nmetric  0.63\ny\nlast line") == "head\n...\nmetric  0.63\n...\nlast line"
    [block] = runnable_blocks(f"<!-- runnable on scifact: its output follows -->\n```sh\ntrue\n```\n```\n{shown}```\n")
    assert block.needs == "scifact"


def test_a_block_runs_in_a_folder_of_its_own_and_prints_placeholders():
    printed = run_block("sh", "python -c 'import sys, os; print(os.getcwd()); print(os.path.expanduser(\"~/x\"))' "
                              "&& ls pipeline/data/helpdesk && echo 0a148ab341e54d23ba002292451d11ed '  '")
    assert printed == "FOLDER\n~/x\ncorpus.jsonl\nqrels\nqueries.jsonl\nRUN_ID"


# --- figures the guides quote are between markers the figures script knows ---------------------------------------


def test_every_figure_marker_names_a_figure_the_script_measures():
    named = {(page.name, name) for page in PAGES for name in figure_names(page.read_text(encoding="utf-8"))}
    assert {name for _, name in named} >= {"make_run_s", "helpdesk_dense_s", "tune_s", "report_html_bytes",
                                           "ui_start_s"}
    assert not [(page, name) for page, name in named if name not in KNOWN]


def test_figures_are_rewritten_when_written_or_stale_and_kept_within_their_tolerance():
    text = "took <!-- figure: make_run_s -->3.4 s<!-- /figure --> on <!-- figure: cores -->2<!-- /figure --> cores"
    close = {"make_run_s": Figure("5.1 s", 5.1, "seconds", ""), "cores": Figure("2", 2, "count", "")}
    assert with_figures(text, close, write=False) == text
    assert "-->5.1 s<!--" in with_figures(text, close, write=True)
    far = {"make_run_s": Figure("21.0 s", 21.0, "seconds", ""), "cores": Figure("8", 8, "count", "")}
    assert with_figures(text, far, write=False) == text.replace("3.4 s", "21.0 s").replace("-->2<", "-->8<")
    assert Figure("520,000 bytes", 520_000, "bytes", "").stale("459,204 bytes")
    assert not Figure("470,000 bytes", 470_000, "bytes", "").stale("459,204 bytes")


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
