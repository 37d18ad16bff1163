"""report.html in a real browser (the system's headless Chromium, driven by playwright): real sweeps' reports render
with their images, the contents links land on their sections, the diagnosis folds, the page keeps its size budget,
and it asks the network for nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.pipeline.helpers import run_pipeline

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
MAX_BYTES = 2_000_000
MAX_HEIGHT = 15_000  # px at a 1280 px wide window, the diagnosis folded
SCIFACT_GRID = ("retriever.k1=0.6,0.9,1.2,1.5", "retriever.b=0.3,0.6,0.9")


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip(f"no system Chromium at {CHROMIUM}")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


class Opened:
    """A report open in a fresh browser context where every request is routed: file: passes, anything else is
    refused and remembered."""

    def __init__(self, browser, report: Path) -> None:
        self.report = report
        self.refused: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.goto(report.as_uri())
        self.page.wait_for_load_state("load")

    def _route(self, route) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            self.refused.append(url)
            route.abort()

    def js(self, expression: str):
        return self.page.evaluate(expression)

    def height(self) -> int:
        return int(self.js("document.documentElement.scrollHeight"))

    def close(self) -> None:
        self.context.close()


def sweep_report(folder: Path, *args: str) -> Path:
    """``python -m pipeline -m ARGS`` in ``folder``; the report it printed."""
    done = run_pipeline(folder, "-m", *args, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    [path] = re.findall(r"^Report \(open in a browser\): (.+)$", done.stdout, flags=re.M)
    return Path(path)


@pytest.fixture(scope="module")
def study(tmp_path_factory, empty_store) -> Path:
    folder = tmp_path_factory.mktemp("study")
    (folder / "mlflow.db").write_bytes(empty_store.read_bytes())
    return sweep_report(folder, "experiment=helpdesk_study")


@pytest.fixture(scope="module")
def grid(tmp_path_factory, empty_store) -> Path:
    folder = tmp_path_factory.mktemp("grid")
    (folder / "mlflow.db").write_bytes(empty_store.read_bytes())
    return sweep_report(folder, "retriever=weighted", "retriever.alpha=0.2,0.5,0.8", "retriever.depth=5,10")


def check_renders_offline(browser, report: Path, images: int) -> Opened:
    """Every image decoded, every contents link and file link resolving, nothing asked of the network."""
    opened = Opened(browser, report)
    sizes = opened.js("[...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(sizes) == images and all(done and w > 0 and h > 0 for done, w, h in sizes), sizes
    targets = opened.js("[...document.querySelectorAll('nav.toc a')].map(a => a.getAttribute('href'))")
    assert targets and all(t.startswith("#") for t in targets)
    missing = opened.js("[...document.querySelectorAll('nav.toc a')]"
                        ".filter(a => !document.getElementById(a.getAttribute('href').slice(1))).length")
    assert missing == 0
    last = targets[-1]
    opened.page.click(f"nav.toc a[href='{last}']")
    assert opened.js("location.hash") == last
    top = opened.js(f"document.getElementById('{last[1:]}').getBoundingClientRect().top")
    assert abs(top) < 5 or opened.js("window.innerHeight + window.scrollY >= document.body.scrollHeight - 2")
    files = opened.js("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))"
                      ".filter(h => !h.startsWith('#'))")
    assert files and all((report.parent / f).is_file() for f in files), [f for f in files
                                                                          if not (report.parent / f).is_file()]
    assert opened.refused == []
    return opened


def test_the_study_report_renders_offline_and_its_diagnosis_folds(browser, study: Path):
    opened = check_renders_offline(browser, study, images=3)  # means, ranks, the two best systems' bootstrap
    try:
        blocks = "#diagnosis details"
        assert opened.js(f"document.querySelectorAll('{blocks}').length") == 4
        assert opened.js(f"[...document.querySelectorAll('{blocks}')].every(d => !d.open)")
        folded = opened.height()
        assert opened.page.locator(f"{blocks} table").first.is_visible() is False
        opened.page.locator(f"{blocks} summary").first.click()
        assert opened.js(f"document.querySelector('{blocks}').open") is True
        assert opened.page.locator(f"{blocks} table").first.is_visible()
        assert opened.height() > folded
        opened.page.locator(f"{blocks} summary").first.click()
        assert opened.js(f"document.querySelector('{blocks}').open") is False
        assert folded <= MAX_HEIGHT and study.stat().st_size <= MAX_BYTES
        assert opened.page.locator("#verdict").is_visible()  # on the first screen, under the title
        assert opened.js("document.getElementById('verdict').getBoundingClientRect().bottom") < 900
        assert "No single best system by ndcg@5" in opened.page.inner_text("#verdict")
    finally:
        opened.close()


def test_a_grid_report_shows_its_parameter_table_and_response_plot(browser, grid: Path):
    opened = check_renders_offline(browser, grid, images=4)  # and the grid's response plot
    try:
        section = opened.page.locator("#grid")
        assert section.locator("table.grid tbody tr").count() == 3  # alpha 0.2, 0.5, 0.8 by depth 5, 10
        assert section.locator("img").evaluate("i => i.naturalWidth") > 0
        assert "retriever.alpha" in section.locator("h2").inner_text()
        assert opened.height() <= MAX_HEIGHT
    finally:
        opened.close()


def test_a_300_question_12_system_scifact_report_keeps_its_budget(browser, tmp_path, empty_store, scifact_folder):
    (tmp_path / "mlflow.db").write_bytes(empty_store.read_bytes())
    report = sweep_report(tmp_path, "corpus=scifact", f"corpus.path={scifact_folder}", "metrics=beir",
                          *SCIFACT_GRID)
    opened = check_renders_offline(browser, report, images=4)
    try:
        size, height = report.stat().st_size, opened.height()
        print(f"SciFact 300 questions x 12 systems: report.html {size:,} bytes, {height:,} px tall folded")
        assert size <= MAX_BYTES and height <= MAX_HEIGHT
        assert opened.js("document.querySelectorAll('#diagnosis details').length") == 12
        assert opened.page.locator("#means table tbody tr").count() == 12
        # the first screen shows the means table: the header's warnings (every system's judged@10 is low) folded
        assert opened.js("document.querySelector('#means table tbody tr').getBoundingClientRect().bottom") < 900
        assert opened.page.locator("#judged summary").inner_text().startswith(
            "Incomplete judgments: judged@10 below 0.8 for all 12 systems (")
    finally:
        opened.close()
