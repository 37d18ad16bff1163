"""The MLflow UI as a user meets it from what rankscope prints: in a real browser (system Chromium, headless, 1600 x
1000, a fresh profile for each view), against ``python -m pipeline.ui`` serving a real store that holds the help-desk
study, a SciFact BM25 k1 x b grid run while the UI served, a comparison and a gate.

Each view is read from the DOM, never from pixels (:func:`bench.ui_screenshots.first_screen`: the texts inside the
window, not clipped, in page order). On every first screen: the primary metric's name, its value and its interval's
bounds, and no ``system/`` metric before them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bench.ui_screenshots import ARGS, SCIFACT, Printed, chart_sections, chart_view_ready, first_screen, opened
from bench.ui_screenshots import served_study as study

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
RUNS = "text=matching runs"
PRIMARY = {"helpdesk": ("ndcg@5", "ndcg_at_5"), "scifact": ("ndcg@10", "ndcg_at_10")}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("system chromium is not installed (Debian: apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (the browser is the system's)")
    if not SCIFACT.is_dir():
        pytest.skip(f"no SciFact copy at {SCIFACT}")
    folder = tmp_path_factory.mktemp("ui")
    with study(folder) as printed:
        yield folder, printed


@pytest.fixture(scope="module")
def browser(served):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def runs(served):
    """Every run of the store's evaluations experiment, by id, and its comparisons experiment's."""
    from mlflow import MlflowClient

    folder, _ = served
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    found = {}
    for name in ("rankscope", "rankscope comparisons"):
        experiment = client.get_experiment_by_name(name).experiment_id
        found.update({r.info.run_id: r for r in client.search_runs([experiment])})
    return found


def shown(run, key: str) -> tuple[str, str, str]:
    """A run's metric and its bounds, as rankscope rounds them for people."""
    return tuple(f"{run.data.metrics[key + suffix]:.3f}" for suffix in ("", "_ci_lower", "_ci_upper"))


def check_first_screen(texts: list[str], names: tuple[str, ...], value: str, low: str, high: str) -> None:
    """The metric's name, value and bounds on the first screen, in that order or together, and no ``system/``
    metric before them."""
    joined = " | ".join(texts)
    assert any(name in joined for name in names), (names, joined[:2000])
    at = joined.find(value)
    assert at >= 0, (value, joined[:2000])
    bounds = re.search(rf"\[{re.escape(low)}, {re.escape(high)}\]", joined[at:])
    assert bounds, (low, high, joined[:2000])
    housekeeping = joined.find("system/")
    assert housekeeping < 0 or housekeeping > at + bounds.end(), joined[:2000]


def in_corpus(runs: dict, corpus: str, kind: str = "job") -> list:
    return [r for r in runs.values() if r.data.tags.get("rankscope.corpus") == corpus
            and r.data.tags.get("rankscope.kind") == kind]


def test_links_printed_while_the_ui_serves_carry_its_address_and_every_link_asks_for_the_runs_mode(served):
    _, printed = served
    assert printed.views["scifact"].startswith(printed.ui + "/#/experiments/")  # the grid ran while it served
    assert printed.comparison.startswith(printed.ui) and "/#/experiments/2/runs/" in printed.comparison
    for link in [*printed.views.values(), *printed.parents.values(), printed.comparison, printed.comparisons_view,
                 printed.open_page]:
        assert "workflowType=machine_learning" in link, link
    assert printed.open_page.startswith(printed.ui) and "viewStateShareKey=rankscope-helpdesk-ndcg_at_5" in (
        printed.open_page)  # pipeline.ui opens the view saved last before it started: the study's


def at(printed: Printed, link: str) -> str:
    """A link printed before the UI served (the study's) points at the default address: the served one instead."""
    return re.sub(r"^http://127\.0\.0\.1:\d+", printed.ui, link)


@pytest.mark.parametrize("corpus", ["helpdesk", "scifact"])
def test_each_corpus_s_view_lists_its_runs_flat_with_the_metric_and_interval_and_the_settings_within_1600_px(
        served, browser, runs, corpus):
    _, printed = served
    page = opened(browser, at(printed, printed.views[corpus]), RUNS)
    texts = first_screen(page)
    page.context.close()
    display, key = PRIMARY[corpus]
    joined = " | ".join(texts)
    assert "Runs" in texts and "Detect Issues" not in joined and "Usage" not in texts  # runs mode, not GenAI
    children = in_corpus(runs, corpus)
    assert len(children) == 4
    for run in children:  # every run of the sweep shown, none folded under its parent
        assert run.info.run_name in texts, (run.info.run_name, joined[:2000])
        value, low, high = shown(run, key)
        assert f"{value} [{low}, {high}]" in texts  # the metric rounded, its interval beside it
        check_first_screen(texts, (display, key), value, low, high)
    other = "scifact" if corpus == "helpdesk" else "helpdesk"
    assert not any(f"· {other}" in t for t in texts)  # one corpus at a time
    settings = ["retriever"] + (["retriever.k1", "retriever.b"] if corpus == "scifact" else [])
    assert all(s in texts for s in settings), (settings, joined[:2000])  # headers inside the window


@pytest.mark.parametrize("corpus", ["helpdesk", "scifact"])
def test_the_chart_view_starts_with_the_interval_figure_and_the_metric_and_folds_the_system_metrics(
        served, browser, runs, corpus):
    _, printed = served
    key = PRIMARY[corpus][1]
    page = opened(browser, at(printed, printed.views[corpus]) + "&compareRunsMode=CHART", RUNS)
    chart_view_ready(page, key)
    texts = first_screen(page)
    sections = [s.split(" (")[0] for s in chart_sections(page)]
    figure = page.evaluate("() => [...document.querySelectorAll('main img')].filter(i => i.complete && "
                           "i.naturalWidth > 0).map(i => { const r = i.getBoundingClientRect(); "
                           "return [r.top, r.bottom, r.left, r.right, innerHeight, innerWidth]; })")
    page.context.close()
    assert sections[0] == f"{corpus}: {key} with its interval" and sections[-2:] == ["Model metrics", "System metrics"]
    assert any(b <= h and r <= w and t >= 0 for t, b, l_, r, h, w in figure)  # the figure with the intervals, seen
    assert not any(t.startswith("system/") for t in texts)  # folded
    values = {f"{r.data.metrics[key]:.2f}" for r in in_corpus(runs, corpus)}  # the bar chart's labels (2 digits)
    assert values <= set(texts), (values, texts)
    assert not any(f"· {'scifact' if corpus == 'helpdesk' else 'helpdesk'}" in t for t in texts)


@pytest.mark.parametrize("corpus", ["helpdesk", "scifact"])
def test_a_sweep_s_parent_page_leads_with_the_verdict_the_top_system_and_its_interval(served, browser, runs,
                                                                                       corpus):
    _, printed = served
    link = at(printed, printed.parents[corpus])
    parent = runs[link.split("/runs/")[1].split("?")[0]]
    page = opened(browser, link, "text=Description")
    texts = first_screen(page)
    page.context.close()
    display, key = PRIMARY[corpus]
    check_first_screen(texts, (display,), *shown(parent, key))
    best = parent.data.tags["rankscope.best"]
    assert not best.startswith("tied") or "tied with" in " ".join(texts)  # a tie said as a tie


def test_a_run_s_page_leads_with_its_metric_and_interval(served, browser, runs):
    _, printed = served
    run = in_corpus(runs, "scifact")[0]
    link = printed.parents["scifact"].split("/runs/")[0] + f"/runs/{run.info.run_id}?workflowType=machine_learning"
    page = opened(browser, link, "text=Description")
    texts = first_screen(page)
    page.context.close()
    check_first_screen(texts, PRIMARY["scifact"], *shown(run, "ndcg_at_10"))


def test_a_comparison_s_page_and_the_comparisons_view_lead_with_the_verdict_on_the_primary_metric(served, browser,
                                                                                                   runs):
    _, printed = served
    comparison = runs[printed.comparison.split("/runs/")[1].split("?")[0]]
    value, low, high = (f"{comparison.data.metrics['ndcg_at_5_difference' + s]:+.3f}"
                        for s in ("", "_ci_lower", "_ci_upper"))
    page = opened(browser, printed.comparison, "text=Description")
    texts = first_screen(page)
    page.context.close()
    check_first_screen(texts, ("ndcg@5",), value, low, high)
    assert "Baseline And Candidate" in texts or "baseline and candidate" in texts  # both sides' data
    page = opened(browser, printed.comparisons_view, RUNS)
    texts = first_screen(page)
    page.context.close()
    for run in (r for r in runs.values() if r.data.tags.get("rankscope.kind") == "comparison"):
        assert run.info.run_name in texts and run.data.tags["rankscope.compare.primary"] in texts
    assert {"compare: RRF vs BM25 · helpdesk", "gate: RRF vs BM25 · helpdesk", "regression"} <= set(texts) or (
        {"compare: RRF vs BM25 · helpdesk", "gate: RRF vs BM25 · helpdesk", "pass"} <= set(texts))


def test_the_page_pipeline_ui_opens_is_the_newest_view_in_runs_mode(served, browser, runs):
    _, printed = served
    page = opened(browser, printed.open_page, RUNS)
    texts = first_screen(page)
    page.context.close()
    assert "Runs" in texts and "Detect Issues" not in " ".join(texts)
    for run in in_corpus(runs, "helpdesk"):
        check_first_screen(texts, PRIMARY["helpdesk"], *shown(run, "ndcg_at_5"))
