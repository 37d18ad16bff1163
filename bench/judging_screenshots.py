"""docs/judging.md's Label Studio screenshots, taken for real: an unjudged sweep of the own-files sample, its pool
pushed by ``python -m pipeline.judge pool --to label-studio`` to a real ``label-studio start`` (SQLite, a temporary
data folder), and the system Chromium (headless, through playwright) logged in as an assessor would be.

``python -m bench.judging_screenshots docs/images`` writes ``judging_*.png`` there: the project's task list in
judging order, and one task as the assessor grades it (question, document, the scale with its meanings).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.paths import REPO

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
OWN = REPO / "tests" / "pipeline" / "data" / "own_files"
PROJECT = "helpdesk chunks"


def run(folder: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", *args], cwd=folder, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.judging_screenshots", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from playwright.sync_api import sync_playwright

    from tests.pipeline.judge_steps import label_studio_server as server

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rankscope-shots-") as tmp:
        folder = Path(tmp)
        said = run(folder, "pipeline", "-m", "experiment=own_files", "corpus.judgments.path=null",
                   f"corpus.documents.path={OWN / 'chunks.parquet'}", f"corpus.questions.path={OWN / 'questions.csv'}")
        parent = re.search(r"pipeline\.judge pool ([0-9a-f]{32})", said).group(1)
        with server.label_studio(folder) as url, sync_playwright() as playwright:
            env = {"LABEL_STUDIO_API_KEY": server.TOKEN}
            print(run(folder, "pipeline.judge", "pool", parent, "--to", "label-studio", "--url", url, "--project",
                      PROJECT, env=env))
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_context(viewport={"width": 1500, "height": 900}).new_page()
            page.goto(f"{url}/user/login/")
            page.fill("input[name=email]", server.USER)
            page.fill("input[name=password]", server.PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_load_state("networkidle")
            page.goto(f"{url}/projects/")
            page.get_by_text(PROJECT).first.click()
            page.wait_for_selector("text=question", timeout=60_000)
            page.wait_for_timeout(2000)
            page.screenshot(path=str(out / "judging_tasks.png"))
            page.get_by_text("Label All Tasks").first.click()
            page.wait_for_selector("text=How well does the document answer the question?", timeout=60_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(out / "judging_task.png"))
            browser.close()
    print(f"wrote {out / 'judging_tasks.png'} and {out / 'judging_task.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
