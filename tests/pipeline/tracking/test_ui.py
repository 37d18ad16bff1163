"""The MLflow UI as a new user meets it, in a real browser (system Chromium, headless) against a real ``mlflow
server`` on 127.0.0.1 holding a real sweep: it opens on the runs, the chart view starts with retrieval figures, and
the view rankscope prints lists the children under the parent with the primary metric."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from bench.ui_screenshots import CLOSED_ASSISTANT, chart_sections
from pipeline.team.tracking_server import ServerSettings, tracking_server
from tests.pipeline.helpers import run_pipeline

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("system chromium is not installed (Debian: apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (the browser is the system's)")
    folder = tmp_path_factory.mktemp("ui")
    done = run_pipeline(folder, "-m", "retriever.k1=0.6,1.2", "retriever.b=0.4,0.75", "quiet=true")
    assert done.returncode == 0, done.stderr[-3000:]
    view = re.search(r"MLflow view \(.*\): (\S+)", done.stdout).group(1)
    return folder, view


@pytest.fixture(scope="module")
def browser_page(sweep):
    from playwright.sync_api import sync_playwright

    folder, view = sweep
    settings = ServerSettings(f"sqlite:///{folder / 'mlflow.db'}", str(folder / "mlartifacts"), workers=1)
    with tracking_server(settings) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1800, "height": 1000})
        context.add_init_script(CLOSED_ASSISTANT)  # as a returning user sees it: the assistant panel shut
        page = context.new_page()
        yield page, server.uri, view.replace("http://127.0.0.1:5000", server.uri), folder
        browser.close()


def wait_for_runs(page) -> None:
    page.wait_for_selector("text=matching runs", timeout=180_000)
    time.sleep(2)


def test_the_chart_view_starts_with_the_retrieval_metrics(browser_page):
    page, _, view, _ = browser_page
    page.goto(view + "&compareRunsMode=CHART")
    wait_for_runs(page)
    page.get_by_text("Model metrics", exact=True).wait_for(timeout=60_000)
    sections = [s.split(" (")[0] for s in chart_sections(page)]
    assert sections and sections[0] == "Model metrics", sections
    assert "System metrics" in sections
    assert "cache" not in sections


def test_the_printed_view_lists_the_children_under_the_parent_with_the_primary_metric(browser_page):
    page, _, view, _ = browser_page
    page.goto(view)
    wait_for_runs(page)
    assert "/runs" in page.url and "Model training" in page.inner_text("body")  # not the GenAI traces overview
    headers = " ".join(page.locator("[role='columnheader']").all_inner_texts())
    assert "ndcg_at_5" in headers and "ndcg_at_5_ci_lower" in headers and "retriever.k1" in headers
    rows = page.locator("[role='row']").all_inner_texts()
    assert any("retriever.k1=0.6,1.2 retriever.b=0.4,0.75 · helpdesk" in r for r in rows), rows  # the parent
    assert any("helpdesk/test" in r for r in rows)  # the corpus, as the parent's dataset input
    parent = page.locator("[role='row']", has_text="retriever.k1=0.6,1.2").first
    parent.locator("button, [role='button']").first.click()  # expand it
    time.sleep(3)
    body = page.inner_text("body")
    assert body.count("· helpdesk") >= 5  # the parent and its four children
    assert re.search(r"BM25 k1=0\.6 b=0\.4 · helpdesk", body)
    assert re.search(r"0\.\d{2,}", body)  # their nDCG@5 values are shown
