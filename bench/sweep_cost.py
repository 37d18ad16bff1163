"""``python -m bench.sweep_cost``: what a 12-point BM25 k1 x b sweep on SciFact costs against one run.

Each measurement is the real command (``python -m pipeline ...``) in a fresh folder with an empty term-count
cache and an empty, already-migrated MLflow store (creating a store is paid once per store, not per run).
Reported per command, as medians over ``--repeats``: wall-clock seconds, CPU seconds of the command's process
tree (steadier than wall time on a shared machine), and the job work MLflow recorded (the sum of the runs'
``system/time_*_s`` metrics: loading, indexing, ranking, evaluation, bootstrap). The ratios divide a
sweep's figure
by the single run's. The target (issue 6): the basic-launcher sweep costs at most 3x one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.paths import REPO, SCIFACT

GRID = ["retriever.k1=0.6,0.9,1.2,1.5", "retriever.b=0.3,0.6,0.75"]  # 12 points

COMMANDS = {
    "single run": [],
    "12-point sweep": ["-m", *GRID],
    "12-point sweep, cache.enabled=false": ["-m", *GRID, "cache.enabled=false"],
    "12-point sweep, hydra/launcher=joblib": ["-m", *GRID, "hydra/launcher=joblib"],
}


def empty_store(folder: Path) -> Path:
    """A migrated, empty SQLite store to copy into every measurement's folder."""
    path = folder / "template.db"
    code = f"from mlflow import MlflowClient; MlflowClient('sqlite:///{path}').search_experiments()"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return path


def job_seconds(db: Path) -> float:
    """Sum of the job runs' ``system/time_*_s`` metrics in the store (the parent of a sweep has none)."""
    code = (
        "import sys; from mlflow import MlflowClient\n"
        f"c = MlflowClient('sqlite:///{db}'); e = c.get_experiment_by_name('rankscope')\n"
        "print(sum(v for r in c.search_runs([e.experiment_id]) for k, v in r.data.metrics.items()"
        " if k.startswith('system/time_')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def measure(args: list[str], scifact: Path, template: Path, scratch: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, job s) of one command in a fresh folder."""
    folder = Path(tempfile.mkdtemp(dir=scratch))
    shutil.copy(template, folder / "mlflow.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["RANKSCOPE_CACHE_DIR"] = str(folder / "cache")
    flags = [a for a in args if a.startswith("-")]  # Hydra takes -m before the overrides, not among them
    command = [sys.executable, "-m", "pipeline", *flags, "corpus=beir", f"corpus.path={scifact}", "metrics=beir",
               "quiet=true", *[a for a in args if not a.startswith("-")]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    work = job_seconds(folder / "mlflow.db")
    shutil.rmtree(folder, ignore_errors=True)
    return wall, cpu, work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help=f"BEIR SciFact folder (default: {SCIFACT})")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command; the median is reported")
    parser.add_argument("--no-joblib", action="store_true", help="skip the joblib sweep")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    if not any((args.scifact / name).is_file() for name in ("corpus.jsonl", "corpus.jsonl.gz")):
        raise SystemExit(f"SciFact not found at {args.scifact} (give --scifact FOLDER)")
    commands = {k: v for k, v in COMMANDS.items() if not (args.no_joblib and "joblib" in k)}
    with tempfile.TemporaryDirectory(prefix="sweep-cost-") as scratch:
        template = empty_store(Path(scratch))
        figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
        for _ in range(args.repeats):  # interleaved, so a burst of load elsewhere hits every command alike
            for name, extra in commands.items():
                figures[name].append(measure(extra, args.scifact, template, Path(scratch)))
                print(f"{name}: wall {figures[name][-1][0]:.1f} s, CPU {figures[name][-1][1]:.1f} s, "
                      f"jobs {figures[name][-1][2]:.2f} s", file=sys.stderr, flush=True)
    medians = {name: tuple(statistics.median(f[i] for f in runs) for i in range(3)) for name, runs in figures.items()}
    base = medians["single run"]
    lines = [
        f"SciFact ({args.scifact.name}), BM25, metrics=beir; median of {args.repeats}; {os.cpu_count()} cores",
        "",
        "| command | wall s | CPU s | job work s | wall ratio | CPU ratio | job-work ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (wall, cpu, work) in medians.items():
        lines.append(f"| {name} | {wall:.1f} | {cpu:.1f} | {work:.2f} | {wall / base[0]:.2f}x | {cpu / base[1]:.2f}x "
                     f"| {work / base[2]:.2f}x |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
