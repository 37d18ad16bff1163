"""Stress: a real sweep stopped at random moments (kill -9, SIGINT, SIGTERM), then resumed; nothing may be lost,
logged twice or left RUNNING.

``python -m bench.interruptions --repeats 20`` runs, in a fresh folder each time, a 4-point help-desk BM25 sweep;
after a random delay (anywhere from start-up to the last point's logging) it sends a random one of the three
signals, then runs the same command again in the same sweep folder (the resume) and checks the store: every point
FINISHED exactly once among the active runs, no run RUNNING, the parent FINISHED. It prints one line per repeat
and the totals, and exits 1 if anything was lost, duplicated or left RUNNING.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.paths import REPO

K1 = ["0.3", "0.6", "0.9", "1.2"]
SIGNALS = {"kill -9": signal.SIGKILL, "SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def command(sweep_dir: Path) -> list[str]:
    return [sys.executable, "-m", "pipeline", "-m", f"retriever.k1={','.join(K1)}", f"hydra.sweep.dir={sweep_dir}",
            "quiet=true"]


def environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["RANKSCOPE_CACHE_DIR"] = str(folder / "cache")
    return env


def check(folder: Path) -> dict[str, int]:
    """What the store holds after the resume: points lost, points logged twice, runs RUNNING, parent not done."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    jobs = [r for r in runs if r.data.tags.get("rankscope.kind") == "job" and r.info.status == "FINISHED"]
    logged = [r.data.params.get("retriever.k1") for r in jobs]
    parents = [r for r in runs if r.data.tags.get("rankscope.kind") == "sweep"]
    return {"lost": sum(k not in logged for k in K1), "duplicated": len(logged) - len(set(logged)),
            "running": sum(r.info.status == "RUNNING" for r in runs),
            "parent_not_finished": sum(p.info.status != "FINISHED" for p in parents) + (len(parents) != 1)}


def repeat(number: int, rng: random.Random, folder: Path, longest: float) -> dict[str, object]:
    sweep_dir = folder / "sweep"
    name = rng.choice(list(SIGNALS))
    delay = rng.uniform(0.5, longest)
    env = environment(folder)
    process = subprocess.Popen(command(sweep_dir), cwd=folder, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    process.send_signal(SIGNALS[name])
    _, err = process.communicate(timeout=600)
    lines = [line for line in err.splitlines() if line.strip()]
    resumed = subprocess.run(command(sweep_dir), cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    found = check(folder)
    return {"repeat": number, "signal": name, "after_s": round(delay, 1), "exit": process.returncode,
            "stderr_lines": len(lines), "traceback": "Traceback" in err, "resume_exit": resumed.returncode,
            **found, **({"stderr": err[-2000:]} if "Traceback" in err or len(lines) > 1 else {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.interruptions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--longest", type=float, help="latest moment of the signal, in seconds (default: how long "
                                                       "one uninterrupted sweep takes here, measured first)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here too")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    if args.longest is None:
        with tempfile.TemporaryDirectory(prefix="rankscope-stress-") as tmp:
            start = time.perf_counter()
            subprocess.run(command(Path(tmp) / "sweep"), cwd=tmp, env=environment(Path(tmp)), check=True,
                           capture_output=True)
            args.longest = time.perf_counter() - start
        print(f"one uninterrupted sweep: {args.longest:.1f} s; signals fall between 0.5 s and that", flush=True)
    results = []
    for number in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="rankscope-stress-") as tmp:
            found = repeat(number, rng, Path(tmp), args.longest)
        results.append(found)
        print(json.dumps(found), flush=True)
    totals = {key: sum(int(r[key]) for r in results) for key in ("lost", "duplicated", "running",
                                                                  "parent_not_finished", "traceback")}
    totals["resume_failed"] = sum(r["resume_exit"] != 0 for r in results)
    print(f"{args.repeats} repeats: {json.dumps(totals)}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"results": results, "totals": totals}, indent=1))
    return 1 if any(totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
