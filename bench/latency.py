"""``python -m bench.latency``: how fast every command answers, against baselines measured in the same run.

Each figure is the median wall time of ``--repeats`` fresh processes (a command a user types pays its imports every
time), taken turn about with its baseline so both see the same machine load, and reported as a ratio to it:

- ``--help`` of every command, against ``python -c "import numpy"`` (target: at most 3x);
- ``python -m metrics QRELS RUN`` on a SciFact BM25 run (300 questions x 100), against the same (at most 4x);
- one help-desk ``python -m pipeline`` into an existing store, and the 4-system help-desk study, against
  ``python -c "import mlflow, hydra"`` (at most 1.3x and 3x: a run forks its store process after MLflow's import
  and never imports matplotlib, see tests/test_help_is_light.py);
- ``pipeline.compare`` and ``pipeline.gate`` on a store of 200 runs, against ``python -c "import mlflow"`` (2x);
- a 12-point SciFact BM25 sweep against one SciFact run (2x), at least three turns of each;
- ``make ui`` until it answers, in seconds (at most 10).

Prints the table and writes it to ``bench/results/latency.md`` (bench/RESULTS.md quotes it); ``--only NAME[,NAME]``
runs a subset.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.paths import REPO, SCIFACT

PY = sys.executable
GRID = ["retriever.k1=0.6,0.9,1.2,1.5", "retriever.b=0.3,0.6,0.75"]  # 12 points
# turns of (one run, sweep) at least: one turn each made the ratio the luck of two processes (one SciFact run took
# 5.7-7.8 s in four turns on the same quiet machine)
SWEEP_TURNS = 3
COMMANDS_WITH_HELP = ["pipeline", "pipeline.compare", "pipeline.gate", "pipeline.sync", "pipeline.scheduled",
                      "pipeline.server", "pipeline.ui", "metrics", "retrievers.cache"]


def environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = str(REPO)
    env["RANKSCOPE_CACHE_DIR"] = str(folder / "cache")
    return env


def timed(command: list[str], folder: Path, setup: Callable[[], None] | None = None) -> float:
    """Wall seconds of one fresh process (``setup`` runs first, untimed); it must succeed."""
    if setup:
        setup()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=environment(folder), capture_output=True, text=True,
                          timeout=3600)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


@dataclass
class Row:
    what: str
    seconds: float
    baseline: str
    baseline_seconds: float
    target: float | None

    @property
    def ratio(self) -> float:
        return self.seconds / self.baseline_seconds

    def line(self) -> str:
        verdict = "" if self.target is None else ("met" if self.ratio <= self.target else "NOT met")
        target = "" if self.target is None else f"<= {self.target:g}x"
        return (f"| {self.what} | {self.seconds:.2f} | {self.baseline} | {self.baseline_seconds:.2f} | "
                f"{self.ratio:.2f}x | {target} | {verdict} |")


def pair(what: str, command: list[str], baseline: str, base_command: list[str], folder: Path, repeats: int,
         target: float | None, setup: Callable[[], None] | None = None) -> Row:
    """Median of ``repeats`` turns of (baseline, command), each a fresh process."""
    ours, theirs = [], []
    for _ in range(repeats):
        theirs.append(timed(base_command, folder))
        ours.append(timed(command, folder, setup))
    return Row(what, statistics.median(ours), baseline, statistics.median(theirs), target)


def migrated_store(path: Path) -> Path:
    code = f"from pipeline.tracking.store import Store; Store.open('sqlite:///{path}', 'rankscope')"
    subprocess.run([PY, "-c", code], check=True, capture_output=True, env=environment(path.parent), cwd=REPO)
    return path


def scifact_run(folder: Path) -> tuple[Path, Path]:
    """A SciFact BM25 run file (300 test claims x 100) and the test judgments (TREC format), made once."""
    qrels, run = folder / "scifact.qrels", folder / "scifact-bm25.trec"
    code = f"""
from pipeline.data import load_beir
from retrievers import BM25
from metrics.trec import write_trec_run
c = load_beir('{SCIFACT}', 'test')
write_trec_run(BM25(k1=0.9, b=0.4).index(c).rank(c.query_ids, c.query_texts, 100), '{run}')
with open('{qrels}', 'w') as f:
    for q, d, g in zip(c.qrels.query_ids, c.qrels.doc_ids, c.qrels.grades):
        f.write(f'{{q}} 0 {{d}} {{g}}\\n')
"""
    subprocess.run([PY, "-c", code], check=True, env=environment(folder), cwd=REPO)
    return qrels, run


def store_of_200_runs(folder: Path) -> Path:
    """A store holding 200 finished runs of 300 questions each (one per system name, two corpora), as a team's
    store looks after some weeks; made with the job records' own publishing path."""
    db = migrated_store(folder / "store200.db")
    code = f"""
import numpy as np, pandas as pd
from pathlib import Path
from pipeline.tracking.store import Store
from pipeline.tracking.records import JobRecord, publish, save_table
store = Store.open('sqlite:///{db}', 'rankscope')
rng = np.random.default_rng(0)
base = rng.random(300)
for i in range(200):
    corpus = 'scifact' if i % 2 else 'nfcorpus'
    values = np.clip(base + rng.normal(0, 0.05, 300), 0, 1)
    table = pd.DataFrame({{'query_id': [f'q{{j}}' for j in range(300)], 'ndcg@10': values, 'mrr': values,
                          'recall@100': values}})
    out = Path('{folder}') / 'runs' / str(i)
    out.mkdir(parents=True)
    tags = {{'rankscope.system': f'BM25 k1={{i}}', 'rankscope.kind': 'run', 'rankscope.corpus': corpus,
            'rankscope.corpus_digest': corpus}}
    record = JobRecord.new(run_name=f'BM25 k1={{i}} · {{corpus}}', experiment_id=store.experiment_id,
                           parent_run_id=None, tracking_uri=store.uri, tags=tags,
                           params={{'metrics.level': 1, 'metrics.gain': 'linear', 'metrics.missing': 'zero'}},
                           metrics={{'ndcg_at_10': float(values.mean())}}, table='per_question.json',
                           table_dtypes=save_table(table, out / 'per_question.json'))
    publish(store.client, record, out)
"""
    subprocess.run([PY, "-c", code], check=True, env=environment(folder), cwd=REPO)
    return db


def ui_seconds(folder: Path, repeats: int, mlflow_ui: bool = False) -> float:
    """Seconds from ``make ui``'s command (or, for comparison, ``mlflow ui --workers 1``'s) until the UI answers
    /health (median)."""
    db = migrated_store(folder / "ui.db")
    command = ["make", "-s", "-C", str(REPO), "ui", f"UI_STORE=sqlite:///{db}", "UI_PORT=5123"]
    if mlflow_ui:
        command = [PY, "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{db}", "--host", "127.0.0.1",
                   "--port", "5123", "--workers", "1"]
    # make's own set-up first, untimed: a pyproject.toml newer than the last install would reinstall the venv
    subprocess.run(["make", "-s", "-C", str(REPO), ".venv/.installed"], check=True, capture_output=True)
    return until_healthy(command, repeats, port=5123)


def until_healthy(command: list[str], repeats: int, port: int) -> float:
    """Median seconds from starting ``command`` (a server on ``port``) until its /health answers; stopped each time."""
    found = []
    for _ in range(repeats):
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            while time.perf_counter() - start < 300:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    time.sleep(0.1)
            found.append(time.perf_counter() - start)
        finally:
            os.killpg(process.pid, 15)
            process.wait(timeout=60)
    return statistics.median(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", help="comma-separated: help, metrics, run, study, compare, sweep, ui")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results") / "latency.md")
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else {"help", "metrics", "run", "study", "compare", "sweep", "ui"}
    numpy_ = [PY, "-c", "import numpy"]
    mlflow_hydra = [PY, "-c", "import mlflow, hydra"]
    mlflow_ = [PY, "-c", "import mlflow"]
    rows: list[Row] = []
    extra: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rankscope-latency-") as tmp:
        folder = Path(tmp)
        if "help" in wanted:
            for name in COMMANDS_WITH_HELP:
                rows.append(pair(f"`python -m {name} --help`", [PY, "-m", name, "--help"], "import numpy", numpy_,
                                 folder, args.repeats, 3))
        if "metrics" in wanted:
            qrels, run = scifact_run(folder)
            rows.append(pair("`python -m metrics QRELS RUN` (SciFact BM25, 300 x 100)",
                             [PY, "-m", "metrics", str(qrels), str(run)], "import numpy", numpy_, folder,
                             args.repeats, 4))
        template = migrated_store(folder / "template.db")
        store = folder / "mlflow.db"

        def fresh_store() -> None:
            shutil.copy(template, store)

        if "run" in wanted:
            rows.append(pair("one help-desk `python -m pipeline` (existing store)",
                             [PY, "-m", "pipeline", "quiet=true"], "import mlflow, hydra", mlflow_hydra, folder,
                             args.repeats, 1.3, fresh_store))
        if "study" in wanted:
            rows.append(pair("the 4-system help-desk study", [PY, "-m", "pipeline", "-m", "experiment=helpdesk_study",
                             "quiet=true"], "import mlflow, hydra", mlflow_hydra, folder, args.repeats, 3, fresh_store))
        if "compare" in wanted:
            db = store_of_200_runs(folder)
            uri = ["--tracking-uri", f"sqlite:///{db}", "--corpus", "scifact"]
            rows.append(pair("`pipeline.compare` on a store of 200 runs",
                             [PY, "-m", "pipeline.compare", "BM25 k1=1", "BM25 k1=3", *uri], "import mlflow",
                             mlflow_, folder, args.repeats, 2))
            rows.append(pair("`pipeline.gate` on a store of 200 runs",
                             [PY, "-m", "pipeline.gate", "BM25 k1=5", "--baseline", "BM25 k1=7", *uri],
                             "import mlflow", mlflow_, folder, args.repeats, 2))
        if "sweep" in wanted and SCIFACT.is_dir():
            # the corpus config's path is relative to the repository root; these commands start in a temporary folder
            scifact = ["corpus=scifact", f"corpus.path={SCIFACT}", "metrics=beir", "quiet=true"]
            one, sweep = [], []
            for _ in range(max(SWEEP_TURNS, args.repeats // 2)):
                one.append(timed([PY, "-m", "pipeline", *scifact], folder, fresh_store))
                sweep.append(timed([PY, "-m", "pipeline", "-m", *scifact, *GRID], folder, fresh_store))
            rows.append(Row("a 12-point SciFact BM25 sweep", statistics.median(sweep), "one SciFact run",
                            statistics.median(one), 2))
        if "ui" in wanted:
            seconds = ui_seconds(folder, max(1, args.repeats // 2))
            theirs = ui_seconds(folder, max(1, args.repeats // 2), mlflow_ui=True)
            extra.append(f"- `make ui` answered /health after {seconds:.1f} s (median; target: within 10 s): "
                         f"{'met' if seconds <= 10 else 'NOT met'}; `mlflow ui --workers 1` on the same store "
                         f"after {theirs:.1f} s")
    load = os.getloadavg()
    head = [f"# Command latency (`python -m bench.latency --repeats {args.repeats}`)", "",
            f"{time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} cores, load average at the end "
            f"{load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}. Medians of fresh processes, each taken turn about with "
            f"its baseline.", "",
            "| command | s | baseline | baseline s | ratio | target | |", "|---|---:|---|---:|---:|---|---|"]
    text = "\n".join([*head, *(r.line() for r in rows), "", *extra]) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    (args.out.with_suffix(".json")).write_text(json.dumps([r.__dict__ | {"ratio": r.ratio} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
