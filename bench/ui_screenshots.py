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
                if then:
                    then()
                    time.sleep(3)
                page.screenshot(path=str(args.out / f"mlflow_{name}.png"))
                seen[name] = first_screen(page)

            view = view.replace("http://127.0.0.1:5000", base)

            def expand() -> None:
                parent = page.locator("[role='row']", has_text="retriever.k1=").first
                parent.locator("button, [role='button']").first.click()

            shot("view", view, then=expand)
            shot("charts", view + "&compareRunsMode=CHART", then=expand)
            ids = json.dumps([r.info.run_id for r in runs])
            shot("compare", f"{base}/#/compare-runs?runs={ids}&experiments={json.dumps([experiment])}",
                 wait="text=Parallel Coordinates Plot")
            shot("per_question", view + "&compareRunsMode=ARTIFACT", then=expand)
            browser.close()
    for name, text in seen.items():
        print(f"{name}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
