"""Run ``python -m pipeline`` for real, as a user would, with everything it writes kept in one folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from mlflow import MlflowClient

from pipeline.common.names import CACHE_PREFIX

REPO = Path(__file__).resolve().parents[2]


def cli_env(folder: Path, code: Path | None = None) -> dict[str, str]:
    """The user's environment minus any MLflow settings, with the checkout importable and caches in ``folder``;
    ``code``: a copy of the code to run instead of the checkout's (:func:`frozen_code`), the checkout still giving
    ``tests``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_") and k != "HYDRA_FULL_ERROR"}
    first = [str(code)] if code is not None else []
    env["PYTHONPATH"] = os.pathsep.join([*first, str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["RANKSCOPE_CACHE_DIR"] = str(folder / "cache")
    return env


def run_pipeline(folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600,
                 code: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m pipeline ARGS`` launched from ``folder``: the default store is ``<folder>/mlflow.db``."""
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=folder,
                          env={**cli_env(folder, code), **(env or {})}, capture_output=True, text=True, timeout=timeout)


def frozen_code(folder: Path) -> Path:
    """A copy of the code that decides a result (``pipeline.tracking.provenance.SOURCES``, compiled files included)
    in ``folder``, for commands that must all run the same code: a job's identity includes the code version, read
    from the checkout's git state when the command starts, so an edit to the checkout (or a new file under ``conf/``)
    between two commands of one test makes every result of the first "other code" to the second. The copy is no git
    checkout: its code version is rankscope's version, whatever happens to the checkout meanwhile."""
    from pipeline.tracking.provenance import SOURCES

    for name in SOURCES:
        shutil.copytree(REPO / name, folder / name, symlinks=True)  # copy2 keeps the times the .pyc files check
    return folder


def job_runs(folder: Path) -> list:
    """The job runs (not the sweep's parent) of the store in ``folder``, in job order."""
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    runs = [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("rankscope.kind") != "sweep"]
    return sorted(runs, key=lambda r: int(r.data.tags.get("rankscope.job", 0)))


def counters(run) -> dict[str, int]:
    return {k.removeprefix(CACHE_PREFIX): int(v) for k, v in run.data.metrics.items() if k.startswith(CACHE_PREFIX)}


def by_system(runs: list) -> dict[str, object]:
    return {r.data.tags["rankscope.system"]: r for r in runs}


def runs_with_cache(folder: Path, empty_store: Path, cache_dir: Path, *args: str, code: Path | None = None) -> list:
    """``python -m pipeline ARGS`` in ``folder`` (a fresh copy of the empty store) with the term-count cache in
    ``cache_dir`` (and ``code``, as :func:`cli_env`); returns its job runs. Fails the test, with the command's last
    words, if the command fails."""
    shutil.copy(empty_store, folder / "mlflow.db")
    done = run_pipeline(folder, *args, env={"RANKSCOPE_CACHE_DIR": str(cache_dir)}, code=code)
    assert done.returncode == 0, done.stderr[-3000:]
    return job_runs(folder)


def log_run(folder: Path, *overrides: str, experiment: str = "rankscope") -> str:
    """One ``python -m pipeline OVERRIDES`` run, in this process (no Hydra launcher: fast), logged to
    ``<folder>/mlflow.db``; returns its MLflow run id."""
    from hydra import compose, initialize_config_dir

    import pipeline.app  # registers the schemas and the rankscope.stamp resolver
    from pipeline.job.context import JobContext
    from pipeline.job.run import execute_job

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*overrides, f"tracking.uri={uri}", f"tracking.experiment={experiment}",
                                           f"cache.dir={folder / 'cache'}"])
    output = folder / "outputs" / uuid.uuid4().hex[:8]
    return execute_job(cfg, JobContext(launch_dir=REPO, output_dir=output, overrides=list(overrides))).run_id
