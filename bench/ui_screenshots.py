"""The MLflow guide's screenshots, taken for real, and what each view shows on its first screen.

A fresh store gets the help-desk study (four retrievers), then ``python -m pipeline.ui`` serves it (the command users
run), and while it serves, a SciFact BM25 k1 x b grid, a comparison and a gate are run: their printed links must
carry the UI's real port. The system Chromium (headless, through playwright) opens each link a command printed, at
1600 x 1000, in a fresh browser (MLflow's own default mode, GenAI, unless the link says otherwise), as a returning
user sees it (MLflow's assistant panel closed).

``python -m bench.ui_screenshots docs/images`` writes ``mlflow_*.png`` there and prints, for each view, the text its
first screen shows (what the DOM holds inside the window, in page order): what docs/mlflow.md and the closing notes
quote. ``tests/pipeline/tracking/test_ui.py`` checks the same views with :func:`first_screen`.

Every step that sets up a view (the compare page's plotted metric, the artifact view's table) is checked after it is
done and stops the script if it did not take: a screenshot of the wrong state is worse than none. The selectors are
MLflow 3.17's (checked against 3.17.2's DOM).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.paths import REPO, SCIFACT

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
WINDOW = {"width": 1600, "height": 1000}
STUDY = ["-m", "experiment=helpdesk_study", "hydra.sweep.dir=study", "quiet=true"]
GRID = ["-m", "corpus=scifact", f"corpus.path={SCIFACT}", "metrics=beir", "retriever.k1=0.9,1.2",
        "retriever.b=0.4,0.75", "hydra.sweep.dir=grid", "quiet=true"]
COMPARED = ["BM25 · helpdesk", "RRF · helpdesk"]  # baseline, candidate
PLOT_PARAMS = ["retriever.b", "retriever.k1"]  # the grid's swept keys, in the order the compare page lists them
PLOT_METRIC = "ndcg_at_10"
TABLE, COMPARE_COLUMN = "per_question.json", "ndcg@10"
# MLflow 3.17 opens its assistant panel on a browser's first visit, covering a third of every view; a browser that
# has closed it once keeps it closed (these localStorage keys), so every page starts as a returning user's would.
CLOSED_ASSISTANT = ("localStorage.setItem('mlflow.assistant.panelOpen_v1', 'false');"
                    "localStorage.setItem('mlflow.assistant.fab.autoOpenedOnFirstLoad_v1', 'true');")
SELECT = ".du-bois-light-select"  # the compare page's parameter and metric pickers (antd selects)
EXPAND = "[data-component-id$='runnamecellrenderer.tsx_46']"  # the run-name cell's expand/collapse button

# The text the window shows, in page order: every text node whose box lies inside the window and inside every
# ancestor that clips (a cell cut with an ellipsis, a description folded under "Show more": not shown), that is not
# hidden, and not inside a closed <details> (but for its summary).
FIRST_SCREEN_JS = """() => {
    const seen = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const inside = (r, c) => r.left >= c.left - 1 && r.right <= c.right + 1 && r.top >= c.top - 1
                             && r.bottom <= c.bottom + 1;
    while (walker.nextNode()) {
        const node = walker.currentNode;
        const text = node.textContent.replace(/\\s+/g, ' ').trim();
        if (!text || !node.parentElement) continue;
        const folded = node.parentElement.closest('details:not([open])');
        if (folded && !node.parentElement.closest('summary')) continue;  // inside a closed fold
        if (node.parentElement.checkVisibility && !node.parentElement.checkVisibility(
            {opacityProperty: true, visibilityProperty: true, contentVisibilityAuto: true})) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0);
        if (!rects.length) continue;
        const box = {left: Math.min(...rects.map(r => r.left)), right: Math.max(...rects.map(r => r.right)),
                     top: Math.min(...rects.map(r => r.top)), bottom: Math.max(...rects.map(r => r.bottom))};
        if (!inside(box, {left: 0, top: 0, right: innerWidth, bottom: innerHeight})) continue;
        let shown = true;
        for (let el = node.parentElement; el && shown; el = el.parentElement) {
            const style = getComputedStyle(el);
            if (style.display === 'none' || style.visibility === 'hidden' || style.opacity === '0') shown = false;
            else if (/(hidden|auto|scroll|clip)/.test(style.overflow + style.overflowX + style.overflowY)
                     && !inside(box, el.getBoundingClientRect())) shown = false;
        }
        if (shown) seen.push(text);
    }
    return seen;
}"""


class ViewError(RuntimeError):
    """A view could not be set up as the docs describe it; the message says which step failed."""


def first_screen(page) -> list[str]:
    """The texts the window shows, in page order (:data:`FIRST_SCREEN_JS`)."""
    return page.evaluate(FIRST_SCREEN_JS)


def chart_sections(page) -> list[str]:
    """The chart view's section headers, in order ("Model metrics (30)"): a header is a name beside a "(count)"."""
    return page.evaluate("""() => [...document.querySelectorAll('main *')]
        .filter(e => e.childElementCount === 0 && /^\\(\\d+\\)$/.test(e.textContent.trim()))
        .map(e => e.parentElement.innerText.replace(/\\s+/g, ' ').trim())""")


# -- the store, and the links the commands printed ----------------------------------------------------------------


@dataclass
class Printed:
    """The links the commands printed, as printed."""

    views: dict[str, str] = field(default_factory=dict)  # corpus -> its saved view
    parents: dict[str, str] = field(default_factory=dict)  # corpus -> its sweep's parent run page
    comparison: str = ""  # the comparison run's page (compare's "Recorded:")
    comparisons_view: str = ""
    open_page: str = ""  # what python -m pipeline.ui printed to open
    ui: str = ""  # the address python -m pipeline.ui serves


def environment(folder: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}, "PYTHONPATH": str(REPO),
            "RANKSCOPE_CACHE_DIR": str(folder / "cache")}


def command(folder: Path, module: str, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=folder, env=environment(folder),
                          capture_output=True, text=True, timeout=1500)
    if done.returncode not in ok:
        raise ViewError(f"python -m {module} {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def read_sweep(out: str, printed: Printed) -> None:
    corpus = None
    for line in out.splitlines():
        if found := re.match(r"MLflow view of (\S+) \(.*\): (\S+)$", line):
            corpus = found.group(1)
            printed.views[corpus] = found.group(2)
    if page := re.search(r"^MLflow: parent run \w+ in .*\n(?:.*\n)*?  its page:  (\S+)", out, re.M):
        printed.parents[corpus or "?"] = page.group(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def served_study(folder: Path) -> Iterator[Printed]:
    """The study in ``folder``'s new store, ``python -m pipeline.ui`` serving it, and what every command printed."""
    printed = Printed()
    read_sweep(command(folder, "pipeline", *STUDY), printed)
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "pipeline.ui", "--backend-store-uri",
                           f"sqlite:///{folder / 'mlflow.db'}", "--port", str(port), "--no-browser"], cwd=folder,
                          env=environment(folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(ui.stdout), daemon=True)
    reader.start()
    try:
        printed.ui = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if ui.poll() is not None:
                raise ViewError(f"python -m pipeline.ui exited: {ui.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(printed.ui + "/health", timeout=5):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise ViewError("python -m pipeline.ui did not answer /health")
        read_sweep(command(folder, "pipeline", *GRID), printed)
        out = command(folder, "pipeline.compare", *COMPARED)
        printed.comparison = re.search(r"^Recorded: run \w+ in .*\n(?:.*\n)*?  its page:  (\S+)", out, re.M).group(1)
        printed.comparisons_view = re.search(r"MLflow view of the comparisons \(.*\): (\S+)", out).group(1)
        command(folder, "pipeline.gate", COMPARED[1], "--baseline", COMPARED[0], ok=(0, 1))
        printed.open_page = next(line.split("Open:", 1)[1].strip() for line in lines if line.startswith("Open:"))
        yield printed
    finally:
        ui.terminate()
        ui.wait(timeout=60)


# -- opening the views ---------------------------------------------------------------------------------------------


VIEW_APPLIED = "[role='columnheader']:has-text('rankscope.')"  # a saved view's columns are shown (it loads late)


def opened(browser, url: str, wait: str, settle: float = 3.0):
    """A fresh user's page (a new browser context: no mode chosen, the assistant closed) at ``url``, once ``wait``
    shows (and, for a saved view's table, once its columns are)."""
    context = browser.new_context(viewport=WINDOW)
    context.add_init_script(CLOSED_ASSISTANT)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector(wait, timeout=180_000)
    if "viewStateShareKey=" in url and "compareRunsMode=" not in url:
        page.wait_for_selector(VIEW_APPLIED, timeout=120_000)
    time.sleep(settle)
    page.mouse.move(0, 0)  # no hover highlight or tooltip in the picture
    return page


def chart_view_ready(page, primary: str) -> None:
    """The chart view's first section drawn: its figure loaded, its bar chart labelled."""
    page.get_by_text(f": {primary} with its interval", exact=False).first.wait_for(timeout=60_000)
    page.wait_for_function("() => [...document.querySelectorAll('main img')].some(i => i.complete && "
                           "i.naturalWidth > 0)", timeout=60_000)
    time.sleep(2)


def plot_metric(page) -> None:
    """The compare page's parallel coordinates plot starts with the shared params and the first metric: add
    ndcg_at_10 in the Metrics picker (type to filter: its list is virtual), then drop the others."""
    panel = page.get_by_role("tabpanel", name="Parallel Coordinates Plot")
    params, metrics = panel.locator(SELECT).nth(0), panel.locator(SELECT).nth(1)
    chips = ".du-bois-light-select-selection-item"
    metrics.locator(".du-bois-light-select-selector").click(timeout=10_000)
    page.keyboard.type(PLOT_METRIC)
    page.locator(f".du-bois-light-select-dropdown:visible [title='{PLOT_METRIC}']").click(timeout=10_000)
    page.keyboard.press("Escape")
    while others := [i for i, text in enumerate(metrics.locator(chips).all_inner_texts())
                     if text.strip() != PLOT_METRIC]:  # one at a time: the chips re-render on each removal
        metrics.locator(chips).nth(others[0]).locator(".du-bois-light-select-selection-item-remove").click(
            timeout=10_000)
        time.sleep(0.5)
    page.mouse.click(5, 5)  # close the picker
    time.sleep(2)
    chosen = (params.locator(chips).all_inner_texts(), metrics.locator(chips).all_inner_texts())
    if [[t.strip() for t in group] for group in chosen] != [PLOT_PARAMS, [PLOT_METRIC]]:
        raise ViewError(f"the parallel coordinates plot shows params {chosen[0]} and metrics {chosen[1]}, "
                        f"not {PLOT_PARAMS} and [{PLOT_METRIC!r}]")


def per_question(page) -> None:
    """The artifact view compares the tables of the runs shown; MLflow disables it while runs are grouped: remove
    the grouping (one click, in the table view), open the artifact view, hide the grid's parent (it has no
    per_question.json), choose the table and its ndcg@10 column."""
    grouping = page.get_by_test_id("column-selection-dropdown").filter(has_text="Group by:")
    grouping.locator("[role='button']").first.click(timeout=10_000)  # the chip's clear button
    time.sleep(2)
    parent = page.locator("[role='row']", has_text="retriever.k1=").first
    if not page.locator("[role='row']", has_text="BM25 k1=0.9 b=0.4").count():  # its runs folded under it
        parent.locator(EXPAND).click(timeout=10_000)
        time.sleep(2)
    page.locator("main label:has(input[type='radio'][value='ARTIFACT'])").click(timeout=10_000)
    time.sleep(3)
    parent.locator("label:has(input.is-visibility-toggle-checkbox)").click(timeout=10_000)
    time.sleep(2)
    page.get_by_test_id("dropdown-tables").click(timeout=10_000)
    for name, wanted in ((TABLE, "true"), ("sweep_summary.json", "false")):
        option = page.get_by_role("option", name=name, exact=True)
        if option.count() and option.get_attribute("aria-selected") != wanted:
            option.click(timeout=10_000)
    page.keyboard.press("Escape")
    page.locator("button[role='combobox']", has_text="Compare:").click(timeout=10_000)
    page.get_by_role("option", name=COMPARE_COLUMN, exact=True).click(timeout=10_000)
    page.keyboard.press("Escape")
    time.sleep(2)


def take_screenshots(browser, printed: Printed, grid_children: list[str], out: Path) -> dict[str, str]:
    """Open each view, save ``out/mlflow_<name>.png``; returns the text of each first screen."""
    seen: dict[str, str] = {}

    def shot(name: str, page, then=None) -> None:
        try:
            if then:
                then(page)
        except ViewError:
            raise
        except Exception as exc:
            raise ViewError(f"{name}: {str(exc).splitlines()[0]}") from exc
        page.mouse.move(0, 0)
        page.screenshot(path=str(out / f"mlflow_{name}.png"))
        seen[name] = " | ".join(first_screen(page))[:900]
        page.context.close()

    runs = "text=matching runs"
    shot("first_page", opened(browser, printed.open_page, runs))
    shot("view", opened(browser, printed.views["scifact"], runs))
    shot("charts", opened(browser, printed.views["scifact"] + "&compareRunsMode=CHART", runs),
         lambda page: chart_view_ready(page, "ndcg_at_10"))
    shot("parent", opened(browser, printed.parents["scifact"], "text=Description"))
    child = printed.parents["scifact"].split("/runs/")[0] + f"/runs/{grid_children[0]}?workflowType=machine_learning"
    shot("run", opened(browser, child, "text=Description"))
    shot("comparison", opened(browser, printed.comparison, "text=Description"))
    shot("comparisons", opened(browser, printed.comparisons_view, runs))
    experiment = printed.parents["scifact"].split("/experiments/")[1].split("/")[0]
    compare = (f"{printed.ui}/#/compare-runs?runs={json.dumps(grid_children)}&experiments={json.dumps([experiment])}"
               "&workflowType=machine_learning")
    shot("compare", opened(browser, compare, "text=Parallel Coordinates Plot"), plot_metric)
    shot("per_question", opened(browser, printed.views["scifact"], runs), per_question)
    return seen


def main(argv: list[str] | None = None) -> int:
    from mlflow import MlflowClient
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(prog="python -m bench.ui_screenshots")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rankscope-ui-") as tmp, served_study(Path(tmp)) as printed:
        client = MlflowClient(f"sqlite:///{Path(tmp) / 'mlflow.db'}")
        parent = printed.parents["scifact"].split("/runs/")[1].split("?")[0]
        children = [r.info.run_id for r in client.search_runs(
            [client.get_experiment_by_name("rankscope").experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                seen = take_screenshots(browser, printed, children, args.out)
            except ViewError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            finally:
                browser.close()
    for name, text in seen.items():
        print(f"{name}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
