"""What the driver does ahead of its jobs, and undoes once they are done: the store checked before the first corpus
is read and opened while it is read; the first job's corpus loaded and each job's plan kept for it to take; at the
end, every job's run logged and the plans forgotten before the sweep's end reads the runs back."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from pipeline.config.plan import JobPlan, forget_plans_ahead, plan_ahead
from pipeline.job.reuse import load_ahead
from pipeline.job.run import finish_waiting
from pipeline.tracking import background
from pipeline.tracking.readback import logged_tables
from pipeline.tracking.store import check_reachable, open_ahead, tracking_uri

if TYPE_CHECKING:
    import pandas as pd


def reachable_store(config: DictConfig, launch_dir: Path) -> str:
    """The tracking URI; an InputError now for a closed port, before the first corpus is read."""
    uri = tracking_uri(config.tracking.uri, launch_dir)
    check_reachable(uri)
    return uri


def prepare_ahead(uri: str, experiment: str, checked: list[tuple[JobPlan, DictConfig]], launch_dir: Path) -> None:
    """Every job checked, for jobs run in this process: the store is opened by the store process while the first
    job's corpus is read here, and each job takes its plan instead of checking its config again."""
    if not checked:
        return
    open_ahead(uri, experiment)
    plan, job_cfg = checked[0]
    load_ahead(plan.corpus, job_cfg.corpus)  # the first job finds its corpus loaded
    for plan, _ in checked:
        plan_ahead(plan, launch_dir)


def jobs_settled(sweep_dir: Path | None) -> Mapping[str, pd.DataFrame]:
    """Once the jobs are done: the last job's record logged (once its plots are drawn), every job's run logged (or
    said not to be), the plans forgotten. Returns the per-question tables read already of the sweep in
    ``sweep_dir`` (None: none to read), by run id (see :func:`pipeline.tracking.readback.logged_tables`)."""
    finish_waiting()
    known = logged_tables(sweep_dir) if sweep_dir is not None else {}
    background.settle()
    forget_plans_ahead()
    return known
