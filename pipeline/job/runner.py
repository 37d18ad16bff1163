"""Run one job with tracking: evaluate, write the results to the job's folder, log them, print its table.

A job that fails on bad input (a missing corpus folder, an unknown key added with ``+``, a value out of range)
logs a FAILED run with the reason as a tag and prints that reason on one line; in a sweep the other jobs go
on. Any other exception also logs a FAILED run, then propagates (it is a bug, and deserves its traceback).
The MLflow run is created once the results exist (``pipeline.tracking.records``), with the job's start time.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig

from metrics.errors import InputError
from pipeline.analysis.summary import TAG_JOB
from pipeline.common.redact import redact_text
from pipeline.config.build import check_config, metric_plan, plain
from pipeline.data.collection import Collection
from pipeline.job.context import JobContext, SweepHandle, system_name
from pipeline.job.diagnose import PLOTS_DIR, check_diagnosis, diagnose_job
from pipeline.job.results import PER_QUESTION_TABLE, JobResult, evaluate_job, write_results
from pipeline.job.reuse import shared_collection
from pipeline.reports.html import save_figures
from pipeline.reports.text import job_report
from pipeline.tracking.identity import TAG_CONFIG_DIGEST, Identity, code_version, config_digest
from pipeline.tracking.records import JobRecord, TrackingUnavailable, finished_run, now_ms, publish, save_table
from pipeline.tracking.runs import (
    TAG_CORPUS_DIGEST,
    TAG_KIND,
    TAG_OVERRIDES,
    TAG_SYSTEM,
    dataset_fields,
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
    """A job: its MLflow run id (None when its results could not be logged yet), and its result (None when it
    failed on bad input inside a sweep, or was skipped because a resumed sweep already holds it)."""

    run_id: str | None
    result: JobResult | None


def run_job(cfg: DictConfig, ctx: JobContext) -> str | None:
    """Run and log one job; returns its MLflow run id. Raises :class:`JobFailed` (single runs) on bad input."""
    return execute_job(cfg, ctx).run_id


def execute_job(cfg: DictConfig, ctx: JobContext, tags: dict[str, str] | None = None,
                report: bool = True) -> JobOutcome:
    """:func:`run_job` keeping the result: ``tags`` are added to the run's; ``report=False`` prints nothing.

    The results are written to the job's folder (``record.json`` and its files) before anything is logged, so
    a tracking store that stops answering loses nothing: the job fails saying so, and ``python -m pipeline.sync``
    logs it later. In a resumed sweep, a job whose result the parent run already holds (same config, corpus and
    code) is skipped.
    """
    handle = SweepHandle.read(ctx.sweep_dir) if ctx.sweep_dir is not None else None
    system = system_name(str(cfg.retriever.get("name", "retriever")), ctx.overrides, handle.varying if handle else [])
    tags = {**config_tags(cfg), TAG_SYSTEM: system, TAG_OVERRIDES: " ".join(ctx.overrides),
            OUTPUT_DIR_TAG: str(ctx.output_dir), TAG_KIND: "job" if handle else "run", TAG_JOB: str(ctx.job_num),
            **(tags or {})}
    try:
        uri = tracking_uri(cfg.tracking.uri, ctx.launch_dir)
        if handle is not None:  # the sweep's driver created the store and the parent run
            client, experiment_id = MlflowClient(tracking_uri=uri), handle.experiment_id
        else:
            client, experiment_id = open_experiment(uri, cfg.tracking.experiment)
    except InputError as exc:
        _say_failed(ctx, str(exc))
        raise JobFailed(str(exc)) from None
    tags[TAG_CONFIG_DIGEST] = config_digest(cfg)
    base = {"run_name": system, "experiment_id": experiment_id, "tracking_uri": redact_text(uri), "tags": tags,
            "parent_run_id": handle.parent_run_id if handle else None, "started_ms": now_ms()}
    try:
        check_config(cfg)
        check_diagnosis(cfg, metric_plan(cfg.metrics))  # a bad diagnosis block fails before the work
        started = time.perf_counter()
        collection = shared_collection(cfg.corpus, ctx.launch_dir)  # loaded once per process (pipeline.job.reuse)
        loaded = time.perf_counter() - started
        identity = Identity(tags[TAG_CONFIG_DIGEST], collection.digest, code_version())
        tags.update(identity.tags())
        if handle is not None and tags[TAG_KIND] == "job":  # tuning trials and evaluations always run
            done = _already_logged(client, experiment_id, handle.parent_run_id, identity, ctx)
            if done is not None:
                return JobOutcome(done, None)
        result = evaluate_job(cfg, ctx.launch_dir, system, collection)
        result.seconds["load"] = loaded
        diagnosis = diagnose_job(result, cfg, ctx.launch_dir)  # adds its columns and failure counts to `result`
        files = write_results(result, cfg, ctx.output_dir) + diagnosis.write(ctx.output_dir)
        files += save_figures(diagnosis.figures, ctx.output_dir / PLOTS_DIR)  # logged as the run's plots/*.png
        # Plug-in point: `result` holds the Collection, the Run and the per-question table; later stages
        # add their files to `files` here (inside the job's folder), before anything is logged.
        record = job_record(result, cfg, ctx, files, base)
        text = job_report(result) + "\n\n" + diagnosis.terminal_text()
    except InputError as exc:
        run_id = _failed(client, JobRecord.new(**base, params=job_params(cfg, ctx), error=str(exc)), ctx, handle)
        return JobOutcome(run_id, None)
    except Exception as exc:  # a bug: record the failure, then let it show its traceback
        _failed(client, JobRecord.new(**base, params=job_params(cfg, ctx), error=f"{type(exc).__name__}: {exc}"),
                ctx, handle, quiet=True)
        raise
    record.save(ctx.output_dir)
    try:
        published = publish(client, record, ctx.output_dir)
    except TrackingUnavailable as exc:
        if report:
            print(text + "\n", flush=True)
        _say_failed(ctx, not_logged(ctx, uri, str(exc)))
        if handle is None:
            raise JobFailed(str(exc)) from None
        return JobOutcome(None, result)
    if report:
        where = "" if handle else "\nMLflow: " + run_location(uri, experiment_id, published.run_id)
        print(text + where + "\n", flush=True)
    return JobOutcome(published.run_id, result)


def config_tags(cfg: DictConfig) -> dict[str, str]:
    """The user's extra tags (``+tags.owner=me``; a scheduled sweep adds its name and date)."""
    return {str(k): str(v) for k, v in (cfg.get("tags") or {}).items()}


def _already_logged(client: MlflowClient, experiment_id: str, parent_run_id: str, identity: Identity,
                    ctx: JobContext) -> str | None:
    """In a resumed sweep: the run that already holds this job's result, or the record computed earlier (now
    logged). None when the job must run (or when the store does not answer: the job runs and saves its record)."""
    earlier = JobRecord.load(ctx.output_dir)
    try:
        if earlier is not None and earlier.pending and earlier.error is None:
            if earlier.identity == identity:
                published = publish(client, earlier, ctx.output_dir)
                print(f"{PROG}: job {ctx.job_num} ({earlier.run_name}): logged the results computed earlier in "
                      f"{ctx.output_dir} as run {published.run_id}", flush=True)
                return published.run_id
            publish(client, earlier, ctx.output_dir)  # another config's result left here: never lose it
        run_id = finished_run(client, experiment_id, parent_run_id, identity)
    except (TrackingUnavailable, MlflowException, OSError):
        return None
    if run_id is not None:
        print(f"{PROG}: job {ctx.job_num} ({' '.join(ctx.overrides)}): already logged as run {run_id} (same config, "
              f"corpus and code): skipped", flush=True)
    return run_id


def _failed(client: MlflowClient, record: JobRecord, ctx: JobContext, handle: SweepHandle | None,
            quiet: bool = False) -> str | None:
    """A job that failed: its FAILED run (saved first, like any result), and its reason on one line."""
    record.ended_ms = now_ms()
    record.save(ctx.output_dir)
    try:
        run_id: str | None = publish(client, record, ctx.output_dir).run_id
    except TrackingUnavailable:
        run_id = None
    if quiet:
        return run_id
    _say_failed(ctx, str(record.error))
    if handle is None:
        raise JobFailed(str(record.error))
    return run_id


def not_logged(ctx: JobContext, uri: str, reason: str) -> str:
    folder = ctx.sweep_dir if ctx.sweep_dir is not None else ctx.output_dir
    return (f"results saved in {ctx.output_dir} but not logged: the tracking store {redact_text(uri)} did not "
            f"answer ({reason}); once it does, run: python -m pipeline.sync {folder}")


def job_params(cfg: DictConfig, ctx: JobContext) -> dict[str, Any]:
    """The flattened resolved config (``retriever.k1``, ``corpus.name``...) plus the chosen config options.

    ``gate`` and ``tags`` say how results are judged and labelled, not how they were made: they are left out."""
    tree = {k: v for k, v in plain(cfg).items() if k not in ("gate", "tags")}
    params = flatten(tree)
    for group, choice in ctx.choices.items():
        if "/" not in group and "@" not in group and choice is not None and group != "gate":
            params.setdefault(group, choice)
    return params


def job_record(result: JobResult, cfg: DictConfig, ctx: JobContext, files: list[Path],
               base: dict[str, Any]) -> JobRecord:
    """What the job's MLflow run will hold: params, metrics, corpus as dataset input, table, files."""
    c = result.collection
    base["tags"].update({TAG_CORPUS_DIGEST: c.digest, "rankscope.corpus": c.name,
                         TAG_JUDGMENTS: c.judgments or f"{c.name}/{c.split}"})
    dtypes = save_table(result.table, ctx.output_dir / PER_QUESTION_TABLE)
    dataset = dataset_fields(_documents_frame(c), name=f"{c.name}/{c.split}", digest=c.digest,
                             source=c.source or c.name)
    return JobRecord.new(**base, params=job_params(cfg, ctx), metrics=result.metrics(), dataset=dataset,
                         table=PER_QUESTION_TABLE, table_dtypes=dtypes,
                         files=[str(p.relative_to(ctx.output_dir)) for p in files], ended_ms=now_ms())


def _documents_frame(collection: Collection) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": collection.doc_ids, "text": collection.doc_texts})


def _say_failed(ctx: JobContext, reason: str) -> None:
    where = f"job {ctx.job_num} ({' '.join(ctx.overrides)})" if ctx.sweep_dir is not None else "error"
    print(f"{PROG}: {where}: {redact_text(reason)}".replace("\n", " "), file=sys.stderr, flush=True)
