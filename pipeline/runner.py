"""Run one job with tracking: open its MLflow run, evaluate, write and log the results, print its table.

A job that fails on bad input (a missing corpus folder, an unknown key added with ``+``, a value out of range)
ends its run FAILED with the reason as a tag and prints that reason on one line; in a sweep the other jobs go
on. Any other exception also ends the run FAILED, then propagates (it is a bug, and deserves its traceback).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow import MlflowClient
from omegaconf import DictConfig

from metrics.errors import InputError
from pipeline.build import metric_plan, plain
from pipeline.collection import Collection
from pipeline.context import JobContext, SweepHandle, system_name
from pipeline.diagnose_job import check_diagnosis, diagnose_job
from pipeline.job import PER_QUESTION_TABLE, JobResult, evaluate_job, write_results
from pipeline.redact import redact_text
from pipeline.report import job_report
from pipeline.summary import TAG_JOB
from pipeline.tracking import (
    TAG_CORPUS_DIGEST,
    TAG_KIND,
    TAG_OVERRIDES,
    TAG_SYSTEM,
    Tracker,
    flatten,
    open_experiment,
    run_location,
    tracking_uri,
)

PROG = "rankscope"
OUTPUT_DIR_TAG = "rankscope.output_dir"
TAG_JUDGMENTS = "rankscope.judgments"  # the judgments file the job read: which split it was scored on


class JobFailed(Exception):
    """A job ended on bad input; already reported and logged."""


@dataclass(frozen=True)
class JobOutcome:
    """A logged job: its MLflow run id, and its result (None when it failed on bad input, inside a sweep)."""

    run_id: str
    result: JobResult | None


def run_job(cfg: DictConfig, ctx: JobContext) -> str:
    """Run and log one job; returns its MLflow run id. Raises :class:`JobFailed` (single runs) on bad input."""
    return execute_job(cfg, ctx).run_id


def execute_job(cfg: DictConfig, ctx: JobContext, tags: dict[str, str] | None = None,
                report: bool = True) -> JobOutcome:
    """:func:`run_job` keeping the result: ``tags`` are added to the run's; ``report=False`` prints nothing."""
    handle = SweepHandle.read(ctx.sweep_dir) if ctx.sweep_dir is not None else None
    system = system_name(str(cfg.retriever.get("name", "retriever")), ctx.overrides, handle.varying if handle else [])
    tags = {TAG_SYSTEM: system, TAG_OVERRIDES: " ".join(ctx.overrides), OUTPUT_DIR_TAG: str(ctx.output_dir),
            TAG_KIND: "job" if handle else "run", TAG_JOB: str(ctx.job_num), **(tags or {})}
    try:
        uri = tracking_uri(cfg.tracking.uri, ctx.launch_dir)
        if handle is not None:  # the sweep's driver created the store and the parent run
            client, experiment_id = MlflowClient(tracking_uri=uri), handle.experiment_id
        else:
            client, experiment_id = open_experiment(uri, cfg.tracking.experiment)
    except InputError as exc:
        _say_failed(ctx, str(exc))
        raise JobFailed(str(exc)) from None
    tracker = Tracker.start(client, experiment_id, system, tags, handle.parent_run_id if handle else None)
    try:
        tracker.log_params(job_params(cfg, ctx))
        check_diagnosis(cfg, metric_plan(cfg.metrics))  # a bad diagnosis block fails before the work
        result = evaluate_job(cfg, ctx.launch_dir, system)
        diagnosis = diagnose_job(result, cfg, ctx.launch_dir)  # adds its columns and failure counts to `result`
        files = write_results(result, cfg, ctx.output_dir) + diagnosis.write(ctx.output_dir)
        # Plug-in point: `result` holds the Collection, the Run and the per-question table; later stages
        # add their files to `files` here, before anything is logged.
        log_result(tracker, result, files)
        diagnosis.save_and_log_figures(ctx.output_dir, tracker)
    except InputError as exc:
        tracker.finish(error=str(exc))
        _say_failed(ctx, str(exc))
        if handle is None:
            raise JobFailed(str(exc)) from None
        return JobOutcome(tracker.run_id, None)
    except BaseException as exc:
        tracker.finish(error=f"{type(exc).__name__}: {exc}")
        raise
    tracker.finish()
    if report:
        where = "" if handle else "\nMLflow: " + run_location(uri, experiment_id, tracker.run_id)
        print(job_report(result) + "\n\n" + diagnosis.terminal_text() + where + "\n", flush=True)
    return JobOutcome(tracker.run_id, result)


def job_params(cfg: DictConfig, ctx: JobContext) -> dict[str, Any]:
    """The flattened resolved config (``retriever.k1``, ``corpus.name``...) plus the chosen config options."""
    params = flatten(plain(cfg))
    for group, choice in ctx.choices.items():
        if "/" not in group and "@" not in group and choice is not None:
            params.setdefault(group, choice)
    return params


def log_result(tracker: Tracker, result: JobResult, files: list[Path]) -> None:
    """Metrics (one batch), the corpus as a dataset input, the per-question table, the job's files."""
    c = result.collection
    tracker.log_metrics(result.metrics(), tags={TAG_CORPUS_DIGEST: c.digest, "rankscope.corpus": c.name,
                                                TAG_JUDGMENTS: c.judgments or f"{c.name}/{c.split}"})
    docs = _documents_frame(c)
    tracker.log_dataset(docs, name=f"{c.name}/{c.split}", digest=c.digest, source=c.source or c.name,
                        context="evaluation")
    tracker.log_table(result.table, PER_QUESTION_TABLE)
    tracker.log_files(files)


def _documents_frame(collection: Collection) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": collection.doc_ids, "text": collection.doc_texts})


def _say_failed(ctx: JobContext, reason: str) -> None:
    where = f"job {ctx.job_num} ({' '.join(ctx.overrides)})" if ctx.sweep_dir is not None else "error"
    print(f"{PROG}: {where}: {redact_text(reason)}".replace("\n", " "), file=sys.stderr, flush=True)
