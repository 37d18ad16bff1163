"""The sweep's parent MLflow run, opened before any job: its name and tags, reopened when the sweep resumes in its
folder, and the hand-off file (``mlflow_sweep.json``) the jobs read to nest their runs under it."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from pipeline.common import commands, interrupts
from pipeline.common.names import KIND_SWEEP, PROG, TAG_KIND, TAG_LAUNCHER, TAG_OVERRIDES, TAG_SWEEP_DIR
from pipeline.common.redact import redact_text
from pipeline.job.context import SweepHandle, config_tags, configured_corpus, run_name
from pipeline.sweep.jobs import SweepJobs
from pipeline.sweep.resume import open_parent
from pipeline.tracking.runs import Tracker


def parent_name(config: DictConfig, jobs: SweepJobs, sweep_dir: Path) -> str:
    """The study's name, else the swept overrides, else the folder's; and the corpus, or "several corpora"."""
    several = any(key.startswith("corpus") for key in jobs.varying)
    return run_name(config.get("study") or " ".join(jobs.swept) or sweep_dir.name,
                    "several corpora" if several else configured_corpus(config.corpus))


def open_sweep(config: DictConfig, jobs: SweepJobs, uri: str, sweep_dir: Path,
               name: str) -> tuple[Tracker, SweepHandle]:
    """The parent run (reopened when the sweep resumes in its folder, said so) and the hand-off written for the
    jobs; a Ctrl-C from now on says how to resume. An InputError (a refused URI, an unreachable server, a busy
    folder) before anything starts."""
    tags = {**config_tags(config), TAG_KIND: KIND_SWEEP, TAG_SWEEP_DIR: str(sweep_dir),
            TAG_OVERRIDES: " ".join(jobs.overrides), TAG_LAUNCHER: jobs.launcher}
    parent, experiment_id, resumed = open_parent(uri, config.tracking.experiment, sweep_dir, name, tags)
    if resumed:
        print(f"{PROG}: resuming the sweep in {sweep_dir} (parent run {parent.run_id}): jobs already "
              f"logged are skipped", flush=True)
    hydra_args = [o for o in config.hydra.overrides.hydra if not str(o).startswith(("hydra.sweep.dir=",
                                                                                         "hydra.mode="))]
    resume = commands.module("pipeline", "-m", *map(str, hydra_args), *map(str, config.hydra.overrides.task),
                             f"hydra.sweep.dir={sweep_dir}")
    resume = [redact_text(arg) for arg in resume]  # a secret given on the command line is typed again
    points = None if jobs.points is None else [[redact_text(o) for o in job] for job in jobs.points]
    handle = SweepHandle(experiment_id, parent.run_id, jobs.varying, points, resume, resumed)
    handle.write(sweep_dir)
    interrupts.watch(sweep_dir=sweep_dir, resume=resume)
    return parent, handle
