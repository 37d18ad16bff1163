"""The end of a sweep: summarise the children MLflow holds, print, save and log the summary, close the parent,
then gate it. Used by the sweep's driver when its jobs are done and by ``python -m pipeline.sync`` afterwards."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.analysis.summary import SweepSummary, summarize
from pipeline.config.build import metric_plan
from pipeline.job.context import SweepHandle
from pipeline.sweep.children import children_closed
from pipeline.sweep.drawing import FirstFigures
from pipeline.sweep.exports import summary_text, write_summary
from pipeline.sweep.parent_summary import log_summary, view_lines
from pipeline.sweep.report import plots_and_report
from pipeline.sweep.resume import sweep_state, sync_command
from pipeline.tracking.links import run_location, run_url
from pipeline.tracking.records import JobRecord, pending_records
from pipeline.tracking.runs import Tracker

if TYPE_CHECKING:
    import pandas as pd


def close_sweep(parent: Tracker, experiment_id: str, sweep_dir: Path, uri: str, metrics: Any, title: str,
                diagnosis: Any, overrides: str,
                known: Mapping[str, pd.DataFrame] | None = None) -> tuple[SweepSummary, str | None]:
    """Summarise the children MLflow holds, print and save the summary, log it to the parent and close the parent
    (FAILED when a job failed or computed results it could not log). Used at the end of a sweep and by sync.
    ``known``: per-question tables read already, by run id (see :func:`pipeline.tracking.readback.logged_tables`).

    Closed again (a resumed or synced sweep), the parent's ``jobs/*`` metrics get the next step."""
    plan = metric_plan(metrics)
    systems = children_closed(parent, experiment_id, known=known)
    summary = summarize(systems, parent.run_id, plan.show, plan.primary, plan.confidence, plan.resamples, plan.seed,
                        compare=False)
    first = FirstFigures(summary, plan, diagnosis, sweep_dir)  # drawn beside while the systems are compared
    try:
        first.compare_beside(summary, plan)
        unlogged = pending_records(sweep_dir)
        text = summary_text(summary, title, unlogged, sweep_dir)
        where = run_location(uri, experiment_id, parent.run_id)
        handle = SweepHandle.read(sweep_dir)
        views = view_lines(parent.client, uri, experiment_id, summary, plan.primary, handle)
        print(f"\n{text}\n\nMLflow: parent {where}" + "".join(f"\n{line}" for line in views), flush=True)
        # Plug-in point: later views of the sweep build from `summary` (read back from MLflow) and add files here.
        files = write_summary(summary, text, sweep_dir)
        log_summary(parent, summary, handle, len(unlogged))  # while the copy draws the first figures
        page = f"parent run {parent.run_id}: {run_url(uri, experiment_id, parent.run_id)}"
        files += plots_and_report(summary, plan, diagnosis, title, sweep_dir, parent,
                                  {"MLflow": page, "overrides": overrides}, first)
        parent.wait_later()  # the summary logged (a store error is the sweep's, not its report's)
    finally:
        first.stop()  # stopped on the way (an error, Ctrl-C), no copy is left drawing
    parent.log_files(files)
    error = sweep_error(summary, unlogged, sweep_dir)
    parent.finish(error=error)
    return summary, error


def sweep_error(summary: SweepSummary, unlogged: list[tuple[Path, JobRecord]], sweep_dir: Path) -> str | None:
    """Why the sweep's parent closes FAILED (a job failed, none ran, results wait to be logged, points never
    finished), or None."""
    failed = len(summary.failed)
    problems = []
    if failed or not (summary.systems or unlogged):
        problems.append(f"{failed} of {len(summary.systems)} jobs failed" if summary.systems else "no job ran")
    if unlogged:
        problems.append(f"{len(unlogged)} job(s) computed but not logged: run {sync_command(sweep_dir)}")
    state = sweep_state(sweep_dir)
    if state.missing:
        problems.append(f"incomplete: {state.counts()}")
    return "; ".join(problems) or None
