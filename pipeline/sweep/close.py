"""The end of a sweep: summarise the children MLflow holds, print, save and log the summary, close the parent,
then gate it. Used by the sweep's driver when its jobs are done and by ``python -m pipeline.sync`` afterwards."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metrics.spec import MetricSpec
from pipeline.analysis.summary import SweepSummary, SystemRun, compare_systems, summarize
from pipeline.common import commands
from pipeline.common.forking import one_blas_thread
from pipeline.common.names import (
    DIFFERENCES_FILE,
    JOBS_PREFIX,
    LOWER,
    PROG,
    RANKS_FILE,
    SUMMARY_TABLE,
    SUMMARY_TEXT,
    SYSTEMS_FILE,
    TAG_BEST,
    TAG_CORPUS,
    TAG_DESCRIPTION,
    UPPER,
)
from pipeline.common.redact import redact_text
from pipeline.config.build import metric_plan
from pipeline.job.context import SweepHandle
from pipeline.reports.text import best_tag, sweep_description, sweep_text
from pipeline.sweep.report import FirstFigures, plots_and_report
from pipeline.sweep.resume import sweep_state
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.links import experiment_url, run_location, run_url
from pipeline.tracking.readback import child_runs
from pipeline.tracking.records import pending_records
from pipeline.tracking.runs import Tracker, log_parent_summary
from pipeline.tracking.store import store_error
from pipeline.tracking.views import save_view

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
        with one_blas_thread(first.drawn_beside):  # a second BLAS thread would wait for the copy's core
            compare_systems(summary, plan.confidence, plan.resamples, plan.seed)
        unlogged = pending_records(sweep_dir)
        text = sweep_text(summary, title)
        if unlogged:
            folders = ", ".join(str(folder.relative_to(sweep_dir)) for folder, _ in unlogged)
            text += (f"\n\nNOT LOGGED: {len(unlogged)} job(s) computed their results but could not log them (folders "
                     f"{folders}); once the tracking store answers: {sync_command(sweep_dir)}")
        where = run_location(uri, experiment_id, parent.run_id)
        handle = SweepHandle.read(sweep_dir)
        views = [f"MLflow view of {corpus} ({plan.primary.name} with its interval, the swept settings; every run on "
                 f"{corpus}): {redact_text(experiment_url(uri, experiment_id, view))}"
                 for corpus, view in save_views(parent.client, experiment_id, summary, plan.primary, handle)]
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
    failed = len(summary.failed)
    parent.log_files(files)
    problems = []
    if failed or not (summary.systems or unlogged):
        problems.append(f"{failed} of {len(summary.systems)} jobs failed" if summary.systems else "no job ran")
    if unlogged:
        problems.append(f"{len(unlogged)} job(s) computed but not logged: run {sync_command(sweep_dir)}")
    state = sweep_state(sweep_dir)
    if state.missing:
        problems.append(f"incomplete: {state.counts()}")
    error = "; ".join(problems) or None
    parent.finish(error=error)
    return summary, error


def close_children(client: MlflowClient, systems: list[SystemRun],
                   reason: str = "the job's process ended without closing it") -> None:
    """A child still RUNNING now lost its process: record that it failed, and why."""
    for system in systems:
        if system.status == "RUNNING":
            Tracker(client, system.run_id).finish(error=reason)
            system.status = "FAILED"


def write_summary(summary: SweepSummary, text: str, sweep_dir: Path) -> list[Path]:
    """The sweep's result files, in the sweep directory (and logged to the parent run)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    files = [sweep_dir / SUMMARY_TEXT]
    files[0].write_text(redact_text(text) + "\n", encoding="utf-8")
    for frame, name in ((summary.means, SYSTEMS_FILE), (summary.first_rank, RANKS_FILE),
                        (summary.differences, DIFFERENCES_FILE)):
        if not frame.empty:
            frame.to_csv(sweep_dir / name)
            files.append(sweep_dir / name)
    return files


def sync_command(sweep_dir: Path) -> str:
    return commands.line(commands.module("pipeline.sync", str(sweep_dir)))


def log_summary(parent: Tracker, summary: SweepSummary, handle: SweepHandle | None, unlogged: int) -> None:
    """The parent's ``jobs/*`` counts, the summary table and what a collapsed runs list shows of a sweep: the corpus
    (dataset input), the swept keys and their values (params), the best system's primary metric with its interval
    (metrics) and its name (tag).

    Handed to the store process without waiting (:meth:`Tracker.run_later`): its eight round trips (about 0.1 s)
    overlap the plots and the report; a store error is raised after them (:meth:`Tracker.wait_later`)."""
    counts = {JOBS_PREFIX + "finished": len(summary.finished), JOBS_PREFIX + "failed": len(summary.failed),
              JOBS_PREFIX + "not_logged": unlogged}
    table = None if summary.means.empty else summary.means.reset_index()
    finished = summary.finished
    swept: dict[str, list[str]] = {}
    for point in (handle.points or []) if handle is not None and finished else []:
        for override in point:
            key, _, value = override.lstrip("+~").partition("=")
            if key in handle.varying:
                swept.setdefault(key, []).append(value)
    best = next((s for s in finished if s.name == summary.best), None)
    key = summary.primary.mlflow_key
    metrics = {k: best.metrics[k] for k in (key, key + LOWER, key + UPPER) if k in best.metrics} if best else {}
    corpora = corpora_of(summary)
    tags = {TAG_DESCRIPTION: sweep_description(summary, ", ".join(corpora) or None, swept_settings(summary, handle))}
    named = best_tag(summary)
    if named:
        tags[TAG_BEST] = named
    if len(corpora) == 1:  # the parent joins its children's group in the corpus's saved view
        tags[TAG_CORPUS] = corpora[0]
    parent.run_later(log_parent_summary, JOBS_PREFIX + "finished", counts, table, SUMMARY_TABLE,
                     finished[0].run_id if finished else None,
                     {k: ",".join(dict.fromkeys(v)) for k, v in swept.items()}, metrics, tags)


def corpora_of(summary: SweepSummary) -> list[str]:
    """The corpora the sweep's finished systems were measured on (their ``rankscope.corpus`` tags), in job order."""
    return list(dict.fromkeys(s.tags[TAG_CORPUS] for s in summary.finished if s.tags.get(TAG_CORPUS)))


def swept_settings(summary: SweepSummary, handle: SweepHandle | None) -> list[str]:
    """The settings the sweep varied that its runs hold as params (``retriever``, ``retriever.k1`` ...), in the
    order they were given; the corpus is not one (views and descriptions are per corpus)."""
    held = {k for s in summary.finished for k in s.params}
    return [k for k in (handle.varying if handle else []) if k in held and k != "corpus"]


def save_views(client: MlflowClient, experiment_id: str, summary: SweepSummary, primary: MetricSpec,
               handle: SweepHandle | None) -> list[tuple[str, str]]:
    """The saved view of each corpus the sweep measured, its swept settings added: ``(corpus, view key)``."""
    settings = swept_settings(summary, handle)
    return [(corpus, save_view(client, experiment_id, corpus, primary.mlflow_key, primary.name, settings))
            for corpus in corpora_of(summary)]


def children_closed(parent: Tracker, experiment_id: str, reason: str | None = None,
                    known: Mapping[str, pd.DataFrame] | None = None, tables: bool = True) -> list[SystemRun]:
    """The parent's children as MLflow holds them (with their per-question tables, unless not ``tables``), any left
    RUNNING closed FAILED first."""
    systems = child_runs(parent.client, experiment_id, parent.run_id, known, tables)
    close_children(parent.client, systems, *([reason] if reason else []))
    return systems


def abandon(parent: Tracker, experiment_id: str) -> None:
    """A sweep that stopped before its end: its children still RUNNING and the parent are closed FAILED. At exit, so
    it reports rather than raises."""
    try:
        children_closed(parent, experiment_id, "the sweep stopped before this job ended", tables=False)
        parent.finish(error="the sweep stopped before all jobs ended")
    except Exception as exc:
        print(f"{PROG}: could not close the sweep's MLflow runs ({store_error(exc)}): the resume closes them",
              file=sys.stderr, flush=True)
