"""The MLflow guide's screenshots, taken for real: a help-desk BM25 k1 x b grid in a fresh store, a real ``mlflow
server`` on 127.0.0.1, and the system Chromium (headless, through playwright) opening each view a user opens.

``python -m bench.ui_screenshots docs/images`` writes ``mlflow_*.png`` there and prints what each view's first
screen shows (the text the closing notes and docs/mlflow.md quote).
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
GRID = ["-m", "retriever.k1=0.6,0.9,1.2", "retriever.b=0.4,0.75", "quiet=true"]


def sweep(folder: Path) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
           "PYTHONPATH": str(REPO), "RANKSCOPE_CACHE_DIR": str(folder / "cache")}
    done = subprocess.run([sys.executable, "-m", "pipeline", *GRID], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900, check=True)
    return re.search(r"MLflow view \(.*\): (\S+)", done.stdout).group(1)


def click(locator) -> None:
    """Click if it is there (the UI's panels differ a little between runs); a screenshot shows what happened."""
    try:
        locator.click(timeout=5_000)
        time.sleep(1)
    except Exception as exc:
        print(f"(not clicked: {str(exc).splitlines()[0]})", file=sys.stderr)


def first_screen(page) -> str:
    return " | ".join(line.strip() for line in page.inner_text("main").splitlines() if line.strip())[:600]


def main(argv: list[str] | None = None) -> int:
    from mlflow import MlflowClient
    from playwright.sync_api import sync_playwright

    from pipeline.team.tracking_server import ServerSettings, tracking_server

    parser = argparse.ArgumentParser(prog="python -m bench.ui_screenshots")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="rankscope-ui-") as tmp:
        folder = Path(tmp)
        view = sweep(folder)
        client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
        experiment = client.get_experiment_by_name("rankscope").experiment_id
        runs = [r for r in client.search_runs([experiment]) if r.data.tags.get("rankscope.kind") == "job"]
        settings = ServerSettings(f"sqlite:///{folder / 'mlflow.db'}", str(folder / "mlartifacts"), workers=1)
        with tracking_server(settings) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 950})
            base = server.uri

            def shot(name: str, url: str, wait: str = "text=matching runs", then=None) -> None:
                page.goto(url)
                page.wait_for_selector(wait, timeout=180_000)
                time.sleep(4)
                for button in ("Close", "Hide banner"):  # the MLflow assistant's panel, the shared-view banner
                    click(page.get_by_role("button", name=button, exact=True))
                if then:
                    then()
                    time.sleep(3)
                page.screenshot(path=str(args.out / f"mlflow_{name}.png"))
                seen[name] = first_screen(page)

            view = view.replace("http://127.0.0.1:5000", base)

            def expand() -> None:
                parent = page.locator("[role='row']", has_text="retriever.k1=").first
                click(parent.locator("button, [role='button']").first)

            def per_question() -> None:
                expand()
                click(page.locator("button", has_text="Table:").first)
                click(page.get_by_role("option", name="per_question.json"))
                click(page.get_by_role("option", name="sweep_summary.json"))
                page.keyboard.press("Escape")
                click(page.locator("button", has_text="Compare:").first)
                click(page.get_by_role("option", name="ndcg@5", exact=True))
                page.keyboard.press("Escape")

            def ndcg_axis() -> None:
                chip = page.locator(".du-bois-light-select-selection-item", has_text="hit_rate_at_3").first
                click(chip.locator(".du-bois-light-select-selection-item-remove"))
                field = page.locator("text=Metrics:").locator(
                    "xpath=following::div[contains(@class,'select-selector')][1]")
                click(field)
                page.keyboard.type("ndcg_at_5")
                page.keyboard.press("Enter")
                page.keyboard.press("Escape")

            shot("view", view, then=expand)
            shot("charts", view + "&compareRunsMode=CHART", then=expand)
            ids = json.dumps([r.info.run_id for r in runs])
            shot("compare", f"{base}/#/compare-runs?runs={ids}&experiments={json.dumps([experiment])}",
                 wait="text=Parallel Coordinates Plot", then=ndcg_axis)
            shot("per_question", view + "&compareRunsMode=ARTIFACT", then=per_question)
            browser.close()
    for name, text in seen.items():
        print(f"{name}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
