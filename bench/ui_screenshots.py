"""The MLflow guide's screenshots, taken for real: a SciFact BM25 k1 x b grid in a fresh store (on the
help-desk corpus every k1 and b ranks alike, so a grid there shows no differences), a real ``mlflow
server`` on 127.0.0.1, and the system Chromium (headless, through playwright) opening each view a user opens.

``python -m bench.ui_screenshots docs/images`` writes ``mlflow_*.png`` there and prints what each view's first
screen shows (the text the closing notes and docs/mlflow.md quote).

Every step that sets up a view (expanding the parent run, choosing the plotted metric, the artifact table and its
compare column) is checked after it is done and stops the script if it did not take: a screenshot of the wrong
state is worse than none. The selectors are MLflow 3.17's (checked against 3.17.2's DOM).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
SCIFACT = REPO.parent / "shared" / "datasets" / "scifact"
GRID = ["-m", "corpus=scifact", f"corpus.path={SCIFACT}", "metrics=beir", "retriever.k1=0.3,0.9,1.5",
        "retriever.b=0.2,0.75", "quiet=true"]
PLOT_PARAMS = ["retriever.b", "retriever.k1"]  # the swept keys, in the order the compare page lists them
PLOT_METRIC = "ndcg_at_10"
TABLE, COMPARE_COLUMN = "per_question.json", "ndcg@10"
# MLflow 3.17 opens its assistant panel on a browser's first visit, covering a third of every view; a browser that
# has closed it once keeps it closed (these localStorage keys), so every page starts as a returning user's would.
CLOSED_ASSISTANT = ("localStorage.setItem('mlflow.assistant.panelOpen_v1', 'false');"
                    "localStorage.setItem('mlflow.assistant.fab.autoOpenedOnFirstLoad_v1', 'true');")
EXPAND = "[data-component-id$='runnamecellrenderer.tsx_46']"  # the run-name cell's expand/collapse button
SELECT = ".du-bois-light-select"  # the compare page's parameter and metric pickers (antd selects)


class ViewError(RuntimeError):
    """A view could not be set up as the docs describe it; the message says which step failed."""


def sweep(folder: Path) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
           "PYTHONPATH": str(REPO), "RANKSCOPE_CACHE_DIR": str(folder / "cache")}
    done = subprocess.run([sys.executable, "-m", "pipeline", *GRID], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900, check=True)
    return re.search(r"MLflow view \(.*\): (\S+)", done.stdout).group(1)


NOISE = re.compile(r"#[0-9a-f]{6}|(Un)?[Hh]ide run|Pin run")  # the runs list's colour swatches and icon labels


def lines(text: str) -> str:
    return " | ".join(line.strip() for line in text.splitlines() if line.strip() and not NOISE.fullmatch(line.strip()))


def first_screen(page, after: str | None = None) -> str:
    """The view's text, from `after` on when given (the panel right of the runs list), shortened."""
    text = lines(page.inner_text("main"))
    if after and after in text:
        text = text[text.index(after) + len(after):].lstrip(" |")
    return text[:600]


def chart_sections(page) -> list[str]:
    """The chart view's section headers, in order ("Model metrics (30)"): a header is a name beside a "(count)"."""
    return page.evaluate("""() => [...document.querySelectorAll('main *')]
        .filter(e => e.childElementCount === 0 && /^\\(\\d+\\)$/.test(e.textContent.trim()))
        .map(e => e.parentElement.innerText.replace(/\\s+/g, ' ').trim())""")


def take_screenshots(page, base: str, view: str, experiment: str, parent: str, children: list[str],
                     out: Path) -> dict[str, str]:
    """Open the four views on a running server and save ``out/mlflow_<name>.png``; returns each first screen."""
    seen: dict[str, str] = {}

    def step(what: str, done) -> None:
        try:
            done()
        except Exception as exc:
            raise ViewError(f"{what}: {str(exc).splitlines()[0]}") from exc

    def shot(name: str, url: str, wait: str, then=None, after: str | None = None) -> None:
        page.goto(url)
        page.wait_for_selector(wait, timeout=180_000)
        time.sleep(3)
        banner = page.get_by_role("button", name="Hide banner", exact=True)  # "You're viewing a shared view"
        if banner.count():
            banner.click()
        if then:
            then()
        time.sleep(2)
        page.mouse.move(0, 0)  # no hover highlight or tooltip in the picture
        page.screenshot(path=str(out / f"mlflow_{name}.png"))
        seen[name] = first_screen(page, after)

    def row(run_id: str):
        return page.locator(f"[role='row'][row-id='{run_id}']").first

    def expand() -> None:
        """Show the parent's children (the UI may remember an earlier expansion: clicking again would fold it)."""
        if not row(children[0]).is_visible():
            step("expand the parent run", lambda: row(parent).locator(EXPAND).click(timeout=10_000))
        step("see the child runs", lambda: [row(c).wait_for(state="visible", timeout=10_000) for c in children])

    def charts() -> None:
        expand()
        step("see the chart sections", lambda: page.get_by_text("Model metrics", exact=True).wait_for(timeout=30_000))
        seen["charts (sections)"] = ", ".join(chart_sections(page))

    def plot_metric() -> None:
        """The parallel coordinates plot starts with the shared params and the first metric:
        add ndcg_at_10 in the Metrics picker (type to filter: its list is virtual), then drop the others."""
        panel = page.get_by_role("tabpanel", name="Parallel Coordinates Plot")
        params, metrics = panel.locator(SELECT).nth(0), panel.locator(SELECT).nth(1)
        chips = ".du-bois-light-select-selection-item"

        def choose() -> None:
            metrics.locator(".du-bois-light-select-selector").click(timeout=10_000)
            page.keyboard.type(PLOT_METRIC)
            page.locator(f".du-bois-light-select-dropdown:visible [title='{PLOT_METRIC}']").click(timeout=10_000)
            page.keyboard.press("Escape")
            while others := [i for i, text in enumerate(metrics.locator(chips).all_inner_texts())
                             if text.strip() != PLOT_METRIC]:  # one at a time: the chips re-render on each removal
                remove = metrics.locator(chips).nth(others[0]).locator(".du-bois-light-select-selection-item-remove")
                remove.click(timeout=10_000)
                time.sleep(0.5)
            page.mouse.click(5, 5)  # close the picker

        step(f"plot {PLOT_METRIC}", choose)
        time.sleep(2)
        chosen = (params.locator(chips).all_inner_texts(), metrics.locator(chips).all_inner_texts())
        if [[t.strip() for t in group] for group in chosen] != [PLOT_PARAMS, [PLOT_METRIC]]:
            raise ViewError(f"the parallel coordinates plot shows params {chosen[0]} and metrics {chosen[1]}, "
                            f"not {PLOT_PARAMS} and [{PLOT_METRIC!r}]")

    def per_question() -> None:
        """The artifact view compares the tables of the runs shown: children only (the parent is hidden: it has
        no per_question.json, only sweep_summary.json), per_question.json, compared on ndcg@10."""
        expand()
        step("hide the parent run", lambda: row(parent).locator(
            "label:has(input.is-visibility-toggle-checkbox)").click(timeout=10_000))
        time.sleep(2)
        tables = page.get_by_test_id("dropdown-tables")

        def choose_table() -> None:
            tables.click(timeout=10_000)
            for name, wanted in ((TABLE, "true"), ("sweep_summary.json", "false")):
                option = page.get_by_role("option", name=name, exact=True)
                if option.count() and option.get_attribute("aria-selected") != wanted:
                    option.click(timeout=10_000)
            page.keyboard.press("Escape")

        def choose_column() -> None:
            page.locator("button[role='combobox']", has_text="Compare:").click(timeout=10_000)
            page.get_by_role("option", name=COMPARE_COLUMN, exact=True).click(timeout=10_000)
            page.keyboard.press("Escape")

        step(f"choose the table {TABLE}", choose_table)
        step(f"compare on {COMPARE_COLUMN}", choose_column)
        time.sleep(2)
        shown = lines(page.locator("button[role='combobox']", has_text="Table:").inner_text()), lines(
            page.locator("button[role='combobox']", has_text="Compare:").inner_text())
        if shown != (f"Table: | {TABLE}", f"Compare: | {COMPARE_COLUMN}"):
            raise ViewError(f"the artifact view shows {shown}, not {TABLE} compared on {COMPARE_COLUMN}")

    shot("view", view, "text=matching runs", then=expand)
    shot("charts", view + "&compareRunsMode=CHART", "text=matching runs", then=charts, after="matching runs")
    compare = (f"{base}/#/compare-runs?runs={json.dumps(children)}&experiments={json.dumps([experiment])}"
               "&workflowType=machine_learning")
    shot("compare", compare, "text=Parallel Coordinates Plot", then=plot_metric)
    shot("per_question", view + "&compareRunsMode=ARTIFACT", "text=matching runs", then=per_question,
         after="matching runs")
    return seen


def main(argv: list[str] | None = None) -> int:
    from mlflow import MlflowClient
    from playwright.sync_api import sync_playwright

    from pipeline.team.tracking_server import ServerSettings, tracking_server

    parser = argparse.ArgumentParser(prog="python -m bench.ui_screenshots")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rankscope-ui-") as tmp:
        folder = Path(tmp)
        view = sweep(folder)
        client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
        experiment = client.get_experiment_by_name("rankscope").experiment_id
        runs = [r for r in client.search_runs([experiment]) if r.data.tags.get("rankscope.kind") == "job"]
        children = [r.info.run_id for r in runs]
        parent = runs[0].data.tags["mlflow.parentRunId"]
        settings = ServerSettings(f"sqlite:///{folder / 'mlflow.db'}", str(folder / "mlartifacts"), workers=1)
        with tracking_server(settings) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                context = browser.new_context(viewport={"width": 1600, "height": 950})
                context.add_init_script(CLOSED_ASSISTANT)
                seen = take_screenshots(context.new_page(), server.uri,
                                        view.replace("http://127.0.0.1:5000", server.uri), experiment, parent,
                                        children, args.out)
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
